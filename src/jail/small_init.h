/* pycell: a small init (jail.h, jail_spec.small_init).
 *
 * A jail's init is cloned sharing the caller's memory (CLONE_VM), on a
 * stack of its own, while the caller waits, as vfork's parent does, until
 * init executes pycell-init (init_main.c) or ends: init builds the jail,
 * forks python from the caller's address space as it is, and leaves it.
 * So the kernel copies the caller's page tables once for a jail, python's,
 * not also for an init that only waits, and tears them down once; with
 * the data stack preloaded that is 60 MB of the zygote's written memory.
 * Until its release init uses only its stack: the caller sends the jail
 * on (the zygote to the supervisor, which releases it as it reads it) and
 * then waits (jail_small_wait).  After it too init takes nothing from the
 * heap, which is the caller's (rootfs.c lists directories on the stack):
 * an init killed in a malloc or free, its run cancelled, would leave the
 * heap half changed for the caller and every jail after
 * (test_warm.py::test_a_small_init_never_calls_the_heap_it_shares_with_the_zygote).
 * Python goes on in its copy of that stack. */
#ifndef PYCELL_JAIL_SMALL_INIT_H
#define PYCELL_JAIL_SMALL_INIT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/util.h"

/* The stack small inits start on, mapped now (small_init_clone maps it
 * at its first call otherwise): at the same address in every clone made
 * after.  -1 with err. */
int small_init_prepare(struct pc_err *err);
/* fn, on that stack when it is mapped (else on ours): a fork of the
 * caller that learns what a jail's python writes (the zygote's hot-pages
 * probe) writes the stack pages a jail's python does. */
void small_init_on_stack(void (*fn)(void));
/* fn(arg) in a child cloned with flags (namespaces) and CLONE_VM, on the
 * small init's stack: its pid, its pidfd in *pidfd; -1 with err.  One at a
 * time: until jail_small_wait has returned, another fails.  Made in the
 * cgroup2 directory cgroup_fd (-1: none) by clone3 where it can (*joined
 * true if there is one); by clone where clone3 is refused, for
 * small_init_cgroup to move it there. */
long small_init_clone(int (*fn)(void *), void *arg, int flags, int cgroup_fd, int *pidfd, bool *joined,
		      struct pc_err *err);
/* In the child, first (small_init_clone's fn): a sanitizer build's
 * runtime told of the stack it runs on.  Nothing otherwise. */
void small_init_started(void);
/* What CLONE_INTO_CGROUP does, which clone() lacks: pid into the cgroup2
 * directory dir_fd, with our ids (init's own may not move itself). */
int small_init_cgroup(int dir_fd, pid_t pid, struct pc_err *err);
/* In init, once python is forked: execute pycell-init from init_fd with
 * the sync socket and python's ready pipe open across the exec, and the
 * n signals init forwards and SIGCHLD blocked, so that none sent before it
 * has its handlers is lost.  Returns only when that failed, with err. */
void small_init_exec(int init_fd, int sync_fd, pid_t python, int ready, bool park, const int *forwarded, size_t n,
		     struct pc_err *err);
/* In python, first: close what is init's, and run nothing until
 * pycell-init says it is no longer dumpable (init_main.c says why); an
 * init that failed to become it (EOF) ends python too. */
void small_init_await(const int ready[2], int init_fd);

#endif
