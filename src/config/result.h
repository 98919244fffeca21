/* pycell: the result of one run, one struct for every interface. */
#ifndef PYCELL_RESULT_H
#define PYCELL_RESULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/util.h"

enum run_status {
	RUN_OK = 0,          /* exited 0 */
	RUN_ERROR,           /* exited non-zero or killed by a signal of its own */
	RUN_TIMEOUT,         /* wall-clock limit */
	RUN_MEMORY_LIMIT,    /* the memory limit's OOM killer */
	RUN_KILLED,          /* cancelled / killed by the supervisor */
	RUN_SETUP_FAILED,    /* the jail could not be built */
};
#define RUN_STATUS_N (RUN_SETUP_FAILED + 1)

/* Which mechanism enforced a limit. */
enum limit_enforcer { ENF_NONE = 0, ENF_CGROUP2, ENF_CGROUP1, ENF_RLIMIT, ENF_TMPFS, ENF_SUPERVISOR };

struct limit_report {
	const char *name;    /* "memory", "pids", "cpu", "timeout", ... */
	uint64_t value;      /* what was asked (unit per name) */
	enum limit_enforcer by;
};

/* A stream's output, kept to a cap: all of it when it fits; otherwise its
 * head (the first half of the cap) and its tail (most of the rest) with a
 * marker of what was dropped between them. */
struct output_buf {
	char *data;          /* captured bytes, NUL-terminated: once finished, all
	                        of them, or the head, the marker and the tail */
	size_t len;
	size_t head_len;     /* finished: the bytes of data outbuf_append said were
	                        final as they came; what follows them is known only
	                        at the end */
	uint64_t dropped;    /* bytes beyond the cap, counted and dropped */
	bool truncated;
	bool finished;
	/* while capturing: data holds the head, the ring the latest bytes */
	size_t alloc;
	char *ring;
	size_t ring_cap, ring_len, ring_pos;
	uint64_t cap;
};
/* The head's and the tail's shares of a cap (below OUTBUF_SPLIT_MIN the
 * head has it all); the marker needs at most OUTBUF_MARKER_MAX bytes of it. */
#define OUTBUF_SPLIT_MIN 1024
#define OUTBUF_MARKER_MAX 96
void outbuf_init(struct output_buf *b, uint64_t cap);
/* Add n bytes; returns how many bytes of the head became final with them
 * (a caller may show those as they come, and the rest of data after
 * head_len once finished). */
size_t outbuf_append(struct output_buf *b, const char *p, size_t n);
/* The stream ended: data becomes head + marker + tail when it did not fit
 * (the cuts moved to UTF-8 character boundaries); head_len is set. */
void outbuf_finish(struct output_buf *b, const char *stream);
void outbuf_free(struct output_buf *b);

/* What a cell sends back besides its value (run_request.outputs), and
 * the caps the supervisor holds it to, per run or session cell. */
#define RESULT_IMAGES_MAX 8
#define RESULT_IMAGE_BYTES (4 << 20)
#define RESULT_IMAGES_BYTES (8 << 20)
#define RESULT_FILES_MAX 64
#define RESULT_FILES_BYTES (16 << 20)
#define RESULT_PATH_MAX 1024

#define RESULT_MAX_LIMITS 12
#define RESULT_MAX_WARNINGS 8

struct run_result {
	enum run_status status;
	const char *backend; /* "native" or "wasm" (static); NULL: "native" */
	/* what confines the program (jail_layers: static), NULL-terminated;
	 * NULL: not known (the run failed before its jail was chosen) */
	const char *const *layers;
	int exit_code;       /* -1 when killed by a signal or never started */
	int signal;          /* 0 when exited */
	struct output_buf out, err;
	char *return_value;  /* JSON text of the last expression, or NULL */
	uint64_t duration_ms;
	uint64_t cpu_ms;
	uint64_t memory_peak_bytes;
	struct limit_report limits[RESULT_MAX_LIMITS];
	int n_limits;
	char *warnings[RESULT_MAX_WARNINGS];
	int n_warnings;
	struct pc_err setup_error;  /* valid when status == RUN_SETUP_FAILED */
	json_t *tool_calls;  /* {count, tools:{name:{calls,errors}}, denied} or NULL */
	/* run_request.outputs: the images shown, [{mime_type, source, bytes,
	 * data (base64)}], and the files changed in /workspace, [{path, size,
	 * mime_type, data (base64)} | {path, size, mime_type, omitted: why} |
	 * {path, deleted: true}]; NULL: none */
	json_t *images, *files;
	/* an egress run's network: {egress: [the policy's destinations],
	 * refused_connections, refused_dns_queries}; NULL for other runs */
	json_t *network;
};

const char *run_status_name(enum run_status s);
const char *limit_enforcer_name(enum limit_enforcer e);
void result_init(struct run_result *r);
void result_free(struct run_result *r);
void result_add_limit(struct run_result *r, const char *name, uint64_t value, enum limit_enforcer by);
void result_add_warning(struct run_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The result object (man pycell(1), RESULT).  Output bytes that are not valid UTF-8
 * are replaced with U+FFFD so the JSON is always valid. */
json_t *result_to_json(const struct run_result *r);
/* The images' and files' entries as the result object lists them: without
 * their data. */
json_t *result_outputs_json(const json_t *list);
/* layers (NULL-terminated, as run_result.layers) as a JSON array of strings */
json_t *result_layers_json(const char *const *layers);
/* A JSON string of any bytes: jansson requires UTF-8, so invalid bytes
 * become U+FFFD (NULs are kept: json_stringn allows them). */
json_t *json_text(const char *s, size_t len);
/* CLI exit status: the program's, 128+signal, or the documented codes. */
int result_exit_status(const struct run_result *r);

#define EXIT_USAGE 2
#define EXIT_MEMORY_LIMIT 123
#define EXIT_TIMEOUT 124
#define EXIT_SETUP_FAILED 125

#endif
