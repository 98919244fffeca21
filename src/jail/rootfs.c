/* pycell: the jail's root filesystem.
 *
 * The host root is reached only while the jail is built: a small base tmpfs
 * is mounted over /tmp and pivoted to, so the host appears at /oldroot and
 * every bind source is /oldroot/<path> (host /tmp included).  The real root
 * is a second tmpfs at /newroot; after it is built the host is detached and
 * /newroot becomes / with a second pivot_root, then read-only but for its
 * /tmp and /dev/shm. */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/rootfs.h"

#define OLD "/oldroot"
#define NEW "/newroot"

static int do_mount(const char *src, const char *dst, const char *type, unsigned long flags,
		    const char *data, struct pc_err *err)
{
	if (mount(src, dst, type, flags, data) < 0)
		return pc_syserr(err, "mount", "mount %s on %s", src ? src : type ? type : "(remount)", dst);
	return 0;
}

/* Read-only (and nosuid, nodev) for a mount and everything below it.
 * mount_setattr only changes what it is asked to, so flags the host locked
 * on a bind (noexec, ...) need no special handling, unlike MS_REMOUNT. */
static int make_readonly(const char *path, bool recursive, struct pc_err *err)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
	};
	if (mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr, sizeof(attr)) < 0)
		return pc_syserr(err, "mount", "make %s read-only", path);
	return 0;
}

/* Every tmpfs of a jail's: its mount's flags, and its inodes for a size
 * (a file of 4 KiB each, and 64 more). */
#define TMPFS_FLAGS (MS_NOSUID | MS_NODEV)
static uint64_t tmpfs_inodes(uint64_t size)
{
	return size / 4096 + 64;
}

/* A size-limited tmpfs owned by us, or by the jail's user when `owner`. */
static int tmpfs(const char *dst, uint64_t size, const char *mode, const struct policy *owner,
		 struct pc_err *err)
{
	char opts[128];
	int n = snprintf(opts, sizeof(opts), "size=%llu,mode=%s,nr_inodes=%llu", (unsigned long long)size,
			 mode, (unsigned long long)tmpfs_inodes(size));
	/* The owner defaults to us; name it only when it differs, because
	 * without a uid range (pycell not run as root) only our id is mapped. */
	if (owner && (owner->jail_uid != geteuid() || owner->jail_gid != getegid()))
		snprintf(opts + n, sizeof(opts) - (size_t)n, ",uid=%u,gid=%u", (unsigned)owner->jail_uid,
			 (unsigned)owner->jail_gid);
	return do_mount("tmpfs", dst, "tmpfs", TMPFS_FLAGS, opts, err);
}

static int write_text(const char *path, const char *data, size_t len, mode_t mode, struct pc_err *err)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return pc_syserr(err, "rootfs", "create %s", path);
	if (write_all(fd, data, len) < 0)
		return pc_syserr(err, "rootfs", "write %s", path);
	return 0;
}

/* If the host's src is a symbolic link, make the same link at dst: 1 when
 * it was one, 0 when not (errno tells: EINVAL not a link, ENOENT none). */
static int copy_link(const char *src, const char *dst, struct pc_err *err)
{
	char target[PATH_MAX];
	ssize_t n = readlink(src, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = '\0';
	if (symlink(target, dst) < 0)
		return pc_syserr(err, "rootfs", "symlink %s", dst + strlen(NEW));
	return 1;
}

/* Bind host path src (as seen under /oldroot) to dst inside the new root,
 * creating the mount point as a file or directory to match. */
static int bind_path(const char *src, const char *dst, bool optional, bool writable,
		     struct pc_err *err)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct stat st;
	if (snprintf(from, sizeof(from), OLD "%s", src) >= (int)sizeof(from) ||
	    snprintf(to, sizeof(to), NEW "%s", dst) >= (int)sizeof(to))
		return pc_fail(err, ENAMETOOLONG, "bind", "path too long: %s", src);
	if (stat(from, &st) < 0) {
		if (optional && errno == ENOENT)
			return 0;
		return pc_syserr(err, "bind", "bind source %s", src);
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir_p(to, 0755, err) < 0)
			return -1;
	} else {
		char *slash;
		cleanup_close int fd = -1;
		char parent[PATH_MAX];
		memcpy(parent, to, strlen(to) + 1);
		slash = strrchr(parent, '/');
		*slash = '\0';
		if (mkdir_p(parent, 0755, err) < 0)
			return -1;
		fd = open(to, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
		if (fd < 0)
			return pc_syserr(err, "bind", "create mount point %s", dst);
	}
	if (do_mount(from, to, NULL, MS_BIND | MS_REC, NULL, err) < 0)
		return -1;
	if (!writable)
		return make_readonly(to, true, err);
	return 0;
}

