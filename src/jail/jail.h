/* pycell: the jail: clone3 into fresh namespaces, the child setup sequence,
 * and the tiny init that runs as pid 1. */
#ifndef PYCELL_JAIL_H
#define PYCELL_JAIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/util.h"
#include "config/policy.h"
#include "jail/cgroup.h"

struct seccomp_filter;

struct jail_file {
	const char *name;   /* a plain file name: "main.py" */
	const char *data;
	size_t len;
};
#define JAIL_MAX_FILES 4

struct jail_spec {
	const struct policy *policy;
	const struct seccomp_filter *filter;  /* NULL: no filter (tests only) */
	/* The run's cgroups (the caller owns the fds): clone3 puts the child
	 * into dir_fd when `into` (a cgroup2 dir); the child moves itself
	 * into each v1 tasks file (cgroup_enter) before anything else.  Or,
	 * `later`: no tasks files yet; the caller makes the v1 cgroups while
	 * the child builds its root and sends their tasks files
	 * (jail_cgroups_done), which the child waits for and enters before
	 * its session, descriptors, limits and program. */
	struct {
		bool later;
		bool into;
		int dir_fd;
		int tasks[CGROUP_MAX_TASKS];
		int n_tasks;
	} cgroup;
	char *const *argv;                    /* python's argv, argv[0] = interpreter */
	char *const *envp;
	struct jail_file files[JAIL_MAX_FILES]; /* written read-only to /run/pycell/ */
	int n_files;
	const char *runtime_dir;              /* bound read-only at /run/pycell/lib */
	const char *packages_dir;             /* NULL, or bound read-only at /run/pycell/packages */
	/* NULL, or a directory whose font list (run/fonts.h), when it has one,
	 * is bound read-only at /run/pycell/fonts and linked from
	 * /tmp/matplotlib (made the jail user's) */
	const char *fonts_dir;
	int stdio[3];                         /* child ends: stdin, stdout, stderr */
	int tool_fd;                          /* child end, becomes fd 3 */
	/* An egress run's network (run/egress.c): called at the release, once
	 * the jail's namespaces exist and before it goes on, to make its veth
	 * pair (and what goes with it); gives the jail's address and gateway
	 * (network byte order), which the child sets up.  NULL for every
	 * other network. */
	int (*net_setup)(void *ctx, pid_t pid, uint32_t *addr, uint32_t *gw, struct pc_err *err);
	void *net_ctx;
	/* A jail made ahead of its request (a ready jail, from the zygote,
	 * cells only): files stays empty, and the child goes through the
	 * whole sequence, python included; python then waits for its program
	 * (jail_deliver), which init passes on over a socket of their own. */
	bool park;
	/* A ready jail made ahead of its request (spec->park, asked with
	 * spawn_ahead: the zygote sets it for a request on its socket for
	 * those, the supervisor never does): its python goes once through a
	 * sample cell while it waits (pycell._cell.warm_up), so that the
	 * pages a cell writes are its own copies before the cell's time
	 * starts.  Not for one whose cell comes at once, which would only
	 * wait for it, or a session's, whose idle loop would keep the copies
	 * (0.25 MiB with the default policy, 0.35 with the data stack). */
	bool warm_up;
	/* NULL: pid 2 execs argv.  Else pid 2 calls this instead of execve,
	 * with the jail complete (the zygote runs the program in its already
	 * initialised interpreter); prog_fd is its end of the program socket
	 * in a ready jail (jail_receive_program), else -1.  Must not return. */
	void (*run_inline)(const struct jail_spec *s, int prog_fd);
	/* Given to a ready jail with its program (jail_deliver): the
	 * supervisor answers on python's own report of its end and kills the
	 * jail after (run_request.finish_on_report), so python waits for that
	 * instead of exiting, and the kernel's teardown of its address space
	 * comes after the answer, not before it (zygote.c). */
	bool linger;
	/* The wasm backend on a host that refuses namespaces
	 * (jail_namespaces_refused): no namespace and no root of its own; the
	 * child joins the run's cgroups, drops its ids and capabilities, sets
	 * its rlimits and filter, and gives node its files through the
	 * program pipe.  SECURITY.md says what holds then. */
	bool bare;
	/* The zygote's jails, but an egress run's (jail.c, small init): init is
	 * cloned sharing the caller's memory and executes pycell-init, from
	 * init_fd (an O_PATH descriptor above 3), once it has forked python, so
	 * that python is the only copy made of the caller's address space.
	 * Until its release init touches only its own stack; from then until
	 * that exec the caller must not run: once it has sent the jail on to
	 * whoever releases it, it calls jail_small_wait, before anything else
	 * (the spec itself is read by init meanwhile).  Not with net_setup. */
	bool small_init;
	int init_fd;
};

