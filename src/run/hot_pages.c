/* pycell: the zygote's pages a ready jail writes first (see hot_pages.h).
 *
 * Measured on this project's 2-core test machine (a paravirtualized
 * guest, where an exception costs the most): a copy-on-write fault 36-45
 * us a page, the same copy by MADV_POPULATE_WRITE 7-8 us. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "run/hot_pages.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PM_PRESENT (1ull << 63)
#define PM_FILE (1ull << 61)       /* a page of a file, or shared */
#define PM_EXCLUSIVE (1ull << 56)  /* mapped by this process alone */

/* A mapping larger than this is a reservation, not a heap (a sanitizer's
 * shadow is terabytes): reading its page map would take minutes */
#define HOT_MAP_MAX ((unsigned long)1 << 30)

/* the probe's time: a few ms; one that takes longer is killed, and
 * nothing is copied ahead */
#define HOT_PROBE_MS 2000

int hot_pages_maps(struct hot_range **out, size_t *n, bool anonymous)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char *line = NULL;
	size_t cap = 0, len = 0;

	*out = NULL;
	*n = 0;
	if (!f)
		return -1;
	while (getline(&line, &len, f) > 0) {
		unsigned long lo, hi, off, inode;
		unsigned maj, mnr;
		char perms[5];
		int name = 0;
		if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &lo, &hi, perms, &off, &maj, &mnr, &inode,
			   &name) < 7 || hi <= lo)
			continue;
		if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p' || hi - lo > HOT_MAP_MAX)
			continue;
		/* anonymous: no file, and no name but the heap's ([stack] is
		 * this process's own, [vvar] the kernel's) */
		if (anonymous && (inode != 0 || (line[name] != '\n' && line[name] != '\0' &&
						 strncmp(line + name, "[heap]", 6) != 0)))
			continue;
		if (*n == cap)
			*out = xrealloc(*out, (cap = cap ? 2 * cap : 64) * sizeof(**out));
		(*out)[(*n)++] = (struct hot_range){ lo, hi - lo };
	}
	free(line);
	fclose(f);
	return 0;
}

/* The probe child's: the parent's maps, the pipe to it, and the pages
 * reported in earlier phases (sorted), which a later phase leaves out */
static struct {
	const struct hot_range *maps;
	size_t n_maps;
	int fd;
	uintptr_t *seen;
	size_t n_seen, cap_seen;
} probe_state = { .fd = -1 };

static int by_address(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return (x > y) - (x < y);
}

static bool seen_before(uintptr_t addr)
{
	return probe_state.n_seen &&
	       bsearch(&addr, probe_state.seen, probe_state.n_seen, sizeof(addr), by_address) != NULL;
}

/* In the probe child, at the end of a phase: the pages of the parent's
 * maps that became its own (present, mapped by it alone, not a file's)
 * and were not reported before, as ranges, at most HOT_PAGES_MAX pages,
 * then an empty range, written to the parent. */
void hot_pages_mark(void)
{
	static const struct hot_range end = { 0, 0 };
	long page = sysconf(_SC_PAGESIZE);
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	struct hot_range *r = NULL;
	size_t n = 0, cap = 0, pages = 0, n_seen = probe_state.n_seen;
	uint64_t buf[512];

	if (probe_state.fd < 0)
		return;
	for (size_t m = 0; pm >= 0 && m < probe_state.n_maps && pages < HOT_PAGES_MAX; m++) {
		const struct hot_range *map = &probe_state.maps[m];
		size_t total = map->len / (size_t)page;
		for (size_t done = 0; done < total && pages < HOT_PAGES_MAX;) {
			size_t k = total - done < 512 ? total - done : 512;
			off_t at = (off_t)((map->start / (size_t)page + done) * sizeof(uint64_t));
			ssize_t got = pread(pm, buf, k * sizeof(uint64_t), at);
			if (got <= 0)
				break;
			k = (size_t)got / sizeof(uint64_t);
			for (size_t i = 0; i < k && pages < HOT_PAGES_MAX; i++) {
				uintptr_t addr = map->start + (done + i) * (size_t)page;
				if ((buf[i] & (PM_PRESENT | PM_EXCLUSIVE | PM_FILE)) != (PM_PRESENT | PM_EXCLUSIVE) ||
				    seen_before(addr))
					continue;
				pages++;
				if (n_seen == probe_state.cap_seen)
					probe_state.seen = xrealloc(probe_state.seen,
								    (probe_state.cap_seen = 2 * n_seen + 256) * sizeof(addr));
				probe_state.seen[n_seen++] = addr;
				if (n && r[n - 1].start + r[n - 1].len == addr) {
					r[n - 1].len += (size_t)page;
					continue;
				}
				if (n == cap)
					r = xrealloc(r, (cap = cap ? 2 * cap : 64) * sizeof(*r));
				r[n++] = (struct hot_range){ addr, (size_t)page };
			}
			done += k;
		}
	}
	if (pm >= 0)
		close(pm);
	probe_state.n_seen = n_seen;
	qsort(probe_state.seen, n_seen, sizeof(*probe_state.seen), by_address);
	if (n)
		write_all(probe_state.fd, r, n * sizeof(*r));
	write_all(probe_state.fd, &end, sizeof(end));
	free(r);
}