/* A host path in the new root as the host has it: a symbolic link is
 * copied as a link (/bin -> usr/bin on merged-/usr hosts, /etc/localtime
 * -> /usr/share/zoneinfo/...: they point into the jail's own /usr and would
 * not resolve from here), anything else is bound read-only, and a missing
 * one is skipped (not every host has every one).  /etc's files are bound,
 * not copied: a copy was 124 KiB of every jail's tmpfs (the host's
 * ld.so.cache and matplotlibrc most of it), kept for a session's life. */
static int link_or_bind(const char *path, struct pc_err *err)
{
	char src[PATH_MAX], dst[PATH_MAX];
	int link;
	snprintf(src, sizeof(src), OLD "%s", path);
	snprintf(dst, sizeof(dst), NEW "%s", path);
	if ((link = copy_link(src, dst, err)) != 0)
		return link < 0 ? -1 : 0;
	if (errno == ENOENT)
		return 0;
	if (errno != EINVAL)
		return pc_syserr(err, "rootfs", "readlink %s", path);
	return bind_path(path, path, true, false, err);
}

/* fn(name, d_type, ctx) for each entry of dir, read into a buffer on the
 * stack: opendir's is the heap's, and a warm jail's init builds its root
 * in the zygote's memory, where a kill in the middle of a malloc or free
 * (a run cancelled, a supervisor out of descriptors) would leave the
 * zygote's heap torn for every jail after (small_init.h).  1 when fn
 * stopped the walk (returned nonzero), 0 at its end, -1 with errno when
 * dir could not be read. */
static int each_entry(const char *dir, int (*fn)(const char *name, unsigned char type, void *ctx), void *ctx)
{
	char buf[4096] __attribute__((aligned(8)));
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), e;
	ssize_t n;

	if (fd < 0)
		return -1;
	while ((n = getdents64(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *d = (const struct dirent64 *)(buf + off);
			off += d->d_reclen;
			if (fn(d->d_name, d->d_type, ctx)) {
				close(fd);
				return 1;
			}
		}
	}
	e = errno;
	close(fd);
	errno = e;
	return n < 0 ? -1 : 0;
}

struct etc_walk {
	struct pc_err *err;
	int rc;
};

static int bind_python3_dir(const char *name, unsigned char type, void *ctx)
{
	struct etc_walk *w = ctx;
	char path[sizeof("/etc/") + 256];
	if (strncmp(name, "python3", 7) != 0 || type != DT_DIR)
		return 0;
	snprintf(path, sizeof(path), "/etc/%s", name);
	w->rc = bind_path(path, path, true, false, w->err);
	return w->rc < 0;
}

/* Debian's Python keeps part of itself in /etc: sitecustomize.py in
 * /usr/lib/python3.X is a link to /etc/python3.X/sitecustomize.py, and
 * /etc/python3 holds debian_config.  Bind those directories read-only, so
 * importing sitecustomize (and walking the standard library) works. */
static int bind_python_etc(struct pc_err *err)
{
	struct etc_walk w = { err, 0 };
	if (each_entry(OLD "/etc", bind_python3_dir, &w) < 0)
		return pc_syserr(err, "rootfs", "list the host's /etc");
	return w.rc;
}

