/* pycell: the cgroup v2 device filter, a hand-assembled BPF program loaded
 * and attached with libbpf (no clang or BPF object file needed). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/cgroup_bpf.h"

#ifdef HAVE_LIBBPF
#include <bpf/bpf.h>
#include <linux/bpf.h>

#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })
#define LDX_W(dst, src, off) INSN(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0)
#define AND_IMM(dst, imm) INSN(BPF_ALU64 | BPF_AND | BPF_K, dst, 0, 0, imm)
#define MOV_IMM(dst, imm) INSN(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
#define JNE_IMM(dst, imm, off) INSN(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm)
#define JEQ_IMM(dst, imm, off) INSN(BPF_JMP | BPF_JEQ | BPF_K, dst, 0, off, imm)
#define JLT_IMM(dst, imm, off) INSN(BPF_JMP | BPF_JLT | BPF_K, dst, 0, off, imm)
#define JGT_IMM(dst, imm, off) INSN(BPF_JMP | BPF_JGT | BPF_K, dst, 0, off, imm)
#define JA(off) INSN(BPF_JMP | BPF_JA, 0, 0, off, 0)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define MOV32_REG(dst, src) INSN(BPF_ALU | BPF_MOV | BPF_X, dst, src, 0, 0)
#define AND32_IMM(dst, imm) INSN(BPF_ALU | BPF_AND | BPF_K, dst, 0, 0, imm)
#define JNE32_IMM(dst, imm, off) INSN(BPF_JMP32 | BPF_JNE | BPF_K, dst, 0, off, imm)
#define MOV_REG(dst, src) INSN(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0)
#define ADD_IMM(dst, imm) INSN(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm)
#define ST_W(dst, off, imm) INSN(BPF_ST | BPF_MEM | BPF_W, dst, 0, off, imm)
#define ATOMIC_ADD_DW(dst, src, off) INSN(BPF_STX | BPF_ATOMIC | BPF_DW, dst, src, off, BPF_ADD)
#define CALL(fn) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, fn)

/* r1 = struct bpf_cgroup_dev_ctx *.  Any access (read, write, mknod) to
 * these character devices is allowed, nothing else: the five memory
 * devices (1:3 null, 1:5 zero, 1:7 full, 1:8 random, 1:9 urandom), the
 * pty multiplexer (5:2, the ptmx of the jail's own devpts) and the Unix98
 * pty slaves (majors 136-143).  The jail cannot mknod (user namespace):
 * opening is what its bind-mounted nodes and its devpts need. */
static const struct bpf_insn device_prog[] = {
	/* 0 */ LDX_W(BPF_REG_2, BPF_REG_1, offsetof(struct bpf_cgroup_dev_ctx, access_type)),
	/* 1 */ AND_IMM(BPF_REG_2, 0xffff),
	/* 2 */ LDX_W(BPF_REG_3, BPF_REG_1, offsetof(struct bpf_cgroup_dev_ctx, major)),
	/* 3 */ LDX_W(BPF_REG_4, BPF_REG_1, offsetof(struct bpf_cgroup_dev_ctx, minor)),
	/* 4 */ JNE_IMM(BPF_REG_2, BPF_DEVCG_DEV_CHAR, 12), /* -> 17 deny */
	/* 5 */ JEQ_IMM(BPF_REG_3, 1, 4),                   /* -> 10 memory devices */
	/* 6 */ JEQ_IMM(BPF_REG_3, 5, 9),                   /* -> 16 ptmx */
	/* 7 */ JLT_IMM(BPF_REG_3, 136, 9),                 /* -> 17 deny */
	/* 8 */ JGT_IMM(BPF_REG_3, 143, 8),                 /* -> 17 deny */
	/* 9 */ JA(9),                                      /* -> 19 allow: a pty slave */
	/* 10 */ JEQ_IMM(BPF_REG_4, 3, 8),                  /* -> 19 allow */
	/* 11 */ JEQ_IMM(BPF_REG_4, 5, 7),
	/* 12 */ JEQ_IMM(BPF_REG_4, 7, 6),
	/* 13 */ JEQ_IMM(BPF_REG_4, 8, 5),
	/* 14 */ JEQ_IMM(BPF_REG_4, 9, 4),
	/* 15 */ JA(1),                                     /* -> 17 deny */
	/* 16 */ JEQ_IMM(BPF_REG_4, 2, 2),                  /* -> 19 allow */
	/* 17 */ MOV_IMM(BPF_REG_0, 0),
	/* 18 */ EXIT(),
	/* 19 */ MOV_IMM(BPF_REG_0, 1),
	/* 20 */ EXIT(),
};

