/* pycell: the pages of the zygote that a ready jail's python writes
 * before its cell (and at the first use of a preloaded module its cell
 * names), copied in a few calls instead of a fault each.
 *
 * Every first write of a clone to a page it shares with the zygote is a
 * copy-on-write fault.  The zygote learns once which pages those are (a
 * probe child runs what a ready jail runs, then reads which of its pages
 * became its own in /proc/self/pagemap; then again after each first use,
 * a phase each); each ready jail's python then copies them with
 * madvise(MADV_POPULATE_WRITE), which the kernel does without an
 * exception per page.  A page missing from a clone, or a
 * kernel without the advice (before 5.14), costs nothing but the fault
 * it would have taken anyway. */
#ifndef PYCELL_RUN_HOT_PAGES_H
#define PYCELL_RUN_HOT_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* at most this many pages of a phase are copied ahead (16 MiB) */
#define HOT_PAGES_MAX 4096u

struct hot_range {
	uintptr_t start;
	size_t len;
};

struct hot_pages {
	struct hot_range *r;
	size_t n;
	size_t pages;
};

/* The private writable mappings of this process (/proc/self/maps), the
 * only ones a clone copies on write, but those over 1 GiB (a
 * reservation, not a heap: a sanitizer's shadow is terabytes); with
 * anonymous, only those of no file (python's heap and arenas, a
 * module's data).  *out is the caller's to free.  -1 when unreadable. */
int hot_pages_maps(struct hot_range **out, size_t *n, bool anonymous);

/* A probe's phases, at most: what a ready jail does before its cell,
 * then the first use of each preloaded module that has one */
#define HOT_PHASES_MAX 4

/* Forks a child that runs probe(), whose phases end at each call of
 * hot_pages_mark() and at its return; h[i] (of n) gets the pages of the
 * parent's private writable mappings that phase i wrote first.  A probe
 * silent for 2 s is killed, and keeps the phases it ended.  0, or -1 when
 * no phase ended (every h[i] empty: nothing will be copied ahead). */
int hot_pages_learn(struct hot_pages *h, size_t n, void (*probe)(void));

/* In the probe: the end of a phase. */
void hot_pages_mark(void);

/* In a clone: copies h's pages now.  The pages copied. */
size_t hot_pages_populate(const struct hot_pages *h);

/* Frees h[0..n-1]. */
void hot_pages_free(struct hot_pages *h, size_t n);

#endif
