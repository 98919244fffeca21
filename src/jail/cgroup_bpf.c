/* pycell: the cgroup v2 device filter, a hand-assembled BPF program loaded
 * and attached with libbpf (no clang or BPF object file needed). */
#include "config.h"

#include <errno.h>
#include <string.h>

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

int cgroup_bpf_device_load(struct pc_err *err)
{
	char log[1024] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_buf = log, .log_size = sizeof(log), .log_level = 0);
	int fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, "pycell_devices", "GPL", device_prog,
			       ARRAY_SIZE(device_prog), &opts);
	if (fd < 0) {
		errno = -fd;
		return pc_syserr(err, "cgroup-bpf", "bpf(BPF_PROG_LOAD) of the device filter%s%s",
				 log[0] ? ": " : "", log);
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

#else

int cgroup_bpf_device_load(struct pc_err *err)
{
	return pc_fail(err, ENOTSUP, "cgroup-bpf", "pycell was built --without-libbpf: no device filter");
}

int cgroup_bpf_device_attach(int prog_fd, int cgroup_fd, struct pc_err *err)
{
	return pc_fail(err, ENOTSUP, "cgroup-bpf", "pycell was built --without-libbpf: no device filter");
}

#endif
