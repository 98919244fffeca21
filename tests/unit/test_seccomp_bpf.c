/* pycell: unit tests for the seccomp-bpf writer (src/jail/seccomp_bpf.c).
 *
 * The programs it writes run here in a classic-BPF interpreter of the
 * test's own, over tables made at random (many calls or few, numbers dense
 * or sparse, checks on every argument word) and against the table itself
 * read the plain way: the first check that holds, else the call's action,
 * else the default.  The kernel's view of the filters pycell builds from
 * policies is test_seccomp.c's (installed in children, calls made). */
#include "config.h"

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "jail/seccomp_bpf.h"
#include "unit.h"

#define ARCH AUDIT_ARCH_X86_64
#define BAD_ARCH SECCOMP_RET_KILL_PROCESS
#define DEF (SECCOMP_RET_ERRNO | 38)

static const uint32_t actions[] = { SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | 1, SECCOMP_RET_ERRNO | 13,
				    SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_TRAP, DEF };

static struct sock_filter prog[BPF_MAXINSNS];

/* Run a program the writer may write (the opcodes below, forward jumps
 * only); any other opcode, a jump out of it or a fall off its end fails
 * the test. */
static uint32_t run(const struct sock_filter *p, int n, const struct seccomp_data *d)
{
	uint32_t a = 0;
	int pc = 0;
	while (pc < n) {
		const struct sock_filter *i = &p[pc++];
		switch (i->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			ck_assert_uint_le(i->k + 4, sizeof(*d));
			ck_assert_uint_eq(i->k % 4, 0);
			memcpy(&a, (const char *)d + i->k, 4);
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += a == i->k ? i->jt : i->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += a >= i->k ? i->jt : i->jf;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			pc += (a & i->k) ? i->jt : i->jf;
			break;
		case BPF_JMP | BPF_JA:
			pc += (int)i->k;
			break;
		case BPF_RET | BPF_K:
			return i->k;
		default:
			ck_abort_msg("opcode %#x at %d", i->code, pc - 1);
		}
	}
	ck_abort_msg("ran off the end of the program (%d instructions)", n);
	return 0;
}

static uint32_t word(const struct seccomp_data *d, const struct bpf_check *k)
{
	uint64_t v = d->args[k->arg];
	return (uint32_t)(k->high ? v >> 32 : v);
}

/* What the table says, read the plain way. */
static uint32_t expect(const struct bpf_call *t, size_t n, const struct seccomp_data *d)
{
	if (d->arch != ARCH)
		return BAD_ARCH;
	if ((uint32_t)d->nr >= 0x40000000 && d->nr != -1)
		return BAD_ARCH;
	for (size_t i = 0; i < n; i++) {
		if ((uint32_t)d->nr != t[i].nr)
			continue;
		for (size_t j = 0; j < t[i].n_checks; j++) {
			const struct bpf_check *k = &t[i].checks[j];
			uint32_t w = word(d, k);
			if ((k->op == BPF_ARG_EQ && w == k->k) || (k->op == BPF_ARG_NE && w != k->k) ||
			    (k->op == BPF_ARG_SET && (w & k->k)))
				return k->action;
		}
		return t[i].action;
	}
	return DEF;
}

static uint64_t rnd64(void)
{
	return (uint64_t)random() << 33 ^ (uint64_t)random() << 2 ^ (uint64_t)random();
}

/* A table of n calls: numbers from `start` on, gaps of up to `gap`. */
static void make_table(struct bpf_call *t, size_t n, uint32_t start, uint32_t gap)
{
	uint32_t nr = start;
	memset(t, 0, n * sizeof(*t));
	for (size_t i = 0; i < n; i++) {
		t[i].nr = nr;
		t[i].action = actions[random() % ARRAY_SIZE(actions)];
		if (random() % 5 == 0) {
			t[i].n_checks = 1 + (size_t)random() % 6;
			for (size_t j = 0; j < t[i].n_checks; j++)
				t[i].checks[j] = (struct bpf_check){
					(uint8_t)(random() % 6), (uint8_t)(random() % 2), (uint8_t)(random() % 3),
					random() % 3 ? (uint32_t)(random() % 64) : (uint32_t)random(),
					actions[random() % ARRAY_SIZE(actions)] };
		}
		nr += 1 + (gap ? (uint32_t)random() % gap : 0);
	}
}

/* Arguments that make each of a call's checks hold, or not. */
static void aim(struct seccomp_data *d, const struct bpf_call *c)
{
	for (int a = 0; a < 6; a++)
		d->args[a] = random() % 4 == 0 ? 0 : rnd64();
	for (size_t j = 0; j < c->n_checks; j++) {
		const struct bpf_check *k = &c->checks[j];
		uint64_t v = random() % 3 ? k->k : k->k ^ (1U << (random() % 32));
		if (random() % 2)
			continue;
		if (k->high)
			d->args[k->arg] = (d->args[k->arg] & 0xffffffffULL) | v << 32;
		else
			d->args[k->arg] = (d->args[k->arg] & ~0xffffffffULL) | v;
	}
}

static void compare(const struct bpf_call *t, size_t n, int len, const struct seccomp_data *d)
{
	uint32_t got = run(prog, len, d), want = expect(t, n, d);
	ck_assert_msg(got == want, "nr %d (%#x) args %#llx %#llx: %#x from the program, %#x from the table",
		      d->nr, (unsigned)d->nr, (unsigned long long)d->args[0],
		      (unsigned long long)d->args[1], got, want);
}

