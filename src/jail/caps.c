/* pycell: capabilities.
 *
 * The jail keeps none.  caps_drop_jail() runs in the raw clone3 child, so it
 * uses prctl and capset directly: libcap-ng learns the bounding set by
 * reading /proc/<pid>/status through stdio, which allocates and needs a
 * /proc that shows the caller.
 *
 * The supervisor keeps only what it uses (libcap-ng), see supervisor_caps.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>

#include <cap-ng.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/caps.h"

/* What a supervisor running as root uses, and why; the rest goes from the
 * effective, permitted, inheritable and bounding sets.  Not kept:
 * CAP_BPF (a cgroup BPF program needs it and CAP_NET_ADMIN, or
 * CAP_SYS_ADMIN, which we keep anyway), CAP_FOWNER, CAP_CHOWN,
 * CAP_DAC_READ_SEARCH (covered by CAP_DAC_OVERRIDE), CAP_SYS_PTRACE
 * (nothing reads another process's memory), CAP_SYS_RESOURCE, CAP_SETPCAP
 * (used here once, to shrink the bounding set).  The jail is not limited
 * by any of this: it gets a full set in its own user namespace and builds
 * its root with that. */
static const struct {
	unsigned cap;
	const char *why;
	bool permitted_only;   /* effective only while it is used (caps_net) */
} supervisor_caps[] = {
	{ CAP_SETUID, "write a uid range map for the jail's user namespace", false },
	{ CAP_SETGID, "write a gid range map; drop our supplementary groups", false },
	{ CAP_DAC_OVERRIDE, "create run cgroups: cgroup roots are mode 0555 even for root", false },
	{ CAP_SYS_ADMIN, "load the cgroup device filter; create user namespaces where the host "
			 "restricts that to CAP_SYS_ADMIN (Debian's unprivileged_userns_clone=0, "
			 "Ubuntu's AppArmor userns restriction)", false },
	{ CAP_KILL, "signal jail processes, which run as other (mapped) uids", false },
	/* permitted, effective only around an egress run's network setup */
	{ CAP_NET_ADMIN, "make an egress run's veth pair into its jail's network namespace", true },
	{ CAP_NET_BIND_SERVICE, "bind an egress run's DNS responder to port 53 of its gateway", true },
	/* kept only as root of a non-initial user namespace (harden, below) */
	{ CAP_SETFCAP, "map our own id 0 into the jail when pycell is root of another user "
		       "namespace (unshare -r, rootless containers): the kernel asks for it", false },
};

/* ------------------------------------------------------------ the jail */

static int cap_last(void)
{
	int cap = 0;
	while (cap < 64 && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0)
		cap++;
	return cap - 1;
}

static int capset_empty(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	return (int)syscall(SYS_capset, &hdr, data);
}

/* bounding: the bounding set must be empty too (a bare jail's may not be:
 * caps_drop_bare) */
static int verify_jail(uid_t uid, gid_t gid, int last, bool bounding, struct pc_err *err)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return pc_syserr(err, "caps", "capget");
	for (int i = 0; i < 2; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return pc_fail(err, EPERM, "caps", "capabilities left after the drop: "
				       "effective %#x permitted %#x inheritable %#x (word %d)",
				       data[i].effective, data[i].permitted, data[i].inheritable, i);
	for (int cap = 0; cap <= last; cap++) {
		if (bounding && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0)
			return pc_fail(err, EPERM, "caps", "capability %d is still in the bounding set", cap);
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) > 0)
			return pc_fail(err, EPERM, "caps", "capability %d is still in the ambient set", cap);
	}
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return pc_syserr(err, "caps", "getresuid");
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
		return pc_fail(err, EPERM, "caps", "ids are %u/%u/%u:%u/%u/%u, expected %u:%u",
			       (unsigned)ru, (unsigned)eu, (unsigned)su, (unsigned)rg,
			       (unsigned)eg, (unsigned)sg, (unsigned)uid, (unsigned)gid);
	return 0;
}

