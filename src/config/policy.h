/* pycell: the policy, what one run may do.  Loaded from JSON
 * (policy/NAME.json, man pycell-policy(5)); CLI options override fields. */
#ifndef PYCELL_POLICY_H
#define PYCELL_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "base/util.h"

enum net_mode { NET_NONE = 0, NET_LOOPBACK, NET_EGRESS };

/* The most destinations an egress allowlist holds. */
#define EGRESS_MAX 64
#define EGRESS_NAME_MAX 253

/* One destination of an egress allowlist, as a policy writes it:
 * "api.example.com:443", "10.20.0.0/16:5432", "192.0.2.7:*". */
struct egress_dest {
	char name[EGRESS_NAME_MAX + 1]; /* a host name, lower case; "" for an address */
	uint32_t addr, mask;    /* network byte order, when name is "" */
	unsigned prefix;        /* 0..32 */
	uint16_t port;          /* host order; 0: any port ("*") */
};
/* Parse one destination; -1 with *why (a static string) when it is not
 * one.  IPv6 destinations are refused (not supported). */
int policy_egress_parse(const char *s, struct egress_dest *d, const char **why);

/* Packages runs may ask for ("packages"): installed by pycell from the
 * index (run/packages.h); none without an index. */
struct pkg_policy {
	char *index;            /* a PEP 503 simple index: http(s)://HOST[:PORT]/PATH; NULL: none */
	char *ca_bundle;        /* CA certificates for an https index; NULL: the host's */
	char **allow;           /* requirements ("pandas>=2,<3", "tinylib") or "*" */
	size_t n_allow;
};
/* A requirement as runs and policies write it: a package name, then
 * version specifiers (==, !=, <=, >=, <, >, ~=, ===) joined by commas;
 * no extras, markers or URLs.  false with *why (static) otherwise. */
bool policy_requirement_ok(const char *s, const char **why);
/* HOST:PORT of a checked index URL (the scheme's port when it has none). */
char *policy_index_dest(const char *url);

struct net_policy {
	enum net_mode mode;
	char **egress;          /* NET_EGRESS: the destinations as written, checked */
	size_t n_egress;        /* NET_EGRESS: 1..EGRESS_MAX; else 0 */
};

/* Names of the syscall groups a policy may list (NULL-terminated); what
 * each allows is jail/seccomp.c's, in the same order. */
extern const char *const seccomp_group_names[];
/* The groups used when a policy lists none (NULL-terminated). */
extern const char *const seccomp_default_groups[];

struct bind_spec {
	char *src;      /* host path */
	char *dst;      /* path inside the jail (absolute) */
	bool optional;  /* a missing source is skipped, not a setup failure */
	bool writable;  /* default read-only */
};

struct limits {
	uint64_t timeout_ms;        /* wall clock; 0 = none */
	uint64_t memory_bytes;      /* 0 = none */
	uint32_t cpu_millis;        /* CPU share in thousandths of a core; 0 = none */
	uint32_t pids;              /* max tasks; 0 = none */
	uint64_t output_bytes;      /* cap per stream (stdout, stderr) */
	uint64_t tmp_bytes;         /* size of /tmp tmpfs */
	uint64_t workspace_bytes;   /* size of /workspace tmpfs */
	uint64_t file_bytes;        /* RLIMIT_FSIZE; 0 = none */
	uint32_t open_files;        /* RLIMIT_NOFILE */
};

/* One extra seccomp rule: syscall by name answers errno (or is allowed). */
struct seccomp_rule {
	char *syscall;
	int action_errno;           /* >0: fail with this errno; 0: allow */
	bool kill;                  /* kill the process */
};

struct policy {
	char *name;                 /* "default", or the file's base name */
	char *path;                 /* file it was loaded from, NULL for built-in */
	char *description;          /* the file's "description", not inherited; may be NULL */
	struct limits limits;

	struct bind_spec *binds;    /* extra binds after the interpreter tree */
	size_t n_binds;
	bool ca_certificates;       /* bind /etc/ssl/certs (+ /usr/share/ca-certificates) */
	bool dev_shm;               /* a size-limited tmpfs at /dev/shm (multiprocessing) */

	struct net_policy network;

	char **seccomp_groups;      /* names of syscall groups to allow */
	size_t n_seccomp_groups;
	struct seccomp_rule *seccomp_rules;
	size_t n_seccomp_rules;

