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
#include <stdio.h>
#include <stdlib.h>
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

/* The private writable mappings of this process (/proc/self/maps), the
 * only ones a clone copies on write, but those above HOT_MAP_MAX.  -1
 * when unreadable. */
static int writable_maps(struct hot_range **out, size_t *n)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char *line = NULL;
	size_t cap = 0, len = 0;

	*out = NULL;
	*n = 0;
	if (!f)
		return -1;
	while (getline(&line, &len, f) > 0) {
		unsigned long lo, hi;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3 || hi <= lo)
			continue;
		if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p' || hi - lo > HOT_MAP_MAX)
			continue;
		if (*n == cap)
			*out = xrealloc(*out, (cap = cap ? 2 * cap : 64) * sizeof(**out));
		(*out)[(*n)++] = (struct hot_range){ lo, hi - lo };
	}
	free(line);
	fclose(f);
	return 0;
}

/* In the probe child: the pages of maps that became its own (present,
 * mapped by it alone, not a file's), as ranges, at most HOT_PAGES_MAX
 * pages, written to fd. */
static void report_own_pages(const struct hot_range *maps, size_t n_maps, int fd)
{
	long page = sysconf(_SC_PAGESIZE);
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	struct hot_range *r = NULL;
	size_t n = 0, cap = 0, pages = 0;
	uint64_t buf[512];

	if (pm < 0)
		return;
	for (size_t m = 0; m < n_maps && pages < HOT_PAGES_MAX; m++) {
		size_t total = maps[m].len / (size_t)page;
		for (size_t done = 0; done < total && pages < HOT_PAGES_MAX;) {
			size_t k = total - done < 512 ? total - done : 512;
			off_t at = (off_t)((maps[m].start / (size_t)page + done) * sizeof(uint64_t));
			ssize_t got = pread(pm, buf, k * sizeof(uint64_t), at);
			if (got <= 0)
				break;
			k = (size_t)got / sizeof(uint64_t);
			for (size_t i = 0; i < k && pages < HOT_PAGES_MAX; i++) {
				uintptr_t addr = maps[m].start + (done + i) * (size_t)page;
				if ((buf[i] & (PM_PRESENT | PM_EXCLUSIVE | PM_FILE)) != (PM_PRESENT | PM_EXCLUSIVE))
					continue;
				pages++;
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
	close(pm);
	if (n)
		write_all(fd, r, n * sizeof(*r));
	free(r);
}

int hot_pages_learn(struct hot_pages *h, void (*probe)(void))
{
	struct hot_range *maps;
	char *buf = NULL;
	size_t n_maps, len = 0, cap = 0;
	int p[2];
	pid_t pid;
	ssize_t got = 0;

	*h = (struct hot_pages){ 0 };
	if (writable_maps(&maps, &n_maps) < 0)
		return -1;
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(maps);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		probe();
		report_own_pages(maps, n_maps, p[1]);
		_exit(0);
	}
	free(maps);
	close(p[1]);
	while (pid > 0) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		int rc = poll(&pf, 1, HOT_PROBE_MS);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0) {
			kill(pid, SIGKILL);
			got = -1;
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
	if (pid < 0 || got < 0 || len % sizeof(struct hot_range)) {
		free(buf);
		return -1;
	}
	h->r = (struct hot_range *)(void *)buf;
	h->n = len / sizeof(struct hot_range);
	for (size_t i = 0; i < h->n; i++)
		h->pages += h->r[i].len / (size_t)sysconf(_SC_PAGESIZE);
	return 0;
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

void hot_pages_free(struct hot_pages *h)
{
	free(h->r);
	*h = (struct hot_pages){ 0 };
}
