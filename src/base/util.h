/* pycell: errors, resource ownership helpers, small parsers. */
#ifndef PYCELL_UTIL_H
#define PYCELL_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* A failure the way crun reports it: the errno, the step that failed and a
 * message naming the thing (path, key, syscall).  Functions that can fail
 * take a `struct pc_err *` and return -1 after filling it; callers
 * propagate.  The same struct travels from the jail child to the parent. */
struct pc_err {
	int errnum;           /* errno, or 0 for a non-system error */
	char step[32];        /* short name of the setup step: "mount", "policy" */
	char msg[480];        /* human message, already including the strerror */
};

int pc_fail(struct pc_err *err, int errnum, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* pc_fail with errno, for a failed syscall: message gets ": strerror" */
int pc_syserr(struct pc_err *err, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Context for a failure on its way up: "CONTEXT: " goes before the message
 * ("policy strict.json" + "limits.memory: expected ..."); errnum and step
 * stay.  Returns -1, so `return pc_err_wrap(err, "%s", file);` propagates. */
int pc_err_wrap(struct pc_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Ownership: a variable marked with one of these is released when it goes
 * out of scope; steal_ptr()/steal_fd() hand the resource on. */
static inline void pc_freep(void *p) { free(*(void **)p); }
static inline void pc_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
/* Both ends of a pipe or socketpair (-1 for an end not open), then -1. */
static inline void close_pair(int fds[2])
{
	pc_closep(&fds[0]);
	pc_closep(&fds[1]);
	fds[0] = fds[1] = -1;
}
static inline void pc_close_pairp(int (*fds)[2]) { close_pair(*fds); }
/* A child this scope forked: killed and reaped at scope exit unless handed
 * on with steal_pid() (the child itself never returns through the scope). */
static inline void pc_reapp(pid_t *pid)
{
	if (*pid > 0) {
		int saved = errno;
		kill(*pid, SIGKILL);
		while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
			;
		errno = saved;
	}
}
#define cleanup_free __attribute__((cleanup(pc_freep)))
#define cleanup_close __attribute__((cleanup(pc_closep)))
/* int fds[2] of a pipe or socketpair whose open ends close at scope exit */
#define cleanup_pair __attribute__((cleanup(pc_close_pairp)))
#define cleanup_child __attribute__((cleanup(pc_reapp)))
/* A NULL-terminated array of strings, each freed, then the array. */
static inline void pc_strvp(char ***v)
{
	for (size_t i = 0; *v && (*v)[i]; i++)
		free((*v)[i]);
	free(*v);
}
#define cleanup_strv __attribute__((cleanup(pc_strvp)))

/* *pp, of its own type (as systemd's TAKE_PTR: assigning it to a pointer
 * of another type is the compiler's error), and *pp is NULL after. */
#define steal_ptr(pp)                              \
	({                                         \
		__typeof__(*(pp)) *stolen_pp_ = (pp);  \
		__typeof__(*(pp)) stolen_v_ = *stolen_pp_; \
		*stolen_pp_ = NULL;                \
		stolen_v_;                         \
	})
static inline int steal_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}

static inline pid_t steal_pid(pid_t *pid)
{
	pid_t v = *pid;
	*pid = -1;
	return v;
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* n bytes of p, and a NUL after them */
char *xmemdup(const void *p, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "64M", "1.5G", "4096", "1k": binary units (K=1024).  Returns -1 with
 * err saying what was expected and what it got, on malformed input or
 * overflow (step "parse"; callers wrap it with the option or key). */
int parse_size(const char *s, uint64_t *out, struct pc_err *err);
/* "10", "2.5", "250ms", "1m": seconds with optional unit -> milliseconds. */
int parse_duration_ms(const char *s, uint64_t *out, struct pc_err *err);

/* write everything or fail (EINTR/EAGAIN-safe for blocking fds) */
int write_all(int fd, const void *buf, size_t len);
/* writev until all n parts have gone (iov is advanced: the caller's
 * array is changed); -1 with errno. */
struct iovec;
int writev_all(int fd, struct iovec *iov, int n);
/* read a whole file into a malloc'd, NUL-terminated buffer; max bytes */
int read_file(const char *path, size_t max, char **out, size_t *len);
/* read a whole stream fd; max bytes (larger is an error, EFBIG) */
int read_fd_all(int fd, size_t max, char **out, size_t *len);
/* write a string to a file (O_WRONLY, no create, no trunc) e.g. /proc/.. */
int write_file(const char *path, const char *s);
int set_nonblock(int fd, bool on);
uint64_t now_ms(void);  /* CLOCK_MONOTONIC */
/* Equal strings, NULL equal only to NULL; equal arrays of them. */
bool str_eq(const char *a, const char *b);
bool strv_eq(char *const *a, size_t na, char *const *b, size_t nb);
/* mkdir -p: each missing component with mode (an existing one is left
 * as it is). */
int mkdir_p(const char *path, mode_t mode, struct pc_err *err);
/* pycell's cache directory BASE/NAME, made (BASE 0711, NAME with mode)
 * when missing, and used only when both are directories of this user's
 * that neither group nor others may write: BASE is PYCELL_CACHE_DIR (an
 * absolute path; "none" turns every cache off), else /var/cache/pycell
 * for root, else $XDG_CACHE_HOME/pycell or ~/.cache/pycell.  NULL when
 * there is none (malloc'd otherwise). */
char *cache_subdir(const char *name, mode_t mode);
/* rm -rf path (links not followed); what cannot be removed stays. */
void rm_tree(const char *path);
/* qsort comparator for an array of strings. */
int str_cmp_ptr(const void *a, const void *b);
/* The n strings of v with sep between them (malloc'd). */
char *strv_join(char *const *v, size_t n, const char *sep);
/* An unguessable id: 128 random bits as 32 hex digits, after "PREFIX."
 * when prefix is not NULL (a replica's name, at most REPLICA_NAME_MAX
 * bytes).  0, or -1 when the kernel gave no random bytes. */
#define REPLICA_NAME_MAX 32
#define RANDOM_ID_SIZE (REPLICA_NAME_MAX + 1 + 32 + 1)
int random_id(char out[RANDOM_ID_SIZE], const char *prefix);
/* Is this process in the initial user namespace (uid_map "0 0 4294967295")? */
bool in_initial_userns(void);
/* A whole decimal number from min to max, nothing else around it. */
int parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out);
/* One packet with n (at most FDS_MAX) fds over a unix socket (SCM_RIGHTS). */
#define FDS_MAX 16
int send_fds(int sock, const void *buf, size_t len, const int *fds, int n);
/* recv(2) of one packet from a unix SEQPACKET socket, past what would
 * hide its last packets: a peer that ended with a packet of ours unread
 * makes the kernel answer ECONNRESET once, ahead of what the peer sent
 * before it ended (a jail's setup error, python's last tool messages).
 * The bytes, 0 at the end, or -1 with errno (EAGAIN, ...); EINTR retried. */
ssize_t recv_packet(int sock, void *buf, size_t len, int flags);
/* Receive one packet and up to max (at most FDS_MAX) fds, close-on-exec;
 * *got says how many.  More than max, or a truncated packet, is an error
 * (EPROTO) and every received fd is closed. */
ssize_t recv_fds(int sock, void *buf, size_t len, int *fds, int max, int *got);
/* Messages become JSON strings, which must be UTF-8 (jansson refuses
 * others): cutting one at a byte count may not split a character.
 * utf8_prefix: the precision for "%.*s" that keeps at most max bytes of s
 * and no partial character; utf8_trim_tail: drop a partial character at
 * the end of s (after snprintf cut it). */
int utf8_prefix(const char *s, size_t max);
/* Why p (len bytes) is not a path relative to a directory and below it:
 * empty, longer than max, a NUL, absolute, an empty, "." or ".."
 * component; NULL when it is one. */
const char *rel_path_problem(const char *p, size_t len, size_t max);
/* Decode base64, either alphabet, padding optional: a malloc'd buffer
 * (NUL-terminated) of *out_len bytes; NULL when s is not base64. */
char *b64_decode(const char *s, size_t len, size_t *out_len);
/* Standard base64 with padding: a malloc'd string. */
char *b64_encode(const void *p, size_t len);
void utf8_trim_tail(char *s);
/* One line of /proc/self/mountinfo (proc(5)): ID PARENT MAJ:MIN ROOT
 * MOUNTPOINT OPTIONS [OPTIONAL FIELDS...] - FSTYPE SOURCE SUPER_OPTIONS,
 * with any number of optional fields.  root and point are unescaped and
 * malloc'd; fstype and super_opts point into line, which is modified.
 * -1 (nothing allocated) for a line that is not of that form. */
struct mountinfo {
	char *root, *point;
	const char *fstype, *super_opts;
};
int mountinfo_parse_line(char *line, struct mountinfo *m);
/* Where runtime/ and policy/ live: $PYCELL_DATADIR, else the install dir. */
const char *pycell_datadir(void);
/* The jail init a zygote's jails execute (jail/init_main.c): the one built
 * in the tree $PYCELL_DATADIR names, when there is one, else the install's. */
const char *pycell_init_path(void);

#endif
