/* pycell: errors, allocation, small parsers, fd helpers. */
#include "config.h"

#include <sys/random.h>

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"

static int pc_vfail(struct pc_err *err, int errnum, bool with_strerror, const char *step,
		    const char *fmt, va_list ap)
{
	if (err) {
		int n;
		err->errnum = errnum;
		snprintf(err->step, sizeof(err->step), "%s", step);
		n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		if (with_strerror && n >= 0 && (size_t)n < sizeof(err->msg))
			snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", strerror(errnum));
		/* messages become JSON strings: a cut may not split a character */
		utf8_trim_tail(err->msg);
	}
	errno = errnum ? errnum : EINVAL;
	return -1;
}

int pc_fail(struct pc_err *err, int errnum, const char *step, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pc_vfail(err, errnum, false, step, fmt, ap);
	va_end(ap);
	return -1;
}

int pc_syserr(struct pc_err *err, const char *step, const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	pc_vfail(err, e, true, step, fmt, ap);
	va_end(ap);
	return -1;
}

int pc_err_wrap(struct pc_err *err, const char *fmt, ...)
{
	char old[sizeof(err->msg)];
	va_list ap;
	int n;
	if (!err)
		return -1;
	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n + 2 < sizeof(err->msg)) {
		size_t at = (size_t)n + 2, room = sizeof(err->msg) - at - 1, len = strlen(old);
		memcpy(err->msg + n, ": ", 2);
		memcpy(err->msg + at, old, len < room ? len : room);
		err->msg[at + (len < room ? len : room)] = '\0';
	}
	utf8_trim_tail(err->msg);
	errno = err->errnum ? err->errnum : EINVAL;
	return -1;
}

static void oom(void)
{
	static const char m[] = "pycell: out of memory\n";
	(void)!write(2, m, sizeof(m) - 1);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		oom();
	return d;
}

char *xasprintf(const char *fmt, ...)
{
	char *s;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		oom();
	va_end(ap);
	return s;
}

/* Parse a non-negative decimal with optional fraction; no sign, no hex. */
static int parse_decimal(const char *s, double *out, const char **end)
{
	const char *p = s;
	double v = 0, scale = 0.1;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (*p++ - '0');
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9') {
			v += (*p++ - '0') * scale;
			scale /= 10;
		}
	}
	*out = v;
	*end = p;
	return 0;
}

#define PARSE_FAIL(what) \
	pc_fail(err, EINVAL, "parse", "%s, got \"%.*s\"", what, utf8_prefix(s ? s : "", 64), s ? s : "")

int parse_size(const char *s, uint64_t *out, struct pc_err *err)
{
	double v, mult = 1;
	const char *p;
	if (!s || parse_decimal(s, &v, &p) < 0)
		return PARSE_FAIL("expected a size such as 4096, 64K, 512M or 2G");
	switch (*p) {
	case '\0': break;
	case 'k': case 'K': mult = 1024.0; p++; break;
	case 'm': case 'M': mult = 1024.0 * 1024; p++; break;
	case 'g': case 'G': mult = 1024.0 * 1024 * 1024; p++; break;
	case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; p++; break;
	default:
		return PARSE_FAIL("unknown unit (use K, M, G or T)");
	}
	if (*p == 'i' && mult > 1)
		p++;
	if (*p == 'B' || *p == 'b')
		p++;
	if (*p != '\0')
		return PARSE_FAIL("trailing characters after the size");
	v *= mult;
	if (v >= 18446744073709551615.0)
		return PARSE_FAIL("size too large");
	*out = (uint64_t)v;
	return 0;
}

int parse_duration_ms(const char *s, uint64_t *out, struct pc_err *err)
{
	double v, mult = 1000;
	const char *p;
	if (!s || parse_decimal(s, &v, &p) < 0)
		return PARSE_FAIL("expected seconds such as 30, 2.5, 500ms or 2m");
	if (strcmp(p, "ms") == 0)
		mult = 1;
	else if (strcmp(p, "s") == 0 || *p == '\0')
		mult = 1000;
	else if (strcmp(p, "m") == 0 || strcmp(p, "min") == 0)
		mult = 60000;
	else if (strcmp(p, "h") == 0)
		mult = 3600000;
	else
		return PARSE_FAIL("unknown unit (use ms, s, m or h)");
	v *= mult;
	if (v > 1e15)
		return PARSE_FAIL("duration too large");
	*out = (uint64_t)(v + 0.5);
	return 0;
}