/* The last of both drops: the ids, then no capability left (KEEP_CAPS is
 * off, so the setresuid to non-root ids empties the permitted set, and the
 * capset does the rest), checked. */
static int become(uid_t uid, gid_t gid, int last, bool bounding, struct pc_err *err)
{
	if (setresgid(gid, gid, gid) < 0)
		return pc_syserr(err, "caps", "setresgid %u", (unsigned)gid);
	if (setresuid(uid, uid, uid) < 0)
		return pc_syserr(err, "caps", "setresuid %u", (unsigned)uid);
	if (capset_empty() < 0)
		return pc_syserr(err, "caps", "capset (empty the effective, permitted and inheritable sets)");
	return verify_jail(uid, gid, last, bounding, err);
}

/* The wasm backend on a host without namespaces (jail.c, bare): no user
 * namespace to hold a full set in, so this process has what the supervisor
 * kept.  The bounding set shrinks as far as we may (dropping from it needs
 * CAP_SETPCAP, which a root supervisor gave up), the supplementary groups
 * go as root, the ids become uid:gid (KEEP_CAPS is off: the permitted set
 * empties when a root process changes to non-root ids), and the three
 * sets are emptied.  Exec then gains nothing, even as uid 0: the seccomp
 * step sets no_new_privs, under which the kernel caps what an exec may
 * permit at what the process had, nothing (commoncap.c).  Checked: no
 * capability in the effective, permitted, inheritable or ambient sets,
 * and the ids as asked. */
int caps_drop_bare(uid_t uid, gid_t gid, bool as_root, struct pc_err *err)
{
	int last = cap_last();

	for (int cap = 0; cap <= last; cap++)
		(void)prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return pc_syserr(err, "caps", "clear the ambient set");
	if (as_root && setgroups(0, NULL) < 0)
		return pc_syserr(err, "caps", "drop the supplementary groups");
	return become(uid, gid, last, false, err);
}

