/* pycell: the jail's network namespace: loopback up; for an egress run,
 * a veth pair between the supervisor's namespace and the jail's. */
#ifndef PYCELL_NET_H
#define PYCELL_NET_H

#include <net/if.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/util.h"
#include "config/conf.h"

/* In the jail child (own netns): bring `lo` up. */
int net_loopback_up(struct pc_err *err);

/* The veth pair of one egress run, made once the jail's namespaces exist:
 * slot N of the pool is its /30; pycell's end, "pcnN" in pycell's own
 * namespace, holds .1, and the jail's end is made in the jail's
 * namespace as "eth0" (never moved: a move costs an RCU grace period,
 * about 20 ms) and gets .2 there.  The kernel allocates slots: a name that
 * exists (EEXIST) is another run's, of this process or another.  The pair
 * goes with the jail's namespace: nothing deletes it. */
struct net_link {
	unsigned slot;
	char host_if[IFNAMSIZ];
	uint32_t gw, addr;         /* network byte order */
};
#define NET_JAIL_IF "eth0"

/* Supervisor, after the clone: make the pair between its own namespace
 * and pid's, its own end addressed and up. */
int net_link_create(struct net_link *nl, const struct net_conf *net, pid_t pid, struct pc_err *err);
/* In the jail child: lo and NET_JAIL_IF up, addr on it, a default route
 * through gw (both network byte order). */
int net_link_up_inside(uint32_t addr, uint32_t gw, struct pc_err *err);

#endif
