/* pycell: the seccomp-bpf allowlist, compiled once per policy. */
#ifndef PYCELL_SECCOMP_H
#define PYCELL_SECCOMP_H

#include <stdbool.h>

#include "base/util.h"
#include "config/policy.h"

struct seccomp_filter;

/* Build the BPF program for this policy (groups, extra rules, network). */
int seccomp_filter_compile(const struct policy *p, struct seccomp_filter **out, struct pc_err *err);
/* Install it on the calling thread: sets no_new_privs, then the filter.
 * Called in the jail child last before exec; does not allocate. */
int seccomp_filter_install(const struct seccomp_filter *f, struct pc_err *err);
/* In the jailed program (pid 2) after fork, before execve: the second
 * filter that only the program gets (no forking when the policy lacks the
 * "process" group); a no-op when there is none.  Does not allocate. */
int seccomp_filter_install_program(const struct seccomp_filter *f, struct pc_err *err);
/* Instructions in the jail's filter (for logs and tests). */
size_t seccomp_filter_length(const struct seccomp_filter *f);
void seccomp_filter_free(struct seccomp_filter *f);
/* Same programs, instruction for instruction (tests). */
bool seccomp_filter_equal(const struct seccomp_filter *a, const struct seccomp_filter *b);

#endif