/* Loaded by the bpf(2) call itself, not libbpf's bpf_prog_load: every
 * start of pycell loads it (cgroup_env_probe), and libbpf first loads two
 * programs of its own to learn what the kernel takes (0.3 ms).  Named
 * programs (4.15) predate everything else pycell needs. */
int cgroup_bpf_device_load(struct pc_err *err)
{
	static const char name[] = "pycell_devices";
	char log[4096] = "";
	union bpf_attr a;
	int fd, e;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	a.insns = (uint64_t)(uintptr_t)device_prog;
	a.insn_cnt = ARRAY_SIZE(device_prog);
	a.license = (uint64_t)(uintptr_t)"GPL";
	memcpy(a.prog_name, name, sizeof(name));
	do
		fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	while (fd < 0 && errno == EAGAIN);
	if (fd < 0) {
		/* again, for the verifier's words (a log wants a level) */
		e = errno;
		a.log_buf = (uint64_t)(uintptr_t)log;
		a.log_size = sizeof(log);
		a.log_level = 1;
		if ((fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a))) < 0) {
			errno = e;
			log[sizeof(log) - 1] = '\0';
			return pc_syserr(err, "cgroup-bpf", "bpf(BPF_PROG_LOAD) of the device filter%s%s",
					 log[0] ? ": " : "", log);
		}
	}
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		pc_syserr(err, "cgroup-bpf", "close-on-exec for the device filter");
		close(fd);
		return -1;
	}
	return fd;
}

int cgroup_bpf_device_attach(int prog_fd, int cgroup_fd, struct pc_err *err)
{
	/* flags 0: the only program at this level, and nothing below may add one */
	int rc = bpf_prog_attach(prog_fd, cgroup_fd, BPF_CGROUP_DEVICE, 0);
	if (rc < 0) {
		errno = -rc;
		return pc_syserr(err, "cgroup-bpf", "bpf(BPF_PROG_ATTACH, BPF_CGROUP_DEVICE)");
	}
	return 0;
}

/* ------------------------------------------------------------ egress */

static const enum bpf_attach_type egress_types[EGRESS_NHOOKS] = {
	BPF_CGROUP_INET4_CONNECT, BPF_CGROUP_UDP4_SENDMSG, BPF_CGROUP_INET6_CONNECT, BPF_CGROUP_UDP6_SENDMSG,
	BPF_CGROUP_INET_SOCK_CREATE,
};
static const char *const egress_names[EGRESS_NHOOKS] = {
	"pycell_conn4", "pycell_send4", "pycell_conn6", "pycell_send6", "pycell_sock",
};

/* r1 = struct bpf_sock *, an inet socket being made: TCP on a stream
 * socket and UDP on a datagram one, nothing else. */
static const struct bpf_insn sock_prog[] = {
	/* 0 */ LDX_W(BPF_REG_2, BPF_REG_1, offsetof(struct bpf_sock, type)),
	/* 1 */ LDX_W(BPF_REG_3, BPF_REG_1, offsetof(struct bpf_sock, protocol)),
	/* 2 */ JNE_IMM(BPF_REG_2, SOCK_STREAM, 2),   /* -> 5 */
	/* 3 */ JEQ_IMM(BPF_REG_3, IPPROTO_TCP, 5),   /* -> 9 allow */
	/* 4 */ JA(2),                                /* -> 7 deny */
	/* 5 */ JNE_IMM(BPF_REG_2, SOCK_DGRAM, 1),    /* -> 7 deny */
	/* 6 */ JEQ_IMM(BPF_REG_3, IPPROTO_UDP, 2),   /* -> 9 allow */
	/* 7 */ MOV_IMM(BPF_REG_0, 0),
	/* 8 */ EXIT(),
	/* 9 */ MOV_IMM(BPF_REG_0, 1),
	/* 10 */ EXIT(),
};

