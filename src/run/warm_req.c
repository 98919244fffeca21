/* pycell: the request for one warm jail, both halves (zygote.h): what the
 * supervisor puts in struct spawn_req, its fds and the program memfd, and
 * what the zygote makes of them; and the table that says, for every
 * member of struct jail_spec, how a jail the zygote makes gets it. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <jansson.h>

#include "jail/rootfs.h"
#include "run/zygote.h"

#define MEMBER(m, carry) \
	{ #m, offsetof(struct jail_spec, m), sizeof(((struct jail_spec *)0)->m), \
	  __alignof__(((struct jail_spec *)0)->m), carry }

const struct warm_member warm_members[] = {
	MEMBER(policy, WARM_ZYGOTE),        /* equal: a zygote serves only its own policy */
	MEMBER(filter, WARM_ZYGOTE),        /* compiled by the zygote from that policy */
	MEMBER(cgroup.later, WARM_NEVER),   /* only a cold first run probes cgroups by halves */
	MEMBER(cgroup.into, WARM_REQUEST),
	MEMBER(cgroup.dir_fd, WARM_REQUEST),
	MEMBER(cgroup.tasks, WARM_REQUEST),
	MEMBER(cgroup.n_tasks, WARM_REQUEST),
	MEMBER(argv, WARM_PROGRAM),         /* sys.argv in .warm.json; python's own is the zygote's */
	MEMBER(envp, WARM_PROGRAM),         /* os.environ in .warm.json */
	MEMBER(files, WARM_PROGRAM),
	MEMBER(n_files, WARM_PROGRAM),
	MEMBER(runtime_dir, WARM_ZYGOTE),   /* the one the zygote was prepared with */
	MEMBER(packages_dir, WARM_NEVER),   /* a run with packages is cold (run.c) */
	MEMBER(fonts_dir, WARM_ZYGOTE),     /* the policy's, the zygote's from its start (fonts.h) */
	MEMBER(stdio, WARM_REQUEST),
	MEMBER(tool_fd, WARM_REQUEST),
	MEMBER(net_setup, WARM_NEVER),      /* an egress run is cold */
	MEMBER(net_ctx, WARM_NEVER),
	MEMBER(park, WARM_REQUEST),
	MEMBER(warm_up, WARM_ZYGOTE),       /* the zygote's: a request on its socket for jails asked ahead */
	MEMBER(run_inline, WARM_ZYGOTE),    /* the zygote's interpreter runs the program */
	MEMBER(linger, WARM_PROGRAM),       /* with the cell, at its delivery (jail_deliver) */
	MEMBER(bare, WARM_NEVER),           /* a zygote's jail always has its namespaces */
	MEMBER(small_init, WARM_ZYGOTE),    /* the zygote's, when it found pycell-init at its start */
	MEMBER(init_fd, WARM_ZYGOTE),
};
const size_t warm_n_members = sizeof(warm_members) / sizeof(warm_members[0]);

bool warm_member_set(const struct jail_spec *s, const struct warm_member *m)
{
	const unsigned char *b = (const unsigned char *)s + m->off;
	for (size_t i = 0; i < m->size; i++)
		if (b[i])
			return true;
	return false;
}

int warm_pack_files(const struct jail_spec *s, bool script, uint64_t *len, struct pc_err *err)
{
	const struct policy *p = s->policy;
	cleanup_free char *wtext = NULL;
	int fd, n_files = s->n_files + (script ? 1 : 0);
	uint64_t total = 0;

	if (script) {
		json_t *warm = json_object(), *argv = json_array(), *env = json_object();
		bool ok = true;
		/* sys.argv as python would set it from the cold argv; json_string
		 * refuses bytes that are not UTF-8 (python would decode them with
		 * surrogateescape: such runs stay cold) */
		for (size_t i = 1 + p->n_python_flags; s->argv[i]; i++)
			ok &= json_array_append_new(argv, json_string(s->argv[i])) == 0;
		for (size_t i = 0; s->envp[i]; i++) {
			const char *eq = strchr(s->envp[i], '=');
			char *k = xasprintf("%.*s", (int)(eq - s->envp[i]), s->envp[i]);
			ok &= json_object_set_new(env, k, json_string(eq + 1)) == 0;
			free(k);
		}
		json_object_set_new(warm, "argv", argv);
		json_object_set_new(warm, "env", env);
		json_object_set_new(warm, "path0", json_string(JAIL_RUN_DIR));
		wtext = ok ? json_dumps(warm, JSON_COMPACT) : NULL;
		json_decref(warm);
		if (!wtext)
			return pc_fail(err, EINVAL, "warm", "arguments or environment are not valid UTF-8");
	}

	fd = memfd_create("pycell-run", MFD_CLOEXEC);
	if (fd < 0)
		return pc_syserr(err, "warm", "memfd_create");
	{
		/* one writev for all of it: a warm call's path */
		struct iovec iov[3 * (JAIL_MAX_FILES + 1)];
		uint64_t lens[JAIL_MAX_FILES + 1];
		int n_iov = 0;
		for (int i = 0; i < n_files; i++) {
			const char *name = i < s->n_files ? s->files[i].name : WARM_FILE;
			const char *data = i < s->n_files ? s->files[i].data : wtext;
			lens[i] = i < s->n_files ? s->files[i].len : strlen(wtext);
			iov[n_iov++] = (struct iovec){ (void *)name, strlen(name) + 1 };
			iov[n_iov++] = (struct iovec){ &lens[i], sizeof(lens[i]) };
			iov[n_iov++] = (struct iovec){ (void *)data, lens[i] };
			total += strlen(name) + 1 + sizeof(lens[i]) + lens[i];
		}
		if (writev_all(fd, iov, n_iov) < 0) {
			pc_syserr(err, "warm", "write the program for the zygote");
			close(fd);
			return -1;
		}
	}
	*len = total;
	return fd;
}