/* The parent's: the probe's bytes, phases of ranges each ended by an
 * empty one, into h[0..n-1] (phases past n are dropped, and what follows
 * the last end: a probe killed in a phase keeps those it ended).  -1 when
 * no phase ended. */
static int split_phases(struct hot_pages *h, size_t n, const struct hot_range *r, size_t count)
{
	size_t phase = 0, from = 0;
	long page = sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < count; i++) {
		if (r[i].len != 0)
			continue;
		if (phase < n && i > from) {
			h[phase].n = i - from;
			h[phase].r = xmalloc(h[phase].n * sizeof(*r));
			memcpy(h[phase].r, r + from, h[phase].n * sizeof(*r));
			for (size_t k = 0; k < h[phase].n; k++)
				h[phase].pages += h[phase].r[k].len / (size_t)page;
		}
		phase++;
		from = i + 1;
	}
	return phase ? 0 : -1;
}

int hot_pages_learn(struct hot_pages *h, size_t n, void (*probe)(void))
{
	struct hot_range *maps;
	char *buf = NULL;
	size_t n_maps, len = 0, cap = 0;
	int p[2], rc;
	pid_t pid;
	ssize_t got = 0;

	for (size_t i = 0; i < n; i++)
		h[i] = (struct hot_pages){ 0 };
	if (hot_pages_maps(&maps, &n_maps, false) < 0)
		return -1;
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(maps);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		probe_state.maps = maps;
		probe_state.n_maps = n_maps;
		probe_state.fd = p[1];
		probe();
		hot_pages_mark();
		_exit(0);
	}
	free(maps);
	close(p[1]);
	while (pid > 0) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		int ready = poll(&pf, 1, HOT_PROBE_MS);
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		if (len == cap)
			buf = xrealloc(buf, cap = cap ? 2 * cap : 4096);
		got = read(p[0], buf + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(p[0]);
	/* SIGCHLD may be ignored (the zygote's): then there is nothing to reap */
	while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	/* a probe killed in a phase (slow: HOT_PROBE_MS without a word)
	 * keeps the phases it ended */
	rc = pid < 0 ? -1 : split_phases(h, n, (const struct hot_range *)(void *)buf, len / sizeof(struct hot_range));
	free(buf);
	if (rc < 0)
		hot_pages_free(h, n);
	return rc;
}

size_t hot_pages_populate(const struct hot_pages *h)
{
	size_t copied = 0;
	/* a range that fails (missing here: ENOMEM; one the advice does not
	 * apply to, or a kernel without it: EINVAL) is passed over, a call
	 * of a microsecond */
	for (size_t i = 0; i < h->n; i++)
		if (madvise((void *)h->r[i].start, h->r[i].len, MADV_POPULATE_WRITE) == 0)
			copied += h->r[i].len;
	return copied / (size_t)sysconf(_SC_PAGESIZE);
}

void hot_pages_free(struct hot_pages *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(h[i].r);
		h[i] = (struct hot_pages){ 0 };
	}
}
