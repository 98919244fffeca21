/* pycell: the jail's network namespace.  A fresh netns holds only `lo`,
 * down; it comes up so code can use 127.0.0.1 inside its own namespace.
 * An egress run also gets a veth pair to the supervisor's namespace (the
 * only way out, which the BPF filters of cgroup_bpf.c hold to the
 * policy's list); other runs get nothing else: no veth, no route out. */
#include "config.h"

#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#ifdef HAVE_LIBNL
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "base/fault.h"
#include "jail/net.h"

#ifdef HAVE_LIBNL
static struct nl_sock *nl_open(struct pc_err *err)
{
	struct nl_sock *sk = nl_socket_alloc();
	int e;
	if (!sk) {
		pc_fail(err, ENOMEM, "net", "netlink socket: out of memory");
		return NULL;
	}
	if ((e = nl_connect(sk, NETLINK_ROUTE)) < 0) {
		pc_fail(err, EPROTO, "net", "netlink connect: %s", nl_geterror(e));
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

/* The errno a libnl error stands for, for the messages' errno_name. */
static int nl_errno(int e)
{
	switch (-e) {
	case NLE_EXIST: return EEXIST;
	case NLE_PERM: return EPERM;
	case NLE_NOACCESS: return EACCES;
	case NLE_OBJ_NOTFOUND: return ENODEV;
	case NLE_NOMEM: return ENOMEM;
	default: return EPROTO;
	}
}

static int add_addr(struct nl_sock *sk, int ifindex, uint32_t addr, unsigned prefix, struct pc_err *err)
{
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *local = nl_addr_build(AF_INET, &addr, 4);
	int e = -NLE_NOMEM;
	if (a && local) {
		nl_addr_set_prefixlen(local, (int)prefix);
		rtnl_addr_set_ifindex(a, ifindex);
		rtnl_addr_set_family(a, AF_INET);
		e = rtnl_addr_set_local(a, local);
		if (e == 0)
			e = rtnl_addr_add(sk, a, 0);
	}
	nl_addr_put(local);
	rtnl_addr_put(a);
	if (e < 0) {
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &addr, ip, sizeof(ip));
		return pc_fail(err, nl_errno(e), "net", "address %s/%u on interface %d: %s", ip, prefix, ifindex,
			       nl_geterror(e));
	}
	return 0;
}

static int set_up(struct nl_sock *sk, struct rtnl_link *l, const char *name, struct pc_err *err)
{
	struct rtnl_link *change = rtnl_link_alloc();
	int e = -NLE_NOMEM;
	if (change) {
		rtnl_link_set_flags(change, IFF_UP);
		e = rtnl_link_change(sk, l, change, 0);
	}
	rtnl_link_put(change);
	if (e < 0)
		return pc_fail(err, nl_errno(e), "net", "bring %s up: %s", name, nl_geterror(e));
	return 0;
}

static int get_link(struct nl_sock *sk, const char *name, struct rtnl_link **out, struct pc_err *err)
{
	int e = rtnl_link_get_kernel(sk, 0, name, out);
	if (e < 0)
		return pc_fail(err, nl_errno(e), "net", "find interface %s: %s", name, nl_geterror(e));
	return 0;
}

/* The slots a process tries first are spread by its pid, so that two
 * servers starting together do not race for the same names. */
static unsigned next_slot;

int net_link_create(struct net_link *nl, const struct net_conf *net, pid_t pid, struct pc_err *err)
{
	unsigned n_slots = 1u << (32 - net->pool_prefix - 2);
	struct nl_sock *sk;
	struct rtnl_link *veth = NULL, *host = NULL;
	int e = 0, rc = -1;

	memset(nl, 0, sizeof(*nl));
	if (fault_at("veth"))
		return pc_fail(err, EPERM, "net", "create a veth pair: %s (injected fault)", strerror(EPERM));
	if (!(sk = nl_open(err)))
		return -1;
	if (!next_slot)
		next_slot = (unsigned)getpid() * 7919u;
	for (unsigned tries = 0; tries < n_slots; tries++) {
		struct rtnl_link *peer;
		unsigned slot = next_slot++ % n_slots;
		/* .0 and the pool's last /30 would hold the pool's own network and
		 * broadcast addresses: a /30 per run inside it, never its ends */
		if ((slot == 0 || slot == n_slots - 1) && n_slots > 2)
			continue;
		rtnl_link_put(veth);
		if (!(veth = rtnl_link_veth_alloc())) {
			pc_fail(err, ENOMEM, "net", "veth: out of memory");
			goto out;
		}
		snprintf(nl->host_if, sizeof(nl->host_if), "pcn%u", slot);
		rtnl_link_set_name(veth, nl->host_if);
		peer = rtnl_link_veth_get_peer(veth);
		rtnl_link_set_name(peer, NET_JAIL_IF);
		rtnl_link_set_ns_pid(peer, pid);
		rtnl_link_put(peer);
		e = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
		if (e == -NLE_EXIST)
			continue;
		if (e < 0) {
			pc_fail(err, nl_errno(e), "net", "create the veth pair %s/%s: %s (egress needs CAP_NET_ADMIN "
				"in the server's network namespace)", nl->host_if, NET_JAIL_IF, nl_geterror(e));
			goto out;
		}
		nl->slot = slot;
		break;
	}
	if (e == -NLE_EXIST || !nl->host_if[0]) {
		pc_fail(err, EADDRINUSE, "net", "every /30 of the pool is in use (network.pool in pycell.conf)");
		goto out;
	}
	if (get_link(sk, nl->host_if, &host, err) < 0)
		goto out;
	nl->gw = htonl(ntohl(net->pool_addr) + nl->slot * 4 + 1);
	nl->addr = htonl(ntohl(net->pool_addr) + nl->slot * 4 + 2);
	if (add_addr(sk, rtnl_link_get_ifindex(host), nl->gw, 30, err) < 0 || set_up(sk, host, nl->host_if, err) < 0)
		goto out;
	rc = 0;
out:
	rtnl_link_put(host);
	rtnl_link_put(veth);
	nl_socket_free(sk);
	return rc;
}

int net_link_up_inside(uint32_t addr, uint32_t gw_addr, struct pc_err *err)
{
	struct nl_sock *sk;
	struct rtnl_link *l = NULL;
	struct rtnl_route *route = NULL;
	struct rtnl_nexthop *nh = NULL;
	struct nl_addr *dst = NULL, *gw = NULL;
	uint32_t any = 0;
	int e, rc = -1;

	if (net_loopback_up(err) < 0 || !(sk = nl_open(err)))
		return -1;
	if (get_link(sk, NET_JAIL_IF, &l, err) < 0)
		goto out;
	if (add_addr(sk, rtnl_link_get_ifindex(l), addr, 30, err) < 0 || set_up(sk, l, NET_JAIL_IF, err) < 0)
		goto out;
	route = rtnl_route_alloc();
	nh = rtnl_route_nh_alloc();
	dst = nl_addr_build(AF_INET, &any, 4);
	gw = nl_addr_build(AF_INET, &gw_addr, 4);
	if (!route || !nh || !dst || !gw) {
		pc_fail(err, ENOMEM, "net", "default route: out of memory");
		goto out;
	}
	nl_addr_set_prefixlen(dst, 0);
	rtnl_route_set_family(route, AF_INET);
	rtnl_route_set_dst(route, dst);
	rtnl_route_nh_set_gateway(nh, gw);
	rtnl_route_nh_set_ifindex(nh, rtnl_link_get_ifindex(l));
	rtnl_route_add_nexthop(route, nh);
	nh = NULL;   /* the route's now */
	if ((e = rtnl_route_add(sk, route, NLM_F_CREATE)) < 0) {
		pc_fail(err, nl_errno(e), "net", "default route through %s: %s", NET_JAIL_IF, nl_geterror(e));
		goto out;
	}
	rc = 0;
out:
	if (nh)
		rtnl_route_nh_free(nh);
	nl_addr_put(dst);
	nl_addr_put(gw);
	rtnl_route_put(route);
	rtnl_link_put(l);
	nl_socket_free(sk);
	return rc;
}
#else
int net_link_create(struct net_link *nl, const struct net_conf *net, pid_t pid, struct pc_err *err)
{
	memset(nl, 0, sizeof(*nl));
	return pc_fail(err, ENOTSUP, "net", "pycell was built --without-libnl: no egress network");
}

int net_link_up_inside(uint32_t addr, uint32_t gw, struct pc_err *err)
{
	return pc_fail(err, ENOTSUP, "net", "pycell was built --without-libnl: no egress network");
}

#endif

/* Up by ioctl, not netlink: one flag on an interface that is there
 * already needs no link dump.  The step took 0.2 ms of every jail's start
 * through libnl, 0.1 ms this way, most of it the kernel's own lo setup. */
int net_loopback_up(struct pc_err *err)
{
	struct ifreq ifr;
	cleanup_close int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return pc_syserr(err, "net", "socket for lo");
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return pc_syserr(err, "net", "read flags of lo");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		return pc_syserr(err, "net", "bring lo up");
	return 0;
}
