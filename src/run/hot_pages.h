/* pycell: the pages of the zygote that a ready jail's python writes
 * before its cell, copied in a few calls instead of a fault each.
 *
 * Every first write of a clone to a page it shares with the zygote is a
 * copy-on-write fault.  The zygote learns once which pages those are (a
 * probe child runs what a ready jail runs, then reads which of its pages
 * became its own in /proc/self/pagemap); each ready jail's python then
 * copies them with madvise(MADV_POPULATE_WRITE), which the kernel does
 * without an exception per page.  A page missing from a clone, or a
 * kernel without the advice (before 5.14), costs nothing but the fault
 * it would have taken anyway. */
#ifndef PYCELL_RUN_HOT_PAGES_H
#define PYCELL_RUN_HOT_PAGES_H

#include <stddef.h>
#include <stdint.h>

/* at most this many pages are copied ahead (8 MiB) */
#define HOT_PAGES_MAX 2048u

struct hot_range {
	uintptr_t start;
	size_t len;
};

struct hot_pages {
	struct hot_range *r;
	size_t n;
	size_t pages;
};

/* Forks a child that runs probe() and then reports the pages of the
 * parent's private writable mappings that it wrote; fills h.  0, or -1
 * (h empty: nothing will be copied ahead). */
int hot_pages_learn(struct hot_pages *h, void (*probe)(void));

/* In a clone: copies h's pages now.  The pages copied. */
size_t hot_pages_populate(const struct hot_pages *h);

void hot_pages_free(struct hot_pages *h);

#endif
