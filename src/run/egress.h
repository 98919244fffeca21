/* pycell: one egress run's network, owned by its run: the veth pair
 * (jail/net.c), the socket-address filters on its cgroup and their
 * counter (jail/cgroup_bpf.c), and the DNS responder the jail's
 * resolv.conf names, which answers the allowed names and nothing else. */
#ifndef PYCELL_EGRESS_H
#define PYCELL_EGRESS_H

#include <stdint.h>

#include "base/loop.h"
#include "base/util.h"
#include "config/conf.h"
#include "config/policy.h"
#include "config/result.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "jail/net.h"

struct egress;

/* The network configuration egress runs of this process use (pycell.conf's
 * "network"; copied).  Until it is called: the built-in defaults. */
void egress_configure(const struct net_conf *net);

/* Can this host run egress runs at all: a cgroup v2 directory per run with
 * cgroup BPF (cgroups, NULL: none), CAP_NET_ADMIN for the veth pairs, a
 * build with libnl and libbpf?  -1 with the reason: a policy with an
 * egress list is then refused when it is loaded. */
int egress_host_check(const struct cgroup_env *cgroups, struct pc_err *err);

/* For a policy whose network is NET_EGRESS, before the jail is cloned:
 * resolve its names and make its counter.  egress_spec then gives the
 * jail's spec the release hook that, once the jail's namespaces exist,
 * makes its veth pair, loads and attaches its filters to the run's cgroup
 * v2 directory (cgroup_fd; the run's, which outlives e) and opens its
 * responder on loop l.  Where the host cannot do this (no cgroup v2
 * directory for the run, no privilege, built without libbpf or libnl),
 * the run fails saying why: never with another network. */
int egress_new(struct loop *l, const struct policy *p, int cgroup_fd, struct egress **out, struct pc_err *err);
void egress_spec(struct egress *e, struct jail_spec *spec);
/* What the run's network refused, into r->network; and as numbers. */
void egress_report(const struct egress *e, struct run_result *r);
void egress_counts(const struct egress *e, uint64_t *connections, uint64_t *dns_queries);
/* Close the responder and the filters' fds and delete the veth pair. */
void egress_free(struct egress *e);

#endif
