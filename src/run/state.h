/* pycell: the state directory (pycell.conf "state_dir"), where paused
 * sessions (and the records of tasks) are kept.  Each is two files in STATE_DIR/sessions: ID.snap,
 * the bytes the session's python wrote (runtime/pycell/_snapshot.py; the
 * supervisor never reads what is in them), and ID.json, its record: whose
 * it is, what made it, how big its snapshot is.  Both are written to a
 * temporary name, synced and renamed, the snapshot first: a record names
 * a whole snapshot or none is there.  A resume claims a record by renaming
 * it (one replica of several sharing the directory wins); the claim is
 * removed with the snapshot once the session lives again.
 *
 * The directory is refused when someone else could write it: it must be
 * the supervisor's own (or root's), not a symbolic link, and writable by
 * no group and no other user. */
#ifndef PYCELL_STATE_H
#define PYCELL_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "base/util.h"

/* A record is at most this big on disk (what a snapshot left out is
 * listed, to a point). */
#define STATE_RECORD_MAX (64 << 10)

struct state_dir;

struct state_record {
	char id[RANDOM_ID_SIZE];
	char *scope;                 /* which servers may resume it: "serve", or one stdio server's own */
	char *owner;                 /* its client's principal; NULL: the anonymous one */
	char *policy;                /* the policy it last ran under (what resumes it uses its own) */
	uint64_t opened_at, paused_at;   /* wall clock, ms since the epoch */
	uint64_t idle_ms;            /* its idle timeout */
	uint64_t lived_ms;           /* how long it lived before it paused (its lifetime counts that) */
	uint64_t bytes;              /* the snapshot's size */
	uint64_t cells;
	json_t *not_kept;            /* what the snapshot left out: [{name, why}] (owned) */
};

/* Open path (made, 0700, when missing), or say why it cannot be used. */
int state_dir_open(const char *path, struct state_dir **out, struct pc_err *err);
/* What state_dir_open would say of path, making nothing: 0 usable, 1
 * not there yet (a server makes it), -1 (err) refused. */
int state_dir_check(const char *path, struct pc_err *err);
void state_dir_free(struct state_dir *d);
const char *state_dir_path(const struct state_dir *d);
/* An id that can name files here: [0-9A-Za-z._-], not beginning with
 * a dot, at most RANDOM_ID_SIZE - 1 bytes. */
bool state_id_ok(const char *id);

/* A new snapshot of id, to write (its fd, read-write), then keep
 * (state_commit) or drop (state_abort).  -1 (err). */
int state_snap_create(struct state_dir *d, const char *id, struct pc_err *err);
/* Keep what fd holds as r->id's snapshot (r->bytes of it), with record
 * r; fd is closed either way.  -1 (err): nothing of it was kept. */
int state_commit(struct state_dir *d, const struct state_record *r, int fd, struct pc_err *err);
void state_abort(struct state_dir *d, const char *id, int fd);

/* id's record: 0; -1 with errno ENOENT (err: none such) or another
 * (err: why it cannot be read). */
int state_load(struct state_dir *d, const char *id, struct state_record *r, struct pc_err *err);
/* Claim id's record for a resume (renamed, so that no one else resumes
 * it too), and read it again (it may have been paused anew since it was
 * looked at): 0, or -1 (err) when someone else had it first. */
int state_claim(struct state_dir *d, const char *id, struct state_record *r, struct pc_err *err);
/* Give a claimed record back (the resume failed before it used it). */
void state_unclaim(struct state_dir *d, const char *id);
/* id's snapshot, opened to read, checked to be r->bytes long. */
int state_snap_open(struct state_dir *d, const struct state_record *r, struct pc_err *err);
/* Remove id's record, claim and snapshot. */
void state_remove(struct state_dir *d, const char *id);

/* Every record of scope (NULL: any) and owner (unless any_owner), read; the
 * caller frees them (state_record_free, then free). */
size_t state_list(struct state_dir *d, const char *scope, const char *owner, bool any_owner,
		  struct state_record **out);
/* Remove the sessions paused longer than keep_ms ago (0: none) and those
 * of scope (NULL: none), and what an interrupted write left; how many
 * sessions went. */
unsigned state_sweep(struct state_dir *d, uint64_t keep_ms, const char *scope);

/* Other state kept here: small JSON documents, each written whole and
 * synced as STATE_DIR/KIND/ID.json (KIND "tasks": mcp/tasks.c), read
 * back as untrusted text.  put: -1 (err) when it could not be kept. */
int state_doc_put(struct state_dir *d, const char *kind, const char *id, const char *text, struct pc_err *err);
/* 0 and the text (the caller frees it); -1 with errno ENOENT (none) or
 * another (err says why). */
int state_doc_get(struct state_dir *d, const char *kind, const char *id, size_t max, char **text,
		  struct pc_err *err);
void state_doc_drop(struct state_dir *d, const char *kind, const char *id);
/* Remove the documents of kind not written for max_age_ms; how many. */
unsigned state_doc_sweep(struct state_dir *d, const char *kind, uint64_t max_age_ms);

/* A record from its JSON text (what is on disk is checked as input). */
int state_record_parse(const char *text, size_t len, struct state_record *r, struct pc_err *err);
/* Its JSON text (the caller frees it). */
char *state_record_format(const struct state_record *r);
void state_record_free(struct state_record *r);
/* The wall clock, in ms since the epoch. */
uint64_t state_wall_ms(void);

#endif