struct jail {
	pid_t pid;      /* host pid of the jail's init */
	int pidfd;      /* pidfd of init (readable when it exits) */
	int sync_fd;    /* seqpacket: struct jail_msg from the child */
	/* A native ready jail's (spec->park): seqpacket to its python, which
	 * waits on the other end for the program (jail_deliver); -1 else. */
	int prog_fd;
	bool bare;      /* made without namespaces (jail_spec.bare) */
	bool small;     /* its init is a small one (jail_spec.small_init, and the host let it be) */
	bool released;  /* as its answer was read (a small init's): jail_release does nothing */
};

enum jail_msg_type { JAIL_MSG_ERROR = 1, JAIL_MSG_EXIT, JAIL_MSG_PROGRAM };

/* Messages from the jail to the supervisor, one per packet. */
struct jail_msg {
	int32_t type;
	int32_t wait_status;      /* JAIL_MSG_EXIT: python's wait status */
	int64_t cpu_us;           /* JAIL_MSG_EXIT: user+sys of python and reaped children */
	int64_t maxrss_kb;        /* JAIL_MSG_EXIT */
	struct pc_err err;        /* JAIL_MSG_ERROR */
};

/* The most program bytes (all files) a ready jail takes. */
#define JAIL_PARK_FILES_MAX (16u << 20)

/* Files in one buffer (a memfd): for each, its name, a NUL, its length (8
 * bytes, native order) and its bytes.  Unpack points s->files into buf;
 * -1 when it is malformed or holds more than JAIL_MAX_FILES. */
int jail_unpack_files(struct jail_spec *s, const char *buf, uint64_t len);

/* Give a ready jail its program: memfd holds len bytes of files (the
 * format above).  A native jail's python gets the memfd straight from
 * us (j->prog_fd, closed here once it went) and reads the files from it;
 * init is told after, only to know the jail is running.  The wasm backend's init passes the bytes
 * on to node.  A ready jail's /run/pycell holds no program files. */
int jail_deliver(struct jail *j, int memfd, uint64_t len, bool linger, struct pc_err *err);
/* In a ready jail's python: wait on prog_fd for the program.  The memfd
 * (its length in *len, jail_spec.linger in *linger), or -1 with errno set. */
int jail_receive_program(int prog_fd, uint64_t *len, bool *linger);

/* Spawn the jail in two halves (the spawners of run/ call them): clone
 * into new namespaces (the child then waits); and, possibly in another
 * process that received the pidfd and sync fd (a zygote's jail), write its
 * id maps and let it go.  On success the child is building its root;
 * errors from there on arrive as JAIL_MSG_ERROR on j->sync_fd.  The zygote needs no
 * privilege: the maps are written by the supervisor, and the cgroup
 * files the child writes were opened by it.  On failure both kill the
 * child and close j's fds. */
int jail_clone(const struct jail_spec *spec, struct jail *j, struct pc_err *err);
int jail_release(const struct jail_spec *spec, struct jail *j, struct pc_err *err);
/* After jail_clone of a small init (jail_spec.small_init) succeeded: until
 * that init no longer shares our memory (it executed pycell-init, or
 * ended).  At once otherwise. */
void jail_small_wait(void);
/* A released jail of spec->cgroup.later: its v1 cgroups are made, and
 * here are their tasks files (cgroup_run_tasks_fds), which it enters
 * itself before it goes on.  A child that has failed meanwhile is no
 * error here: its own report says why. */
int jail_cgroups_done(const struct jail *j, const int *tasks, int n, struct pc_err *err);
/* Kill a child that has not run its program, and close j's fds. */
void jail_abort(struct jail *j);
/* Record where main()'s argv and environ strings are, so a jail's init
 * can blank its inherited copy of them (/proc/1/cmdline, /proc/1/environ). */
void jail_note_cmdline(char **argv);
/* Whether this host refuses the jail's namespaces: learned once per
 * process by cloning a child into them.  Refused means for good: EPERM (a
 * sysctl, AppArmor, a container's seccomp), ENOSYS (clone3 itself
 * refused, as container seccomp profiles do), EUSERS (nested too deep),
 * or ENOSPC where user.max_user_namespaces is 0.  A limit merely reached
 * (ENOSPC under load, ENOMEM) is not: it is never a reason to run with
 * less.  When refused, *why (may be NULL) says how. */
bool jail_namespaces_refused(struct pc_err *why);
/* What confines a jail's program, in the words results, sandbox_info and
 * doctor use (SECURITY.md describes each): NULL-terminated,
 * static.  Limits are not here: each names its enforcer. */
const char *const *jail_layers(bool wasm, bool bare);
/* Host uid/gid the jail's ids map to when pycell runs as root. */
extern uid_t jail_host_id_base;

#endif