int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int writev_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n > IOV_MAX ? IOV_MAX : n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		/* past what went, into the first part that did not go whole */
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int read_fd_all(int fd, size_t max, char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = xmalloc(cap + 1);
	for (;;) {
		ssize_t r;
		if (n == cap) {
			if (cap >= max) {
				free(buf);
				errno = EFBIG;
				return -1;
			}
			cap = cap * 2 > max ? max : cap * 2;
			buf = xrealloc(buf, cap + 1);
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			free(buf);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	return 0;
}

int read_file(const char *path, size_t max, char **out, size_t *len)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		return -1;
	}
	return read_fd_all(fd, max, out, len);
}

int write_file(const char *path, const char *s)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	return write_all(fd, s, strlen(s));
}

int set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl);
}

int random_id(char out[RANDOM_ID_SIZE], const char *prefix)
{
	unsigned char raw[16];
	int n = prefix ? snprintf(out, RANDOM_ID_SIZE, "%.*s.", REPLICA_NAME_MAX, prefix) : 0;
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -1;
	for (size_t i = 0; i < sizeof(raw); i++)
		sprintf(out + n + 2 * i, "%02x", raw[i]);
	return 0;
}

uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

const char *pycell_datadir(void)
{
	const char *d = getenv("PYCELL_DATADIR");
	return d && *d ? d : PYCELL_DATADIR;
}

const char *pycell_init_path(void)
{
	static char path[PATH_MAX];
	const char *d = getenv("PYCELL_DATADIR");
	if (d && *d && (size_t)snprintf(path, sizeof(path), "%s/pycell-init", d) < sizeof(path) &&
	    access(path, X_OK) == 0)
		return path;
	return PYCELL_LIBEXECDIR "/pycell-init";
}

bool in_initial_userns(void)
{
	static int cached = -1;
	if (cached < 0) {
		char buf[64] = "";
		unsigned a, b, n;
		cleanup_close int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
		cached = fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0 &&
			 sscanf(buf, "%u %u %u", &a, &b, &n) == 3 && a == 0 && b == 0 && n == 4294967295U;
	}
	return cached;
}

int parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (*end || errno || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* ------------------------------------------------------------ fd passing */

int send_fds(int sock, const void *buf, size_t len, const int *fds, int n)
{
	char ctl[CMSG_SPACE(sizeof(int) * FDS_MAX)];
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n) {
		struct cmsghdr *c;
		memset(ctl, 0, sizeof(ctl));
		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

ssize_t recv_packet(int sock, void *buf, size_t len, int flags)
{
	ssize_t n;
	do
		n = recv(sock, buf, len, flags);
	while (n < 0 && (errno == ECONNRESET || errno == EINTR));
	return n;
}

ssize_t recv_fds(int sock, void *buf, size_t len, int *fds, int max, int *got)
{
	char ctl[CMSG_SPACE(sizeof(int) * FDS_MAX)];
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	bool extra = false;
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

	*got = 0;
	if (n <= 0)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			int *p = (int *)CMSG_DATA(c);
			for (int i = 0; i < k; i++) {
				if (*got < max) {
					fds[(*got)++] = p[i];
				} else {
					close(p[i]);
					extra = true;
				}
			}
		}
	}
	if (extra || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (int i = 0; i < *got; i++)
			close(fds[i]);
		*got = 0;
		errno = EPROTO;
		return -1;
	}
	return n;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static char *unescape(const char *s)
{
	char *out = xmalloc(strlen(s) + 1), *o = out;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
	return out;
}

int mountinfo_parse_line(char *line, struct mountinfo *m)
{
	char *f[6], *after[3], *save = NULL, *t;
	int n = 0, k = 0;
	bool dash = false;
	/* the six fixed fields, then optional ones up to "-", then three */
	for (t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save), n++) {
		if (n < 6)
			f[n] = t;
		else if (!dash && strcmp(t, "-") == 0)
			dash = true;
		else if (dash && k < 3)
			after[k++] = t;
	}
	if (n < 6 || !dash || k < 3)
		return -1;
	m->root = unescape(f[3]);
	m->point = unescape(f[4]);
	m->fstype = after[0];
	m->super_opts = after[2];
	return 0;
}

int utf8_prefix(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	/* cut before a character that does not fit whole */
	if (n == max)
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	return (int)n;
}

void utf8_trim_tail(char *s)
{
	size_t n = strlen(s), lead = n, need;
	unsigned char c;
	/* the last lead byte, at most three continuation bytes back */
	while (lead > 0 && n - lead < 4 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80)
		lead--;
	if (lead == 0)
		return;
	c = (unsigned char)s[lead - 1];
	need = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
	if (n - (lead - 1) < need)
		s[lead - 1] = '\0';
}

bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

bool strv_eq(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!str_eq(a[i], b[i]))
			return false;
	return true;
}

char *strv_join(char *const *v, size_t n, const char *sep)
{
	size_t len = 1, seplen = strlen(sep);
	char *s, *at;
	for (size_t i = 0; i < n; i++)
		len += strlen(v[i]) + (i ? seplen : 0);
	at = s = xmalloc(len);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(v[i]);
		if (i) {
			memcpy(at, sep, seplen);
			at += seplen;
		}
		memcpy(at, v[i], l);
		at += l;
	}
	*at = '\0';
	return s;
}

const char *rel_path_problem(const char *p, size_t len, size_t max)
{
	const char *seg = p;
	if (!len)
		return "is empty";
	if (len > max)
		return "is too long";
	if (strlen(p) != len)
		return "holds a NUL byte";
	if (*p == '/')
		return "is absolute: give it relative to /workspace";
	for (const char *q = p;; q++) {
		if (*q == '/' || !*q) {
			size_t n = (size_t)(q - seg);
			if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
				return "has an empty, \".\" or \"..\" component";
			if (!*q)
				return NULL;
			seg = q + 1;
		}
	}
}

static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

char *b64_decode(const char *s, size_t len, size_t *out_len)
{
	char *out = xmalloc(len * 3 / 4 + 3);
	size_t n = 0;
	unsigned acc = 0, bits = 0;
	while (len && s[len - 1] == '=')
		len--;
	for (size_t i = 0; i < len; i++) {
		int v = b64_value(s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (char)((acc >> bits) & 0xff);
		}
	}
	out[n] = '\0';
	*out_len = n;
	return out;
}

char *b64_encode(const void *p, size_t len)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *in = p;
	char *out = xmalloc((len + 2) / 3 * 4 + 1), *o = out;
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)in[i] << 16;
		if (i + 1 < len)
			v |= (unsigned)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		*o++ = abc[v >> 18];
		*o++ = abc[(v >> 12) & 63];
		*o++ = i + 1 < len ? abc[(v >> 6) & 63] : '=';
		*o++ = i + 2 < len ? abc[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

char *xmemdup(const void *p, size_t n)
{
	char *d = xmalloc(n + 1);
	memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

int mkdir_p(const char *path, mode_t mode, struct pc_err *err)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	if (len >= sizeof(buf))
		return pc_fail(err, ENAMETOOLONG, "mkdir", "path too long: %s", path);
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return pc_syserr(err, "mkdir", "mkdir %s", buf);
			if (c == '\0')
				break;
			*p = c;
		}
	}
	return 0;
}

int str_cmp_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory of ours that neither group nor others may write: its
 * permission bits; -1 when it is not. */
static int dir_of_ours(const char *dir)
{
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return -1;
	return (int)(st.st_mode & 07777);
}

char *cache_subdir(const char *name, mode_t mode)
{
	const char *env = getenv("PYCELL_CACHE_DIR"), *home = getenv("HOME");
	const char *xdg = getenv("XDG_CACHE_HOME");
	cleanup_free char *base = NULL;
	char *dir;
	int bm, dm;
	if (env && strcmp(env, "none") == 0)
		return NULL;
	if (env && *env == '/')
		base = xstrdup(env);
	else if (geteuid() == 0)
		base = xstrdup("/var/cache/pycell");
	else if (xdg && *xdg == '/')
		base = xasprintf("%s/pycell", xdg);
	else if (home && *home == '/')
		base = xasprintf("%s/.cache/pycell", home);
	else
		return NULL;
	/* traversable: a jail's ids reach what a cache binds into it (the
	 * font list) by name; nothing in it is listable but by us */
	dir = xasprintf("%s/%s", base, name);
	if ((mkdir(base, 0711) < 0 && errno != EEXIST) || (mkdir(dir, mode) < 0 && errno != EEXIST) ||
	    (bm = dir_of_ours(base)) < 0 || (dm = dir_of_ours(dir)) < 0) {
		free(dir);
		return NULL;
	}
	/* for a NAME others enter: whatever the umask made of them, or a BASE
	 * an earlier pycell made 0700 */
	if ((mode & 0011) == 0011 && (((bm & 0011) != 0011 && chmod(base, (mode_t)bm | 0011) < 0) ||
				      ((mode_t)dm != mode && chmod(dir, mode) < 0))) {
		free(dir);
		return NULL;
	}
	return dir;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