static int build_etc(const struct policy *p, struct pc_err *err)
{
	static const char *const host[] = { "/etc/ld.so.cache", "/etc/nsswitch.conf", "/etc/services",
					    "/etc/protocols", "/etc/localtime", "/etc/host.conf", "/etc/gai.conf",
					    "/etc/matplotlibrc" /* Debian's matplotlib reads only this one */ };
	char buf[1024];
	int n;
	if (mkdir_p(NEW "/etc", 0755, err) < 0)
		return -1;
	n = snprintf(buf, sizeof(buf),
		     "root:x:0:0:root:/root:/usr/sbin/nologin\n"
		     "pycell:x:%u:%u:pycell:" JAIL_WORKSPACE ":/usr/sbin/nologin\n"
		     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		     (unsigned)p->jail_uid, (unsigned)p->jail_gid);
	if (write_text(NEW "/etc/passwd", buf, (size_t)n, 0444, err) < 0)
		return -1;
	n = snprintf(buf, sizeof(buf), "root:x:0:\npycell:x:%u:\nnogroup:x:65534:\n",
		     (unsigned)p->jail_gid);
	if (write_text(NEW "/etc/group", buf, (size_t)n, 0444, err) < 0)
		return -1;
	n = snprintf(buf, sizeof(buf),
		     "127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		     p->hostname);
	if (write_text(NEW "/etc/hosts", buf, (size_t)n, 0444, err) < 0)
		return -1;
	n = snprintf(buf, sizeof(buf), "%s\n", p->hostname);
	if (write_text(NEW "/etc/hostname", buf, (size_t)n, 0444, err) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(host); i++)
		if (link_or_bind(host[i], err) < 0)
			return -1;
	/* Debian reaches some libraries through alternatives links (numpy's
	 * libblas.so.3 -> /etc/alternatives/libblas.so.3-x86_64-linux-gnu) */
	if (bind_path("/etc/alternatives", "/etc/alternatives", true, false, err) < 0)
		return -1;
	/* fontconfig's (matplotlib's text, PIL's fonts) */
	if (bind_path("/etc/fonts", "/etc/fonts", true, false, err) < 0)
		return -1;
	if (bind_python_etc(err) < 0)
		return -1;
	if (p->ca_certificates &&
	    (bind_path("/etc/ssl/certs", "/etc/ssl/certs", true, false, err) < 0 ||
	     bind_path("/etc/ca-certificates", "/etc/ca-certificates", true, false, err) < 0))
		return -1;
	return 0;
}

/* An egress run asks names of its supervisor's responder (run/egress.c),
 * at the other end of its veth; no other run has a resolver to ask. */
static int build_resolv(uint32_t dns, struct pc_err *err)
{
	char buf[160], ip[INET_ADDRSTRLEN];
	int n;
	if (!dns)
		return 0;
	inet_ntop(AF_INET, &dns, ip, sizeof(ip));
	n = snprintf(buf, sizeof(buf), "nameserver %s\noptions timeout:2 attempts:2\n", ip);
	return write_text(NEW "/etc/resolv.conf", buf, (size_t)n, 0444, err);
}

static int build_dev(const struct policy *p, struct pc_err *err)
{
	static const char *const devs[] = { "null", "zero", "full", "random", "urandom" };
	static const char *const links[][2] = {
		{ "fd", "/proc/self/fd" }, { "stdin", "/proc/self/fd/0" },
		{ "stdout", "/proc/self/fd/1" }, { "stderr", "/proc/self/fd/2" },
	};
	/* a directory of the root tmpfs, read-only with it: a file system
	 * less in every jail (each costs the kernel bookkeeping in every
	 * memory cgroup, growing with the jails there are) */
	if (mkdir(NEW "/dev", 0755) < 0)
		return pc_syserr(err, "rootfs", "mkdir /dev");
	for (size_t i = 0; i < ARRAY_SIZE(devs); i++) {
		char src[64];
		snprintf(src, sizeof(src), "/dev/%s", devs[i]);
		if (bind_path(src, src, false, true, err) < 0)
			return -1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		char dst[64];
		snprintf(dst, sizeof(dst), NEW "/dev/%s", links[i][0]);
		if (symlink(links[i][1], dst) < 0)
			return pc_syserr(err, "rootfs", "symlink /dev/%s", links[i][0]);
	}
	/* A devpts of the jail's own (every devpts mount in a user namespace
	 * is a new instance): pty.fork, openpty and terminal tools work, and
	 * no pty of the host or of another jail is visible here.  ptmx is
	 * 0666 so the jail's user can open it; max bounds how many ptys one
	 * jail takes from the kernel's shared pool (kernel.pty.max). */
	if (mkdir(NEW "/dev/pts", 0755) < 0)
		return pc_syserr(err, "rootfs", "mkdir /dev/pts");
	if (do_mount("devpts", NEW "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		     "newinstance,ptmxmode=0666,mode=0620,max=" JAIL_MAX_PTYS, err) < 0)
		return -1;
	if (symlink("pts/ptmx", NEW "/dev/ptmx") < 0)
		return pc_syserr(err, "rootfs", "symlink /dev/ptmx");
	return 0;
}

/* /tmp, and /dev/shm with it: directories of the root tmpfs, each bound
 * on itself to be the writable places of a read-only root (file systems
 * less, as /dev and /run/pycell are).  A bind cannot be left by `..`, and
 * link and rename stop at a mount, so nothing else of the root is reached
 * from them.  The root's size leaves them limits.tmp together
 * (size_root). */
static int build_tmp(const struct policy *p, struct pc_err *err)
{
	struct mount_attr noexec = { .attr_set = MOUNT_ATTR_NOEXEC };
	/* chmod: the umask takes the sticky and write bits from mkdir's */
	if (mkdir(NEW "/tmp", 0700) < 0 || chmod(NEW "/tmp", 01777) < 0)
		return pc_syserr(err, "rootfs", "mkdir /tmp");
	if (do_mount(NEW "/tmp", NEW "/tmp", NULL, MS_BIND, NULL, err) < 0)
		return -1;
	if (!p->dev_shm)
		return 0;
	if (mkdir(NEW "/dev/shm", 0700) < 0 || chmod(NEW "/dev/shm", 01777) < 0)
		return pc_syserr(err, "rootfs", "mkdir /dev/shm");
	if (do_mount(NEW "/dev/shm", NEW "/dev/shm", NULL, MS_BIND, NULL, err) < 0)
		return -1;
	if (mount_setattr(AT_FDCWD, NEW "/dev/shm", 0, &noexec, sizeof(noexec)) < 0)
		return pc_syserr(err, "mount", "make /dev/shm noexec");
	return 0;
}

/* The program files into dir (the run dir), read-only. */
static int write_program(const char *dir, const struct jail_spec *s, struct pc_err *err)
{
	char path[PATH_MAX];
	for (int i = 0; i < s->n_files; i++) {
		const struct jail_file *f = &s->files[i];
		if (!f->name[0] || strchr(f->name, '/') || strcmp(f->name, "lib") == 0 ||
		    strcmp(f->name, ".") == 0 || strcmp(f->name, "..") == 0)
			return pc_fail(err, EINVAL, "rootfs", "invalid program file name \"%s\"", f->name);
		snprintf(path, sizeof(path), "%s/%s", dir, f->name);
		if (write_text(path, f->data, f->len, 0444, err) < 0)
			return -1;
	}
	return 0;
}

struct font_find {
	char *name;
	size_t size;
};

static int font_list_named(const char *name, unsigned char type, void *ctx)
{
	struct font_find *f = ctx;
	size_t n = strlen(name);
	if (type != DT_REG || strncmp(name, "fontlist-v", 10) != 0 || n <= 15 || strcmp(name + n - 5, ".json") != 0 ||
	    n >= f->size)
		return 0;
	memcpy(f->name, name, n + 1);
	return 1;
}

bool rootfs_font_list(const char *dir, char *name, size_t size)
{
	struct font_find f = { name, size };
	return each_entry(dir, font_list_named, &f) == 1;
}

/* The font list of s->fonts_dir, when it has one: its directory bound at
 * JAIL_FONTS_DIR (in the run dir, made read-only with it), and
 * JAIL_MPLCONFIGDIR made, the jail user's as the rest of /tmp would be,
 * holding a link to it.  The name is found under the host's root. */
static int fonts_bind(const struct jail_spec *s, char *name, size_t size, struct pc_err *err)
{
	char host[PATH_MAX];
	name[0] = '\0';
	if (!s->fonts_dir || snprintf(host, sizeof(host), OLD "%s", s->fonts_dir) >= (int)sizeof(host) ||
	    !rootfs_font_list(host, name, size))
		return 0;
	return bind_path(s->fonts_dir, JAIL_FONTS_DIR, false, false, err);
}

static int fonts_link(const struct policy *p, const char *name, struct pc_err *err)
{
	char link[PATH_MAX], target[PATH_MAX];
	if (!name[0])
		return 0;
	snprintf(link, sizeof(link), NEW JAIL_MPLCONFIGDIR "/%s", name);
	snprintf(target, sizeof(target), JAIL_FONTS_DIR "/%s", name);
	/* a policy's bind there is left as it is */
	if (mkdir(NEW JAIL_MPLCONFIGDIR, 0700) < 0)
		return errno == EEXIST ? 0 : pc_syserr(err, "rootfs", "mkdir " JAIL_MPLCONFIGDIR);
	if (symlink(target, link) < 0)
		return pc_syserr(err, "rootfs", "symlink %s", link + strlen(NEW));
	/* ours, unless the jail's user is another (a range is mapped) */
	if ((p->jail_uid != geteuid() || p->jail_gid != getegid()) &&
	    (lchown(link, p->jail_uid, p->jail_gid) < 0 ||
	     chown(NEW JAIL_MPLCONFIGDIR, p->jail_uid, p->jail_gid) < 0))
		return pc_syserr(err, "rootfs", "chown " JAIL_MPLCONFIGDIR);
	return 0;
}

/* /run/pycell: the program (and cell-mode variables), then the runtime
 * package bound read-only at lib/; a directory of the root tmpfs
 * (rootfs_size counts its files), read-only with it.  A ready jail's
 * holds the runtime only: its python reads the program from a memfd.  The
 * font list's name, when one is bound, in font_list. */
static int build_run_dir(const struct jail_spec *s, char *font_list, size_t list_size, struct pc_err *err)
{
	if (mkdir_p(NEW JAIL_RUN_DIR, 0755, err) < 0)
		return -1;
	if (write_program(NEW JAIL_RUN_DIR, s, err) < 0)
		return -1;
	if (s->runtime_dir && bind_path(s->runtime_dir, JAIL_LIB_DIR, false, false, err) < 0)
		return -1;
	if (s->packages_dir && bind_path(s->packages_dir, JAIL_PACKAGES_DIR, false, false, err) < 0)
		return -1;
	return fonts_bind(s, font_list, list_size, err);
}

/* a + b, at most the largest whole number of pages (tmpfs rounds a size
 * up to pages, and one past that would wrap to 0, which it takes for
 * unlimited) */
static uint64_t size_add(uint64_t a, uint64_t b)
{
	const uint64_t most = UINT64_MAX & ~(uint64_t)4095;
	return a > most || b > most - a ? most : a + b;
}

/* The root tmpfs while it is built: /etc's files, the mount points, the
 * run dir's program files, and /tmp's share (size_root sets the size it
 * keeps). */
static uint64_t rootfs_size(const struct jail_spec *s)
{
	uint64_t size = 1 << 20;
	for (int i = 0; i < s->n_files; i++)
		size += s->files[i].len + 4096;
	return size_add(size, s->policy->limits.tmp_bytes);
}

/* The root's size once built: what it holds and limits.tmp for /tmp and
 * /dev/shm (writable only there), so the two have that much together;
 * inodes likewise, what it holds and a tmpfs of limits.tmp's.  A remount,
 * not fspick and fsconfig: a container's seccomp profile allows mount
 * (contrib/container/seccomp.py), and Docker's default refuses those two. */
static int size_root(const struct policy *p, struct pc_err *err)
{
	struct statvfs st;
	char opts[96];
	if (statvfs(NEW, &st) < 0)
		return pc_syserr(err, "rootfs", "statvfs the root");
	snprintf(opts, sizeof(opts), "size=%llu,nr_inodes=%llu",
		 (unsigned long long)size_add((st.f_blocks - st.f_bfree) * st.f_frsize, p->limits.tmp_bytes),
		 (unsigned long long)(st.f_files - st.f_ffree + tmpfs_inodes(p->limits.tmp_bytes)));
	/* a remount sets the mount's flags too: tmpfs()'s again */
	if (mount(NULL, NEW, NULL, MS_REMOUNT | TMPFS_FLAGS, opts) < 0)
		return pc_syserr(err, "mount", "size the root tmpfs (%s)", opts);
	return 0;
}

static int pivot_root(const char *new_root, const char *put_old)
{
	return (int)syscall(SYS_pivot_root, new_root, put_old);
}

int rootfs_build(const struct jail_spec *s, uint32_t dns, struct pc_err *err)
{
	const struct policy *p = s->policy;
	static const char *const aliases[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
	char font_list[NAME_MAX + 1];

	/* Nothing we mount may propagate back to the host. */
	if (do_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, err) < 0)
		return -1;
	if (do_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755", err) < 0)
		return -1;
	if (mkdir("/tmp" OLD, 0755) < 0 || mkdir("/tmp" NEW, 0755) < 0)
		return pc_syserr(err, "rootfs", "mkdir in the base tmpfs");
	if (pivot_root("/tmp", "/tmp" OLD) < 0)
		return pc_syserr(err, "pivot_root", "pivot_root to the base tmpfs");
	if (chdir("/") < 0)
		return pc_syserr(err, "rootfs", "chdir /");

	if (tmpfs(NEW, rootfs_size(s), "0755", NULL, err) < 0)
		return -1;
	if (bind_path("/usr", "/usr", false, false, err) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(aliases); i++)
		if (link_or_bind(aliases[i], err) < 0)
			return -1;
	if (build_etc(p, err) < 0 || build_resolv(dns, err) < 0 || build_dev(p, err) < 0)
		return -1;
	if (mkdir(NEW "/proc", 0555) < 0)
		return pc_syserr(err, "rootfs", "mkdir /proc");
	if (do_mount("proc", NEW "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err) < 0)
		return -1;
	if (build_tmp(p, err) < 0)
		return -1;
	if (mkdir(NEW JAIL_WORKSPACE, 0755) < 0)
		return pc_syserr(err, "rootfs", "mkdir /workspace");
	if (tmpfs(NEW JAIL_WORKSPACE, p->limits.workspace_bytes, "0755", p, err) < 0)
		return -1;
	for (size_t i = 0; i < p->n_binds; i++) {
		const struct bind_spec *b = &p->binds[i];
		if (bind_path(b->src, b->dst, b->optional, b->writable, err) < 0)
			return -1;
	}
	if (build_run_dir(s, font_list, sizeof(font_list), err) < 0 || fonts_link(p, font_list, err) < 0 ||
	    size_root(p, err) < 0)
		return -1;

	/* Detach the host, with the base tmpfs it hangs from: one unmount
	 * (each one that frees mounts waits for an RCU grace period).  It
	 * must be private first, or the unmount would propagate to the
	 * host's mount namespace. */
	if (do_mount(NULL, OLD, NULL, MS_REC | MS_PRIVATE, NULL, err) < 0)
		return -1;
	if (chdir(NEW) < 0)
		return pc_syserr(err, "rootfs", "chdir " NEW);
	if (pivot_root(".", ".") < 0)
		return pc_syserr(err, "pivot_root", "pivot_root into the jail root");
	if (umount2(".", MNT_DETACH) < 0)
		return pc_syserr(err, "umount", "detach the base tmpfs and the host root");
	if (chdir("/") < 0)
		return pc_syserr(err, "rootfs", "chdir /");
	if (make_readonly("/", false, err) < 0)
		return -1;
	if (access(p->python, X_OK) < 0)
		return pc_syserr(err, "python", "interpreter %s inside the jail", p->python);
	if (chdir(JAIL_WORKSPACE) < 0)
		return pc_syserr(err, "rootfs", "chdir " JAIL_WORKSPACE);
	return 0;
}