	char *python;               /* interpreter path, default /usr/bin/python3 */
	char **python_flags;        /* e.g. "-I" "-B" */
	size_t n_python_flags;
	char **python_preload;      /* modules a zygote imports before its clones */
	size_t n_python_preload;
	char **env;                 /* "KEY=VALUE", added to the clean environment */
	size_t n_env;

	char **tools_allow;         /* exact names and "server.*" patterns */
	size_t n_tools_allow;
	uint32_t tools_budget;      /* max tool calls per run */
	uint64_t tools_arg_bytes;   /* max size of one call's arguments */
	uint64_t tools_result_bytes;

	char *backend;              /* "native" | "wasm" */

	struct pkg_policy packages;

	/* sessions: a jail with a live interpreter kept across cells; at most
	 * SESSIONS_MAX, the memory cgroups the kernel can number at once
	 * (65,535 ids), each session's jail having one */
#define SESSIONS_MAX 65535
	struct session_limits {
		uint32_t max;           /* open at once per server; 0: no sessions */
		uint32_t max_per_client; /* open at once per client (token or connection) */
		uint64_t idle_ms;       /* closed after this long without a cell */
		uint64_t lifetime_ms;   /* closed once it lived this long (not counting paused time) */
		uint64_t snapshot_bytes; /* a snapshot (pause, fork) holds at most this */
		uint64_t paused_keep_ms; /* a paused session is kept this long (with a state_dir) */
		/* 0: each session's jail is a memory cgroup of its own, limited
		 * to limits.memory by the kernel; else the sessions share one of
		 * this size, and the supervisor holds each to limits.memory
		 * (cgroup.h, session.c) */
		uint64_t shared_memory_bytes;
	} sessions;

	/* identity inside the jail */
	uid_t jail_uid;             /* default 1000 */
	gid_t jail_gid;
	char *hostname;             /* default "pycell" */
};

/* backend "wasm": Node runs Pyodide in the jail (runtime/wasm/runner.mjs) */
/* Its pid 2 executes node from this descriptor (execveat(...,
 * AT_EMPTY_PATH)), the only exec its seccomp filter allows.  The policy's
 * open_files (RLIMIT_NOFILE) is at most this number, so once the exec has
 * closed it (O_CLOEXEC) no descriptor of that number can exist again: no
 * exec after the start. */
#define WASM_EXEC_FD 1000
/* A ready wasm jail's node reads its cell from this descriptor (a pipe
 * from the jail's init: 8 bytes of length, then the files) */
#define WASM_PROG_FD 15
/* Backend "native" or "wasm" (pycell run --backend): refused, the policy
 * unchanged, when this build has no wasm or the policy asks for what it
 * cannot give (an egress list, packages, ...). */
int policy_set_backend(struct policy *p, const char *backend, struct pc_err *err);
bool policy_is_wasm(const struct policy *p);
/* The built-in defaults, equal to policy/default.json. */
void policy_init_default(struct policy *p);
/* Load NAME (a shipped policy in the policy dir or /etc/pycell/policy.d)
 * or a path (contains '/' or ends in .json).  Validates every key. */
int policy_load(const char *name_or_path, struct policy *out, struct pc_err *err);
/* Parse a policy from a JSON text; `origin` names it in error messages. */
int policy_parse(const char *json, const char *origin, struct policy *out, struct pc_err *err);
/* Network "none" or "loopback" (an egress list the policy had goes). */
void policy_set_network(struct policy *p, enum net_mode mode);
void policy_free(struct policy *p);
/* Directories searched for policy names, in order, NULL-terminated:
 * $sysconfdir/pycell/policy.d, then pycell_datadir()/policy.  Computed on
 * each call ($PYCELL_DATADIR may change); valid until the next call. */
const char *const *policy_search_path(void);
/* The fully resolved policy as a document policy_parse accepts and turns
 * into an equal struct (no "extends"; name and path are not included). */
json_t *policy_to_json(const struct policy *p);
/* Same content (everything but name and path). */
bool policy_equal(const struct policy *a, const struct policy *b);
/* What the seccomp filter is built from (policy_fields.h, PF_FILTER), as
 * JSON: the filter cache's key hashes exactly this. */
json_t *policy_filter_json(const struct policy *p);
/* A policy name matches [a-z0-9_-]+ (at most 64); a path contains '/' or
 * ends in ".json".  Anything else is neither and refused. */
bool policy_is_name(const char *s);
bool policy_is_path(const char *s);
/* Max depth of an "extends" chain. */
#define POLICY_MAX_EXTENDS 8

#endif
