/* pycell: MCP: the sessions feature's own header, for its two files:
 * sessions.c (the tools, the timer, the cells) and session_state.c
 * (pause, resume, fork).  No other file includes it. */
#ifndef PYCELL_MCP_SESSIONS_INT_H
#define PYCELL_MCP_SESSIONS_INT_H

#include "mcp/internal.h"
#include "run/session.h"
#include "run/state.h"

/* A state transfer a session is part of: its own pause, the snapshot a
 * fork of it takes, the snapshot it is resumed or forked from. */
enum ts_xfer { TS_NONE, TS_PAUSE, TS_FORK_SOURCE, TS_RESUME, TS_FORK_TARGET };

struct tool_session {
	struct tool_session *next;
	struct mcp_server *srv;
	char id[RANDOM_ID_SIZE];
	char *owner;                  /* its client's principal (NULL: the anonymous one) */
	const struct run_env *env;    /* its policy, from its open (a reload changes the server's) */
	struct session *live;         /* its jail, with the interpreter (run/session.h) */
	struct mcp_call *opening;     /* session_open, until the jail is ready */
	struct mcp_call *call;        /* the run_python call of its cell, queued or running */
	uint64_t t_opened, t_last, idle_ms, lifetime_ms, open_ms;
	unsigned cells;
	bool ready;                   /* the jail said so */
	bool closed;                  /* off the list for good; freed once not held */
	struct pc_err open_err;       /* the open failed (open_err.msg[0]) */
	/* its packages (session_open's): being had, then held while it lives */
	struct pkg_op *pkg_op;
	char *pkg_dir;
	uint64_t t_jail;              /* when its jail was asked for */

	/* its state, with a state directory or in a fork */
	uint64_t opened_wall;         /* when it was first opened (wall clock, ms) */
	enum ts_xfer xfer;
	int state_fd;                 /* the snapshot being written or read; -1: none */
	bool jail_ready;              /* resume, fork target: the jail is there, waiting for its state */
	bool state_ready;             /* fork target: the source's snapshot is whole */
	bool paused;                  /* resume: made from a record; its cell waits for the restore */
	bool damaged;                 /* resume: its snapshot cannot be restored, and goes */
	struct tool_session *peer;    /* a fork's other side, while its snapshot is made */
	char forked_from[RANDOM_ID_SIZE];
	json_t *not_kept;             /* what its last snapshot left out, for the answer or the next cell */
	bool resumed;                 /* its next cell's result says it was paused and resumed */
	uint64_t paused_ms;           /* how long it was paused (resumed) */
	uint64_t xfer_bytes;          /* its snapshot's size */
	uint64_t t_xfer;              /* when its pause began */
	uint64_t resumed_cell;        /* the cell it was resumed for (its result says so) */
	const char *close_why;        /* to be closed, from the loop (settle), for this reason */
	bool drop_snapshot;           /* resumed: its snapshot goes once its first cell was answered */
	bool foreign;                 /* resumed here, its handle naming another replica: pauses after each cell */
	bool cell_waits;              /* its cell's turn came while it paused: it runs once that is done */
};

/* The server's sessions (s->sessions). */
struct mcp_sessions {
	struct tool_session *list;    /* from its open until it is freed */
	int fd;                       /* timer: idle and lifetime limits, every second */
	struct loop_watch w;
	bool quiescing;               /* the server stops: idle sessions pause (with a state directory) */
	uint64_t t_swept;             /* expired paused sessions were last removed then */
};

/* Answer r with an isError result whose text is printf's. */
#define TOOL_ERROR(r, ...) mcp_answer((r), mcp_tool_error((r)->v, __VA_ARGS__))
extern const char ts_not_found[];

/* sessions.c */
/* A new session of principal's, not yet on the list; then on it. */
struct tool_session *ts_new(struct mcp_server *s, const char *principal);
void ts_push(struct mcp_server *s, struct tool_session *p);
/* p, being made, goes on the list, and r waits for it (answer_open). */
void ts_opening(struct mcp_server *s, const struct mcp_req *r, struct tool_session *p);
void tool_session_free(struct tool_session *p);
/* Close p: killed now if its cell runs; freed by settle once nothing holds it. */
void tool_session_close(struct tool_session *p, const char *why);
struct tool_session *ts_find(struct mcp_server *s, const json_t *id, const char *principal);
/* The jail's callbacks of every session's jail. */
void ts_on_ready(struct session *live, const struct pc_err *err, void *ctx);
void ts_on_gone(struct session *live, void *ctx);
/* The arguments of tool name: an object with only the keys in allowed
 * (",a,b,"), which says says; else r is answered why not. */
bool ts_check_keys(const struct mcp_req *r, const char *name, const json_t *args, const char *allowed,
		   const char *says);
unsigned ts_count_open(const struct mcp_server *s, const char *principal, bool mine);
/* Send c's cell to its session's jail. */
int ts_cell_send(struct mcp_call *c, struct pc_err *err);

/* session_state.c */
/* The paused session r's client names for tool: 0 and its record; -1,
 * r answered (not found, or its record damaged and removed). */
int ts_find_paused(const struct mcp_req *r, const char *tool, const char *id, struct state_record *rec);
/* "a (socket), b (thread)": what was not kept, for a result's text. */
void ts_not_kept_text(const json_t *v, char *buf, size_t size);
/* Pause p (idle, the server stops, another replica's): then it closes. */
void ts_pause_start(struct tool_session *p);
/* A paused session back on the list from its record (its not_kept is
 * taken); its cell's start resumes it (ts_resume_start). */
struct tool_session *ts_resume_prepare(struct mcp_server *s, struct state_record *rec, const char *principal);
int ts_resume_start(struct tool_session *p, struct pc_err *err);
/* A resume or fork target whose jail is ready: its state next; or it failed. */
void ts_restore_maybe(struct tool_session *p);
void ts_restore_failed(struct tool_session *p, const struct pc_err *err);

#endif