int caps_drop_jail(uid_t uid, gid_t gid, struct pc_err *err)
{
	int last = cap_last();

	for (int cap = 0; cap <= last; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return pc_syserr(err, "caps", "drop capability %d from the bounding set", cap);
	/* EINVAL: a kernel without ambient capabilities (before 4.3) */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return pc_syserr(err, "caps", "clear the ambient set");
	/* Locked so nothing below can undo them: uid 0 (a policy may choose it)
	 * gains no capabilities at exec; no ambient raise; KEEP_CAPS stays off,
	 * so the setresuid below clears the permitted set.  Needs CAP_SETPCAP,
	 * which we have in the jail's user namespace until the capset. */
	if (prctl(PR_SET_SECUREBITS,
		  SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
			  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
		  0, 0, 0) < 0)
		return pc_syserr(err, "caps", "set the secure bits");
	/* No setgroups: it is denied in the jail's user namespace. */
	return become(uid, gid, last, true, err);
}

/* ------------------------------------------------------------ the supervisor */

/* Started in a user namespace whose setgroups is "deny" (unshare -r, a
 * rootless container): the groups cannot be dropped, and what the jails
 * would carry is what we carry anyway. */
static bool setgroups_denied(void)
{
	char buf[8] = "";
	cleanup_close int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
	return errno == EPERM && fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0 &&
	       strncmp(buf, "deny", 4) == 0;
}

int caps_harden_supervisor(struct pc_err *err)
{
	bool had[ARRAY_SIZE(supervisor_caps)];
	bool bounding;

	/* Not dumpable: no core with tokens in it, no ptrace or /proc/<pid>/mem
	 * from processes of the same uid.  The jail child inherits this, and a
	 * non-dumpable child's /proc files belong to root: when pycell is not
	 * root, the child must make itself dumpable before we write its
	 * uid_map (jail.c). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return pc_syserr(err, "caps", "prctl(PR_SET_DUMPABLE, 0)");
	if (capng_get_caps_process() < 0)
		return pc_syserr(err, "caps", "read this process's capabilities");
	if (capng_have_capabilities(CAPNG_SELECT_CAPS) == CAPNG_NONE)
		return 0;  /* unprivileged: nothing to drop */

	for (size_t i = 0; i < ARRAY_SIZE(supervisor_caps); i++)
		had[i] = capng_have_capability(CAPNG_PERMITTED, supervisor_caps[i].cap) == 1 &&
			 /* as root of the initial namespace the jail never maps our
			  * id 0, so SETFCAP is not needed there */
			 (supervisor_caps[i].cap != CAP_SETFCAP || !in_initial_userns());
	bounding = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP) == 1;

	/* Jails cannot drop supplementary groups themselves (setgroups is
	 * denied in their user namespace) and would carry ours, e.g. host gid
	 * 0, as an unmapped group that still opens group-readable files. */
	if (capng_have_capability(CAPNG_EFFECTIVE, CAP_SETGID) == 1 && setgroups(0, NULL) < 0 &&
	    !setgroups_denied())
		return pc_syserr(err, "caps", "setgroups (drop supplementary groups)");
	/* Root's children (the upstream MCP servers) gain no capabilities at
	 * exec; the jail starts from fresh secure bits in its user namespace. */
	if (bounding && prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0) < 0)
		return pc_syserr(err, "caps", "set the secure bits");

	capng_clear(CAPNG_SELECT_ALL);
	for (size_t i = 0; i < ARRAY_SIZE(supervisor_caps); i++) {
		unsigned cap = supervisor_caps[i].cap;
		if (had[i] && capng_update(CAPNG_ADD, (supervisor_caps[i].permitted_only ? 0 : CAPNG_EFFECTIVE) |
							      CAPNG_PERMITTED | CAPNG_BOUNDING_SET, cap) < 0)
			return pc_fail(err, EINVAL, "caps", "keep capability %s (to %s)",
				       capng_capability_to_name(cap), supervisor_caps[i].why);
	}
	/* the bounding set first: dropping from it needs CAP_SETPCAP, which
	 * the capset takes away */
	if (bounding && capng_apply(CAPNG_SELECT_BOUNDS) < 0)
		return pc_syserr(err, "caps", "drop capabilities from the bounding set");
	if (capng_apply(CAPNG_SELECT_CAPS) < 0)
		return pc_syserr(err, "caps", "drop capabilities (capset)");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return pc_syserr(err, "caps", "clear the ambient set");

	if (capng_get_caps_process() < 0)
		return pc_syserr(err, "caps", "read this process's capabilities");
	for (unsigned cap = 0; cap <= CAP_LAST_CAP; cap++) {
		bool keep = false;
		for (size_t i = 0; i < ARRAY_SIZE(supervisor_caps); i++)
			keep |= had[i] && supervisor_caps[i].cap == cap;
		if (!keep && (capng_have_capability(CAPNG_PERMITTED, cap) == 1 ||
			      capng_have_capability(CAPNG_INHERITABLE, cap) == 1 ||
			      (bounding && capng_have_capability(CAPNG_BOUNDING_SET, cap) == 1)))
			return pc_fail(err, EPERM, "caps", "capability %s is still held after the drop",
				       capng_capability_to_name(cap));
	}
	return 0;
}

int caps_net(bool on, struct pc_err *err)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	static const unsigned caps[] = { CAP_NET_ADMIN, CAP_NET_BIND_SERVICE };
	bool change = false;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return pc_syserr(err, "caps", "capget");
	for (size_t i = 0; i < ARRAY_SIZE(caps); i++) {
		uint32_t bit = 1u << (caps[i] % 32);
		struct __user_cap_data_struct *d = &data[caps[i] / 32];
		if (!(d->permitted & bit) || !!(d->effective & bit) == on)
			continue;
		d->effective = on ? d->effective | bit : d->effective & ~bit;
		change = true;
	}
	if (change && syscall(SYS_capset, &hdr, data) < 0)
		return pc_syserr(err, "caps", on ? "raise CAP_NET_ADMIN" : "lower CAP_NET_ADMIN");
	return 0;
}
