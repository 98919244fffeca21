/* pycell: what a jail's init does while python runs, the same in jail.c's
 * init and in pycell-init (init_main.c): the C library's calls only, so
 * that the static program links this alone. */
#ifndef PYCELL_JAIL_INIT_WAIT_H
#define PYCELL_JAIL_INIT_WAIT_H

#include <sys/types.h>

struct jail_msg;

/* A native ready jail's init, until its cell comes: python gets it
 * straight from the supervisor, which tells init after with a program
 * message without a memfd on sync_fd.  1: the cell came; 0: python ended
 * first, or the supervisor let the jail go unused (EOF); -1 with errno, and
 * EPROTO for a message that is not that one.  SIGCHLD blocked on entry,
 * with a handler (its delivery is what interrupts the wait). */
int init_await_start(int sync_fd, pid_t python);
/* pid 1: reap every child until python ends, and its wait status; after
 * each wait that did not end with python (another child, a signal),
 * between() when not NULL.  Exits 126 when waiting fails otherwise.  (When init exits the kernel kills
 * whatever is left in the pid namespace: no grandchild outlives the run.) */
int init_reap(pid_t python, void (*between)(void));
/* The report of python's end: its wait status, and what it and every
 * child init reaped used. */
void init_exit_msg(struct jail_msg *m, int wait_status);

#endif
