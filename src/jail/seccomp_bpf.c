/* pycell: a seccomp-bpf program written from a table of system calls
 * (seccomp_bpf.h).  The program:
 *
 *     ld arch; jeq ARCH ? 1 : 0; ret BAD_ARCH
 *     ld nr                            (x86_64: nr >= 1<<30 and nr != -1: ret BAD_ARCH)
 *     binary search on nr over the leaves (jge at each node)
 *     leaf: ret ACTION, or the call's checks: ld word; j.. k; ret ACTION ...; ret ACTION
 *
 * Every leaf ends in a ret, so no jump leaves a leaf, and a node's jump
 * skips its left half: over 255 instructions (the reach of a conditional
 * jump), the node jumps to a `ja` that does. */
#include "config.h"

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "jail/seccomp_bpf.h"

struct prog {
	struct sock_filter *i;
	size_t n;
};

/* A range of system call numbers from lo up to the next leaf's lo: one
 * call with checks, or every call in it getting `action`. */
struct leaf {
	uint32_t lo;
	uint32_t action;
	const struct bpf_call *call;
};

static int put(struct prog *p, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (p->n >= BPF_MAXINSNS)
		return -1;
	p->i[p->n++] = (struct sock_filter){ code, jt, jf, k };
	return 0;
}

static uint32_t word_offset(unsigned arg, bool high)
{
	uint32_t off = (uint32_t)offsetof(struct seccomp_data, args) + 8 * arg;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return off + (high ? 4 : 0);
#else
	return off + (high ? 0 : 4);
#endif
}

/* The call's checks in order; each one that holds returns its action at
 * once (the ret right after its jump), none: the call's action. */
static int emit_checks(struct prog *p, const struct bpf_call *c)
{
	uint32_t loaded = UINT32_MAX;
	for (size_t i = 0; i < c->n_checks; i++) {
		const struct bpf_check *k = &c->checks[i];
		uint32_t off = word_offset(k->arg, k->high);
		int rc = 0;
		if (off != loaded)
			rc = put(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, off);
		loaded = off;
		if (rc == 0 && k->op == BPF_ARG_EQ)
			rc = put(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, k->k);
		else if (rc == 0 && k->op == BPF_ARG_NE)
			rc = put(p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, k->k);
		else if (rc == 0)
			rc = put(p, BPF_JMP | BPF_JSET | BPF_K, 0, 1, k->k);
		if (rc < 0 || put(p, BPF_RET | BPF_K, 0, 0, k->action) < 0)
			return -1;
	}
	return put(p, BPF_RET | BPF_K, 0, 0, c->action);
}

static int emit_tree(struct prog *p, const struct leaf *l, size_t n)
{
	size_t mid = n / 2, at = p->n, left;
	if (n == 1)
		return l->call ? emit_checks(p, l->call) : put(p, BPF_RET | BPF_K, 0, 0, l->action);
	/* nr >= the right half's first number: jump over the left half */
	if (put(p, BPF_JMP | BPF_JGE | BPF_K, 0, 0, l[mid].lo) < 0 || emit_tree(p, l, mid) < 0)
		return -1;
	left = p->n - at - 1;
	if (left <= 255) {
		p->i[at].jt = (uint8_t)left;
	} else {
		if (p->n >= BPF_MAXINSNS)
			return -1;
		memmove(&p->i[at + 2], &p->i[at + 1], left * sizeof(*p->i));
		p->i[at] = (struct sock_filter){ BPF_JMP | BPF_JGE | BPF_K, 0, 1, l[mid].lo };
		p->i[at + 1] = (struct sock_filter){ BPF_JMP | BPF_JA, 0, 0, (uint32_t)left };
		p->n++;
	}
	return emit_tree(p, l + mid, n - mid);
}

static void add_leaf(struct leaf *l, size_t *n, uint32_t lo, uint32_t action, const struct bpf_call *c)
{
	/* a plain range next to one with the same action is the same leaf */
	if (!c && *n > 0 && !l[*n - 1].call && l[*n - 1].action == action)
		return;
	l[(*n)++] = (struct leaf){ lo, action, c };
}

int bpf_filter_build(const struct bpf_call *calls, size_t n, uint32_t def, uint32_t bad_arch,
		     uint32_t arch, struct sock_filter *out)
{
	struct prog p = { out, 0 };
	/* at most a call and the gap before it each, and the gap after the last */
	struct leaf *leaves = xmalloc((2 * n + 1) * sizeof(*leaves));
	size_t nl = 0;
	uint32_t next = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		const struct bpf_call *c = &calls[i];
		if (i > 0 && c->nr <= calls[i - 1].nr) {
			free(leaves);
			return -1;
		}
		if (c->nr > next)
			add_leaf(leaves, &nl, next, def, NULL);
		add_leaf(leaves, &nl, c->nr, c->action, c->n_checks ? c : NULL);
		next = c->nr + 1;
	}
	if (n == 0 || next != 0) /* nr UINT32_MAX listed: nothing after it */
		add_leaf(leaves, &nl, next, def, NULL);

	rc = put(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, arch));
	if (rc == 0)
		rc = put(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, arch);
	if (rc == 0)
		rc = put(&p, BPF_RET | BPF_K, 0, 0, bad_arch);
	if (rc == 0)
		rc = put(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
#ifdef __x86_64__
	/* x32 numbers (__X32_SYSCALL_BIT) are another ABI's; -1 is no call */
	if (rc == 0 && arch == AUDIT_ARCH_X86_64) {
		rc = put(&p, BPF_JMP | BPF_JGE | BPF_K, 0, 2, 0x40000000U);
		if (rc == 0)
			rc = put(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, UINT32_MAX);
		if (rc == 0)
			rc = put(&p, BPF_RET | BPF_K, 0, 0, bad_arch);
	}
#endif
	if (rc == 0)
		rc = emit_tree(&p, leaves, nl);
	free(leaves);
	return rc < 0 ? -1 : (int)p.n;
}
