/* pycell: the zygote's memory in transparent huge pages.
 *
 * The zygote's private anonymous memory (python's heap and arenas, the
 * modules' data), where an aligned 2 MiB span of it is at least half in
 * memory, moved into transparent huge pages (MADV_COLLAPSE, Linux 6.1;
 * the system's "enabled" setting does not matter to it, "never" aside).
 * Every jail's python is a fork of this memory: a fork copies an entry of
 * the page table per 4 KiB page, and its exit clears them again, where
 * one entry maps 2 MiB; a page a jail writes is still copied alone (the
 * kernel splits that mapping in the jail only).  Sparse spans (the small
 * init's stack, a sanitizer's shadow) are left as they are: collapsed,
 * their holes would be memory.  Where the kernel refuses, nothing
 * changes; past 300 ms, the rest stays as it is.  Called once, when the
 * zygote has settled and before it forks anything.  The bytes moved;
 * *refused_errno, an errno of the kernel's refusal when nothing moved. */
#ifndef PYCELL_RUN_HUGE_PAGES_H
#define PYCELL_RUN_HUGE_PAGES_H

#include <stddef.h>

size_t huge_pages_collapse(int *refused_errno);

#endif
