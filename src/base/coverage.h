/* pycell: line coverage of the jail side (./configure --enable-coverage).
 *
 * gcov writes its counters at exit(), but a jail's processes end in
 * _exit() inside a root where the build tree does not exist.  In a
 * coverage build the jail child keeps a path fd of the host's root from
 * before its pivot_root, and coverage_flush() writes the counters through
 * it right before _exit(): an fchdir there, and GCOV_PREFIX=. so that
 * gcov's paths are relative to it.  Python never has that fd.  In other
 * builds all of this is nothing at all. */
#ifndef PYCELL_COVERAGE_H
#define PYCELL_COVERAGE_H

#ifdef PYCELL_COVERAGE
/* Before the jail's root is built: keep the host's root (O_PATH). */
void coverage_keep_host(void);
/* That fd, for place_fds to keep, or -1. */
int coverage_fd(void);
/* Write this process's counters (the jail side, before _exit). */
void coverage_flush(void);
#else
static inline void coverage_keep_host(void) {}
static inline int coverage_fd(void) { return -1; }
static inline void coverage_flush(void) {}
#endif

#endif