int warm_request_pack(const struct jail_spec *s, struct spawn_req *req, int fds[REQ_MAX_FDS], int *nfds,
		      struct pc_err *err)
{
	int n = REQ_FIXED_FDS, memfd;

	for (size_t i = 0; i < warm_n_members; i++)
		if (warm_members[i].carry == WARM_NEVER && warm_member_set(s, &warm_members[i]))
			return pc_fail(err, EINVAL, "warm", "a jail with %s set is never made warm",
				       warm_members[i].name);
	/* a ready jail's request carries no files: a cell's come with its
	 * delivery (spawner_deliver_cell), after the jail is made */
	if (s->cgroup.n_tasks < 0 || s->cgroup.n_tasks > CGROUP_MAX_TASKS)
		return pc_fail(err, EINVAL, "warm", "%d cgroup tasks files: at most %d", s->cgroup.n_tasks,
			       CGROUP_MAX_TASKS);
	*req = (struct spawn_req){ .type = Z_SPAWN, .park = s->park, .cgroup_into = s->cgroup.into,
				   .n_cgroup_tasks = (uint32_t)s->cgroup.n_tasks };
	if (s->park) {
		memfd = memfd_create("pycell-ready", MFD_CLOEXEC);
		if (memfd < 0)
			return pc_syserr(err, "warm", "memfd_create");
	} else {
		memfd = warm_pack_files(s, true, &req->files_len, err);
		if (memfd < 0)
			return -1;
	}
	fds[0] = s->stdio[0];
	fds[1] = s->stdio[1];
	fds[2] = s->stdio[2];
	fds[3] = s->tool_fd;
	fds[REQ_FD_MEMFD] = memfd;
	if (s->cgroup.into)
		fds[n++] = s->cgroup.dir_fd;
	for (int i = 0; i < s->cgroup.n_tasks; i++)
		fds[n++] = s->cgroup.tasks[i];
	*nfds = n;
	return 0;
}

int warm_request_check(const struct spawn_req *req, ssize_t n, int nfds, struct pc_err *err)
{
	if (n != (ssize_t)sizeof(*req) || req->type != Z_SPAWN || req->cgroup_into > 1 || req->park > 1 ||
	    (req->park ? req->files_len != 0 : req->files_len == 0) || req->n_cgroup_tasks > CGROUP_MAX_TASKS ||
	    nfds != REQ_FIXED_FDS + (int)req->cgroup_into + (int)req->n_cgroup_tasks)
		return pc_fail(err, EPROTO, "warm", "bad request to the zygote");
	return 0;
}

int warm_request_unpack(const struct spawn_req *req, const int *fds, const char *files, struct jail_spec *s,
			struct pc_err *err)
{
	int cg = REQ_FIXED_FDS;

	if (jail_unpack_files(s, files ? files : "", req->files_len) < 0)
		return pc_fail(err, EPROTO, "warm", "malformed program files");
	s->stdio[0] = fds[0];
	s->stdio[1] = fds[1];
	s->stdio[2] = fds[2];
	s->tool_fd = fds[3];
	s->cgroup.into = req->cgroup_into;
	s->cgroup.dir_fd = req->cgroup_into ? fds[cg++] : -1;
	s->cgroup.n_tasks = (int)req->n_cgroup_tasks;
	for (int i = 0; i < s->cgroup.n_tasks; i++)
		s->cgroup.tasks[i] = fds[cg++];
	s->park = req->park;
	return 0;
}
