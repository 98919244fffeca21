/* pycell: the BPF programs attached to a run's cgroup v2 directory: the
 * device filter (BPF_CGROUP_DEVICE: char 1:3 null, 1:5 zero, 1:7 full,
 * 1:8 random, 1:9 urandom, the ptys; every other device denied), and an
 * egress run's socket-address filters (connect and UDP sendmsg, IPv4 and
 * IPv6: only the listed destinations). */
#ifndef PYCELL_CGROUP_BPF_H
#define PYCELL_CGROUP_BPF_H

#include <stdbool.h>
#include <stdint.h>

#include "base/util.h"

/* Load the program; returns its fd (close-on-exec) or -1.  Built
 * --without-libbpf this always fails with ENOTSUP. */
int cgroup_bpf_device_load(struct pc_err *err);
/* Attach the program to a cgroup2 directory fd.  Nothing below that
 * cgroup may add or override device programs. */
int cgroup_bpf_device_attach(int prog_fd, int cgroup_fd, struct pc_err *err);

/* One rule of an egress filter, tried in order: a destination whose
 * address masked is addr (and whose port is port, unless 0; and whose
 * socket is a datagram one, when udp_only) is allowed, or denied when
 * deny.  A destination no rule matches is denied. */
struct egress_rule {
	uint32_t addr, mask;   /* network byte order */
	uint16_t port;         /* host order; 0: any */
	bool udp_only;
	bool deny;
};
/* The socket-address hooks, and the creation of an inet socket: only TCP
 * and UDP (the address hooks see no other protocol: UDP-Lite's connect,
 * for one, passes by them, and SCTP's sendmsg). */
enum egress_hook {
	EGRESS_CONNECT4 = 0, EGRESS_SENDMSG4, EGRESS_CONNECT6, EGRESS_SENDMSG6, EGRESS_SOCK_CREATE, EGRESS_NHOOKS
};
#define EGRESS_RULES_MAX 1024

/* A counter the filters add 1 to at every destination they deny (an
 * array map of one u64); its fd, or -1. */
int cgroup_bpf_counter_new(struct pc_err *err);
uint64_t cgroup_bpf_counter_read(int map_fd);
/* Load the filter of one hook: IPv4 hooks follow the rules; the IPv6
 * ones allow ::1 (the jail's own loopback) and nothing else; socket
 * creation allows TCP and UDP and refuses any other inet protocol
 * (EPERM, not counted).  Its fd or -1. */
int cgroup_bpf_egress_load(enum egress_hook hook, const struct egress_rule *rules, size_t n, int map_fd,
			   struct pc_err *err);
/* Attach it to a cgroup2 directory fd: the only program of its hook
 * there, and nothing below may add or override one. */
int cgroup_bpf_egress_attach(int prog_fd, int cgroup_fd, enum egress_hook hook, struct pc_err *err);

#endif