int cgroup_bpf_counter_new(struct pc_err *err)
{
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "pycell_refused", sizeof(uint32_t), sizeof(uint64_t), 1, NULL);
	if (fd < 0) {
		errno = -fd;
		return pc_syserr(err, "cgroup-bpf", "bpf(BPF_MAP_CREATE) of the refused-destination counter");
	}
	return fd;
}

uint64_t cgroup_bpf_counter_read(int map_fd)
{
	uint32_t key = 0;
	uint64_t v = 0;
	if (map_fd < 0 || bpf_map_lookup_elem(map_fd, &key, &v) < 0)
		return 0;
	return v;
}

struct prog {
	struct bpf_insn *insn;
	size_t n, cap;
	/* jumps to the end's deny and allow, to be given their offsets */
	size_t *to_deny, n_deny, *to_allow, n_allow;
};

static size_t emit(struct prog *p, struct bpf_insn i)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		p->insn = xrealloc(p->insn, p->cap * sizeof(*p->insn));
	}
	p->insn[p->n] = i;
	return p->n++;
}

static void jump_to(struct prog *p, size_t **list, size_t *n, struct bpf_insn i)
{
	*list = xrealloc(*list, (*n + 1) * sizeof(**list));
	(*list)[(*n)++] = emit(p, i);
}

static void patch(struct prog *p, const size_t *list, size_t n, size_t target)
{
	for (size_t i = 0; i < n; i++)
		p->insn[list[i]].off = (int16_t)(target - list[i] - 1);
}

/* r1 = struct bpf_sock_addr *.  r2: the destination's address (network
 * order, as it is in memory), r3: its port (network order), r4: the
 * socket's type.  Each rule: r5 = r2 & mask; not addr, not port, not a
 * datagram when it must be: on to the next; else allow (or deny). */
static void emit_rules4(struct prog *p, const struct egress_rule *rules, size_t n)
{
	emit(p, LDX_W(BPF_REG_2, BPF_REG_1, offsetof(struct bpf_sock_addr, user_ip4)));
	emit(p, LDX_W(BPF_REG_3, BPF_REG_1, offsetof(struct bpf_sock_addr, user_port)));
	emit(p, LDX_W(BPF_REG_4, BPF_REG_1, offsetof(struct bpf_sock_addr, type)));
	for (size_t i = 0; i < n; i++) {
		const struct egress_rule *r = &rules[i];
		size_t skip[3], n_skip = 0;
		emit(p, MOV32_REG(BPF_REG_5, BPF_REG_2));
		emit(p, AND32_IMM(BPF_REG_5, (int32_t)r->mask));
		skip[n_skip++] = emit(p, JNE32_IMM(BPF_REG_5, (int32_t)r->addr, 0));
		if (r->port)
			skip[n_skip++] = emit(p, JNE32_IMM(BPF_REG_3, (int32_t)htons(r->port), 0));
		if (r->udp_only)
			skip[n_skip++] = emit(p, JNE32_IMM(BPF_REG_4, SOCK_DGRAM, 0));
		if (r->deny)
			jump_to(p, &p->to_deny, &p->n_deny, JA(0));
		else
			jump_to(p, &p->to_allow, &p->n_allow, JA(0));
		patch(p, skip, n_skip, p->n);
	}
}

/* ::1 only: the four words of the address, in memory order. */
static void emit_rules6(struct prog *p)
{
	for (int w = 0; w < 4; w++) {
		uint32_t want = w == 3 ? htonl(1) : 0;
		emit(p, LDX_W(BPF_REG_2, BPF_REG_1, offsetof(struct bpf_sock_addr, user_ip6) + 4 * w));
		jump_to(p, &p->to_deny, &p->n_deny, JNE32_IMM(BPF_REG_2, (int32_t)want, 0));
	}
	jump_to(p, &p->to_allow, &p->n_allow, JA(0));
}

int cgroup_bpf_egress_load(enum egress_hook hook, const struct egress_rule *rules, size_t n, int map_fd,
			   struct pc_err *err)
{
	struct prog p = { 0 };
	char log[4096] = "";
	int fd;

