/* pycell: a seccomp-bpf program written from a table of system calls.
 *
 * seccomp.c decides what each system call gets (the groups, the policy's
 * rules, the argument filters); this file turns that table into classic
 * BPF: the architecture checked, then a binary search over ranges of
 * system call numbers (a range of calls with the same action is one leaf),
 * and at a leaf either the action or the call's argument checks.  libseccomp
 * compiled the same table into 1149 instructions, mostly argument checks
 * spelt out as disjoint bit patterns; the kernel's cost of installing a
 * filter (conversion, JIT, its action cache) grows with its length. */
#ifndef PYCELL_SECCOMP_BPF_H
#define PYCELL_SECCOMP_BPF_H

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

/* One test on an argument: half of it (the kernel's seccomp_data holds
 * each argument as two 32-bit words), compared with k. */
enum bpf_op {
	BPF_ARG_EQ,   /* word == k */
	BPF_ARG_NE,   /* word != k */
	BPF_ARG_SET,  /* word & k != 0 */
};

struct bpf_check {
	uint8_t arg;      /* 0-5 */
	uint8_t high;     /* the upper 32 bits, else the lower */
	uint8_t op;       /* enum bpf_op */
	uint32_t k;
	uint32_t action;  /* when the test holds */
};

#define BPF_MAX_CHECKS 40

/* What one system call gets: its checks in order, the first that holds
 * decides; none holding, `action`.  No checks: `action`, whatever the
 * arguments. */
struct bpf_call {
	uint32_t nr;
	uint32_t action;
	size_t n_checks;
	struct bpf_check checks[BPF_MAX_CHECKS];
};

/* calls[] sorted by nr, each nr once.  Another architecture's calls get
 * bad_arch, and so do x32 numbers on x86_64 (bit 30, but for -1); every
 * call not listed gets def.  Returns the number of instructions written
 * to out (room for BPF_MAXINSNS), or -1 when the program would be longer. */
int bpf_filter_build(const struct bpf_call *calls, size_t n, uint32_t def, uint32_t bad_arch,
		     uint32_t arch, struct sock_filter *out);

#endif