START_TEST(test_random_tables)
{
	static struct bpf_call t[600];
	/* (calls, first number, largest gap): dense, sparse, near the top */
	static const uint32_t shapes[][3] = {
		{ 1, 0, 0 }, { 1, 5, 0 }, { 2, 0, 3 }, { 40, 0, 2 }, { 300, 0, 1 }, { 600, 0, 0 },
		{ 150, 3, 9 }, { 500, 0, 4 }, { 60, 1000, 100000 }, { 20, 0x3ffffff0, 1 },
	};
	bool long_jump = false;
	srandom(4242);
	for (int round = 0; round < 60; round++) {
		const uint32_t *s = shapes[round % ARRAY_SIZE(shapes)];
		size_t n = s[0] > 1 ? (size_t)s[0] / 2 + (size_t)random() % (s[0] / 2 + 1) : s[0];
		int len;
		make_table(t, n, s[1], s[2]);
		len = bpf_filter_build(t, n, DEF, BAD_ARCH, ARCH, prog);
		ck_assert_int_gt(len, 0);
		for (int i = 0; i < len; i++)
			long_jump |= prog[i].code == (BPF_JMP | BPF_JA);
		for (size_t i = 0; i < n; i++) {
			struct seccomp_data d = { .arch = ARCH };
			for (int tries = 0; tries < 8; tries++) {
				d.nr = (int)t[i].nr;
				aim(&d, &t[i]);
				compare(t, n, len, &d);
				/* the numbers on either side */
				d.nr = (int)(t[i].nr + 1);
				compare(t, n, len, &d);
				d.nr = (int)(t[i].nr - 1);
				compare(t, n, len, &d);
			}
		}
		for (int i = 0; i < 2000; i++) {
			struct seccomp_data d = { .arch = ARCH };
			d.nr = (int)(random() % 4 ? random() % 1200 : (uint32_t)random() << 1);
			aim(&d, &t[0]);
			compare(t, n, len, &d);
		}
	}
	/* a table wide enough that a node's left half is out of a
	 * conditional jump's reach was among them */
	ck_assert(long_jump);
}
END_TEST

START_TEST(test_architecture_and_x32)
{
	struct bpf_call t[2] = { { .nr = 0, .action = SECCOMP_RET_ALLOW },
				 { .nr = 39, .action = SECCOMP_RET_ERRNO | 1 } };
	struct { uint32_t arch; uint32_t nr; uint32_t want; } cases[] = {
		{ ARCH, 0, SECCOMP_RET_ALLOW },
		{ ARCH, 39, SECCOMP_RET_ERRNO | 1 },
		{ ARCH, 40, DEF },
		{ AUDIT_ARCH_I386, 0, BAD_ARCH },
		{ AUDIT_ARCH_I386, 39, BAD_ARCH },
		{ ARCH, 0x40000000, BAD_ARCH },
		{ ARCH, 0x40000000 | 39, BAD_ARCH },
		{ ARCH, 0x7fffffff, BAD_ARCH },
		{ ARCH, 0xfffffffe, BAD_ARCH },
		{ ARCH, 0xffffffff, DEF },   /* -1: no call; the default */
		{ ARCH, 0x3fffffff, DEF },
	};
	int len = bpf_filter_build(t, 2, DEF, BAD_ARCH, ARCH, prog);
	ck_assert_int_gt(len, 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct seccomp_data d = { .nr = (int)cases[i].nr, .arch = cases[i].arch };
		ck_assert_uint_eq(run(prog, len, &d), cases[i].want);
	}
}
END_TEST

START_TEST(test_bad_tables)
{
	static struct bpf_call t[2048];
	struct bpf_call twice[2] = { { .nr = 7 }, { .nr = 7 } };
	struct bpf_call unsorted[2] = { { .nr = 8 }, { .nr = 7 } };
	ck_assert_int_eq(bpf_filter_build(twice, 2, DEF, BAD_ARCH, ARCH, prog), -1);
	ck_assert_int_eq(bpf_filter_build(unsorted, 2, DEF, BAD_ARCH, ARCH, prog), -1);
	/* every other number a different action: past BPF_MAXINSNS */
	memset(t, 0, sizeof(t));
	for (size_t i = 0; i < ARRAY_SIZE(t); i++)
		t[i] = (struct bpf_call){ .nr = (uint32_t)(2 * i),
					  .action = i % 2 ? SECCOMP_RET_ALLOW : SECCOMP_RET_ERRNO | 1 };
	ck_assert_int_eq(bpf_filter_build(t, ARRAY_SIZE(t), DEF, BAD_ARCH, ARCH, prog), -1);
	/* no calls: the default for every number */
	{
		int len = bpf_filter_build(t, 0, DEF, BAD_ARCH, ARCH, prog);
		struct seccomp_data d = { .nr = 5, .arch = ARCH };
		ck_assert_int_gt(len, 0);
		ck_assert_uint_eq(run(prog, len, &d), DEF);
	}
}
END_TEST

Suite *seccomp_bpf_suite(void)
{
	Suite *s = suite_create("seccomp_bpf");
	TCase *tc = tcase_create("writer");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_random_tables);
	tcase_add_test(tc, test_architecture_and_x32);
	tcase_add_test(tc, test_bad_tables);
	suite_add_tcase(s, tc);
	return s;
}
