/* pycell: MCP over HTTP: the listening socket, from --listen or from
 * systemd (http_internal.h). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/http_internal.h"

union sockaddr_any {
	struct sockaddr sa;
	struct sockaddr_in in4;
	struct sockaddr_in6 in6;
	struct sockaddr_un un;
};

/* The listening socket fd, bound already (by listen_on, or by systemd):
 * where it listens, as a URL and as a Host name; refused when it is not
 * loopback and there are no tokens.  `what` names it in errors. */
int http_adopt(struct http_server *h, int fd, const char *what, struct pc_err *err)
{
	union sockaddr_any a;
	socklen_t alen = sizeof(a);
	char host[INET6_ADDRSTRLEN];
	unsigned port;
	int type = 0;
	socklen_t tlen = sizeof(type);

	memset(&a, 0, sizeof(a));
	if (getsockname(fd, &a.sa, &alen) < 0)
		return pc_syserr(err, "listen", "%s: getsockname", what);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_STREAM ||
	    (a.sa.sa_family != AF_UNIX && a.sa.sa_family != AF_INET && a.sa.sa_family != AF_INET6))
		return pc_fail(err, EINVAL, "listen", "%s: not a TCP or unix stream socket", what);
	if (a.sa.sa_family == AF_UNIX) {
		h->is_unix = true;
		h->url = xasprintf("unix:%s", a.un.sun_path[0] ? a.un.sun_path : "(unnamed)");
	} else {
		bool v6 = a.sa.sa_family == AF_INET6;
		inet_ntop(a.sa.sa_family, v6 ? (void *)&a.in6.sin6_addr : (void *)&a.in4.sin_addr, host, sizeof(host));
		port = ntohs(v6 ? a.in6.sin6_port : a.in4.sin_port);
		h->url = xasprintf("http://%s%s%s:%u" ENDPOINT, v6 ? "[" : "", host, v6 ? "]" : "", port);
		h->listen_host = v6 ? xasprintf("[%s]", host) : xstrdup(host);
		if (!h->cfg.tokens && !(v6 ? IN6_IS_ADDR_LOOPBACK(&a.in6.sin6_addr)
					  : (ntohl(a.in4.sin_addr.s_addr) >> 24) == 127))
			return pc_fail(err, EPERM, "listen", "%s: only a loopback address or a unix socket may be "
				       "served without --tokens", what);
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0 || listen(fd, 128) < 0)
		return pc_syserr(err, "listen", "%s: listen", what);
	return 0;
}

int http_listen_on(struct http_server *h, const char *spec, struct pc_err *err)
{
	union sockaddr_any a;
	socklen_t alen;
	cleanup_close int fd = -1;
	int one = 1;
	char host[64], port_s[16], what[300];
	const char *colon;
	char *end;
	unsigned long port;

	memset(&a, 0, sizeof(a));
	snprintf(what, sizeof(what), "--listen %s", spec);
	if (strncmp(spec, "unix:", 5) == 0) {
		const char *path = spec + 5;
		struct stat st;
		if (!*path || strlen(path) >= sizeof(a.un.sun_path))
			return pc_fail(err, EINVAL, "listen", "--listen %s: a unix socket path of 1 to %zu bytes", spec,
				       sizeof(a.un.sun_path) - 1);
		/* a stale socket of an earlier server is replaced, nothing else */
		if (lstat(path, &st) == 0) {
			if (!S_ISSOCK(st.st_mode))
				return pc_fail(err, EEXIST, "listen", "--listen %s: exists and is not a socket", spec);
			unlink(path);
		}
		a.un.sun_family = AF_UNIX;
		strcpy(a.un.sun_path, path);
		alen = sizeof(a.un);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0 || bind(fd, &a.sa, alen) < 0)
			return pc_syserr(err, "listen", "bind %s", path);
		/* anyone may connect; SO_PEERCRED decides who is served */
		chmod(path, 0666);
		h->unix_path = xstrdup(path);
	} else {
		colon = strrchr(spec, ':');
		if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host))
			return pc_fail(err, EINVAL, "listen", "--listen %s: expected ADDRESS:PORT (127.0.0.1:8080, "
				       "[::1]:8080) or unix:PATH", spec);
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
		snprintf(port_s, sizeof(port_s), "%s", colon + 1);
		errno = 0;
		port = strtoul(port_s, &end, 10);
		if (!*port_s || *end || errno || port > 65535)
			return pc_fail(err, EINVAL, "listen", "--listen %s: the port must be 0 to 65535", spec);
		if (host[0] == '[' && host[strlen(host) - 1] == ']') {
			host[strlen(host) - 1] = '\0';
			memmove(host, host + 1, strlen(host));
			a.in6.sin6_family = AF_INET6;
			a.in6.sin6_port = htons((uint16_t)port);
			if (inet_pton(AF_INET6, host, &a.in6.sin6_addr) != 1)
				return pc_fail(err, EINVAL, "listen", "--listen %s: not an IPv6 address", spec);
			alen = sizeof(a.in6);
		} else {
			a.in4.sin_family = AF_INET;
			a.in4.sin_port = htons((uint16_t)port);
			if (inet_pton(AF_INET, host, &a.in4.sin_addr) != 1)
				return pc_fail(err, EINVAL, "listen", "--listen %s: not an IPv4 address (names are not "
					       "resolved)", spec);
			alen = sizeof(a.in4);
		}
		fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return pc_syserr(err, "listen", "socket");
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, &a.sa, alen) < 0)
			return pc_syserr(err, "listen", "bind %s", spec);
	}
	if (http_adopt(h, fd, what, err) < 0)
		return -1;
	h->listen_fd = steal_fd(&fd);
	return 0;
}
