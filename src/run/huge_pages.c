/* pycell: the zygote's memory in huge pages (see huge_pages.h). */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/util.h"
#include "run/hot_pages.h"
#include "run/huge_pages.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#define HUGE_SPAN (2ul << 20)
/* the zygote's start waits for it, this long at most (each span a copy
 * of 2 MiB and, on a fragmented machine, the compaction that finds it a
 * huge page: some 4 ms a span here, 68 ms for the data stack's 32 MiB;
 * a sanitizer's heap is hundreds of MiB) */
#define HUGE_COLLAPSE_MS 300

size_t huge_pages_collapse(int *refused_errno)
{
	uint64_t t0 = now_ms();
	struct hot_range *maps = NULL;
	size_t n_maps = 0, moved = 0, page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *in = xmalloc(HUGE_SPAN / page);
	int refused = 0;   /* the errno of a refusal */
	bool late = false;

	if (hot_pages_maps(&maps, &n_maps, true) < 0)
		n_maps = 0;
	for (size_t m = 0; m < n_maps && !late; m++) {
		uintptr_t lo = maps[m].start, hi = maps[m].start + maps[m].len;
		for (uintptr_t a = (lo + HUGE_SPAN - 1) & ~(HUGE_SPAN - 1); a + HUGE_SPAN <= hi; a += HUGE_SPAN) {
			size_t present = 0;
			if (now_ms() - t0 >= HUGE_COLLAPSE_MS) {
				late = true;
				break;
			}
			if (mincore((void *)a, HUGE_SPAN, in) < 0)
				continue;
			for (size_t i = 0; i < HUGE_SPAN / page; i++)
				present += in[i] & 1;
			if (present * 2 < HUGE_SPAN / page)
				continue;
			if (fault_at("huge_pages"))
				errno = EINVAL;
			else if (madvise((void *)a, HUGE_SPAN, MADV_COLLAPSE) == 0) {
				moved += HUGE_SPAN;
				continue;
			}
			/* no such advice here, huge pages off, or not for this
			 * mapping (a sanitizer's regions): the next may differ */
			if (errno == EINVAL || errno == EPERM || errno == ENOSYS) {
				refused = errno;
				break;
			}
		}
	}
	*refused_errno = moved ? 0 : refused;
	free(maps);
	free(in);
	return moved;
}