	if (n > EGRESS_RULES_MAX)
		return pc_fail(err, E2BIG, "cgroup-bpf", "%zu egress rules: at most %d", n, EGRESS_RULES_MAX);
	if (hook == EGRESS_SOCK_CREATE) {
		LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_buf = log, .log_size = sizeof(log), .log_level = 0,
			    .expected_attach_type = egress_types[hook]);
		fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK, egress_names[hook], "GPL", sock_prog,
				   ARRAY_SIZE(sock_prog), &opts);
		goto loaded;
	}
	if (hook == EGRESS_CONNECT4 || hook == EGRESS_SENDMSG4)
		emit_rules4(&p, rules, n);
	else
		emit_rules6(&p);
	/* deny: count it (map[0] += 1), answer EPERM.  A datagram socket's
	 * connect() sends nothing, and glibc's getaddrinfo makes one to each
	 * address it sorts: refused, not counted */
	patch(&p, p.to_deny, p.n_deny, p.n);
	if (hook == EGRESS_CONNECT4 || hook == EGRESS_CONNECT6) {
		emit(&p, LDX_W(BPF_REG_2, BPF_REG_1, offsetof(struct bpf_sock_addr, type)));
		emit(&p, JEQ_IMM(BPF_REG_2, SOCK_DGRAM, 9));    /* -> r0 = 0, past the count's 9 */
	}
	{
		struct bpf_insn ld[2] = {
			INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map_fd),
			INSN(0, 0, 0, 0, 0),
		};
		emit(&p, ld[0]);
		emit(&p, ld[1]);
	}
	emit(&p, MOV_REG(BPF_REG_2, BPF_REG_10));
	emit(&p, ADD_IMM(BPF_REG_2, -4));
	emit(&p, ST_W(BPF_REG_10, -4, 0));
	emit(&p, CALL(BPF_FUNC_map_lookup_elem));
	emit(&p, JEQ_IMM(BPF_REG_0, 0, 2));
	emit(&p, MOV_IMM(BPF_REG_1, 1));
	emit(&p, ATOMIC_ADD_DW(BPF_REG_0, BPF_REG_1, 0));
	emit(&p, MOV_IMM(BPF_REG_0, 0));
	emit(&p, EXIT());
	patch(&p, p.to_allow, p.n_allow, p.n);
	emit(&p, MOV_IMM(BPF_REG_0, 1));
	emit(&p, EXIT());
	{
		LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_buf = log, .log_size = sizeof(log), .log_level = 0,
			    .expected_attach_type = egress_types[hook]);
		fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, egress_names[hook], "GPL", p.insn, p.n, &opts);
	}
	free(p.insn);
	free(p.to_deny);
	free(p.to_allow);
loaded:
	if (fd < 0) {
		errno = -fd;
		return pc_syserr(err, "cgroup-bpf", "bpf(BPF_PROG_LOAD) of the egress filter %s%s%s", egress_names[hook],
				 log[0] ? ": " : "", log);
	}
	return fd;
}

int cgroup_bpf_egress_attach(int prog_fd, int cgroup_fd, enum egress_hook hook, struct pc_err *err)
{
	int rc = bpf_prog_attach(prog_fd, cgroup_fd, egress_types[hook], 0);
	if (rc < 0) {
		errno = -rc;
		return pc_syserr(err, "cgroup-bpf", "bpf(BPF_PROG_ATTACH) of an egress filter to the run's cgroup");
	}
	return 0;
}

#else

int cgroup_bpf_counter_new(struct pc_err *err)
{
	return pc_fail(err, ENOTSUP, "cgroup-bpf", "pycell was built --without-libbpf: no egress filter");
}

uint64_t cgroup_bpf_counter_read(int map_fd)
{
	return 0;
}

int cgroup_bpf_egress_load(enum egress_hook hook, const struct egress_rule *rules, size_t n, int map_fd,
			   struct pc_err *err)
{
	return pc_fail(err, ENOTSUP, "cgroup-bpf", "pycell was built --without-libbpf: no egress filter");
}

int cgroup_bpf_egress_attach(int prog_fd, int cgroup_fd, enum egress_hook hook, struct pc_err *err)
{
	return pc_fail(err, ENOTSUP, "cgroup-bpf", "pycell was built --without-libbpf: no egress filter");
}

int cgroup_bpf_device_load(struct pc_err *err)
{
	return pc_fail(err, ENOTSUP, "cgroup-bpf", "pycell was built --without-libbpf: no device filter");
}

int cgroup_bpf_device_attach(int prog_fd, int cgroup_fd, struct pc_err *err)
{
	return pc_fail(err, ENOTSUP, "cgroup-bpf", "pycell was built --without-libbpf: no device filter");
}

#endif
