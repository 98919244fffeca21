/* pycell: the cgroup v2 device filter (BPF_CGROUP_DEVICE): char 1:3 null,
 * 1:5 zero, 1:7 full, 1:8 random, 1:9 urandom; every other device denied. */
#ifndef PYCELL_CGROUP_BPF_H
#define PYCELL_CGROUP_BPF_H

#include "base/util.h"

/* Load the program; returns its fd (close-on-exec) or -1.  Built
 * --without-libbpf this always fails with ENOTSUP. */
int cgroup_bpf_device_load(struct pc_err *err);
/* Attach the program to a cgroup2 directory fd.  Nothing below that
 * cgroup may add or override device programs. */
int cgroup_bpf_device_attach(int prog_fd, int cgroup_fd, struct pc_err *err);

#endif
