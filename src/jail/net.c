/* pycell: the jail's network namespace.  A fresh netns holds only `lo`,
 * down; it comes up so code can use 127.0.0.1 inside its own namespace.
 * Nothing else is created: no veth, no route out. */
#include "config.h"

#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#ifdef HAVE_LIBNL
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#endif

#include "jail/net.h"

#ifdef HAVE_LIBNL
int net_loopback_up(struct pc_err *err)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct rtnl_link *lo = NULL, *change = NULL;
	int rc = -1, e;
	if (!sk)
		return pc_fail(err, ENOMEM, "net", "netlink socket: out of memory");
	if ((e = nl_connect(sk, NETLINK_ROUTE)) < 0) {
		pc_fail(err, EPROTO, "net", "netlink connect: %s", nl_geterror(e));
		goto out;
	}
	if ((e = rtnl_link_get_kernel(sk, 0, "lo", &lo)) < 0) {
		pc_fail(err, ENODEV, "net", "find lo: %s", nl_geterror(e));
		goto out;
	}
	change = rtnl_link_alloc();
	if (!change) {
		pc_fail(err, ENOMEM, "net", "bring lo up: out of memory");
		goto out;
	}
	rtnl_link_set_flags(change, IFF_UP);
	if ((e = rtnl_link_change(sk, lo, change, 0)) < 0) {
		pc_fail(err, EPERM, "net", "bring lo up: %s", nl_geterror(e));
		goto out;
	}
	rc = 0;
out:
	rtnl_link_put(change);
	rtnl_link_put(lo);
	nl_socket_free(sk);
	return rc;
}
#else
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
#endif
