/* pycell: one egress run's network (egress.h).
 *
 * The filters hold the jail to these destinations, in this order:
 *   127.0.0.0/8, any port      the jail's own loopback (its netns's lo)
 *   gateway:53, UDP only        this responder
 *   listed link-local ones      only those written in 169.254.0.0/16
 *   169.254.0.0/16              denied (the metadata address among them)
 *   the pool                    denied (the gateway's other ports, other jails)
 *   the policy's destinations   names as their addresses (/32), with ports
 * and deny everything else, as they do every IPv6 destination but ::1.
 * Names are resolved here, by the supervisor: pycell.conf's network.hosts
 * first, then the host's resolver (getaddrinfo, which blocks the loop
 * while it asks: a name the host resolves slowly slows every run that
 * starts meanwhile; list it in network.hosts to avoid that). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/log.h"
#include "jail/caps.h"
#include "jail/cgroup_bpf.h"
#include "run/egress.h"

#define DNS_MAX 512          /* a UDP message without EDNS */
#define DNS_TTL 60
#define DNS_READS_PER_WAKE 64

struct egress_name {
	char name[EGRESS_NAME_MAX + 1];
	uint32_t addr[NET_HOST_ADDRS_MAX];
	size_t n_addr;
};

struct egress {
	struct loop *loop;
	int cgroup_fd;                 /* the run's cgroup v2 directory (the run's) */
	struct egress_dest *dests;     /* the policy's destinations, parsed */
	size_t n_dests;
	struct net_link link;
	int map_fd;
	int prog[EGRESS_NHOOKS];
	int dns_fd;
	struct loop_watch w_dns;
	bool watched;
	struct egress_name *names;
	size_t n_names;
	uint64_t dns_refused;
};

static struct net_conf conf_net;
static bool conf_set;

void egress_configure(const struct net_conf *net)
{
	net_conf_copy(&conf_net, net);
	conf_set = true;
}

static const struct net_conf *net_conf(void)
{
	if (!conf_set) {
		struct pycell_conf d;
		conf_init_default(&d);
		egress_configure(&d.net);
		conf_free(&d);
	}
	return &conf_net;
}

/* ------------------------------------------------------------ names */

static int resolve(const struct net_conf *net, const char *name, struct egress_name *out, struct pc_err *err)
{
	const struct net_host *h = net_conf_host(net, name);
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc;

	snprintf(out->name, sizeof(out->name), "%s", name);
	if (h) {
		memcpy(out->addr, h->addr, h->n_addr * sizeof(h->addr[0]));
		out->n_addr = h->n_addr;
		return 0;
	}
	rc = getaddrinfo(name, NULL, &hints, &res);
	if (rc != 0)
		return pc_fail(err, rc == EAI_SYSTEM ? errno : ENOENT, "egress",
			       "egress destination \"%s\" does not resolve: %s (list it in pycell.conf's network.hosts, "
			       "or name it by address)", name, gai_strerror(rc));
	out->n_addr = 0;
	for (struct addrinfo *ai = res; ai && out->n_addr < NET_HOST_ADDRS_MAX; ai = ai->ai_next) {
		uint32_t a = ((const struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr;
		size_t i;
		for (i = 0; i < out->n_addr && out->addr[i] != a; i++)
			;
		if (i == out->n_addr)
			out->addr[out->n_addr++] = a;
	}
	freeaddrinfo(res);
	return 0;
}

static const struct egress_name *find_name(const struct egress *e, const char *name)
{
	for (size_t i = 0; i < e->n_names; i++)
		if (strcmp(e->names[i].name, name) == 0)
			return &e->names[i];
	return NULL;
}

/* ------------------------------------------------------------ rules */

struct rules {
	struct egress_rule r[EGRESS_RULES_MAX];
	size_t n;
};

static void rule(struct rules *rs, uint32_t addr, uint32_t mask, uint16_t port, bool udp_only, bool deny)
{
	if (rs->n < EGRESS_RULES_MAX)
		rs->r[rs->n++] = (struct egress_rule){ addr & mask, mask, port, udp_only, deny };
}

#define LINK_LOCAL htonl(0xa9fe0000)
#define LINK_LOCAL_MASK htonl(0xffff0000)

/* Before the clone: the policy's destinations, their names resolved. */
static int resolve_dests(struct egress *e, const struct policy *p, const struct net_conf *net, struct pc_err *err)
{
	e->dests = xcalloc(p->network.n_egress, sizeof(*e->dests));
	for (size_t i = 0; i < p->network.n_egress; i++) {
		struct egress_dest *d = &e->dests[e->n_dests++];
		const char *why;
		if (policy_egress_parse(p->network.egress[i], d, &why) < 0)
			return pc_fail(err, EINVAL, "egress", "egress destination \"%s\": %s", p->network.egress[i], why);
		if (d->name[0]) {
			if (find_name(e, d->name))
				continue;
			e->names = xrealloc(e->names, (e->n_names + 1) * sizeof(*e->names));
			if (resolve(net, d->name, &e->names[e->n_names], err) < 0)
				return -1;
			e->n_names++;
		} else if (d->prefix >= net->pool_prefix && (d->addr & net->pool_mask) == net->pool_addr) {
			/* a wider one may hold the pool: the pool is denied first */
			char pool[INET_ADDRSTRLEN];
			inet_ntop(AF_INET, &net->pool_addr, pool, sizeof(pool));
			return pc_fail(err, EINVAL, "egress", "egress destination \"%s\" is inside the pool of the egress "
				       "runs' own addresses (network.pool %s/%u in pycell.conf), which no run may reach",
				       p->network.egress[i], pool, net->pool_prefix);
		}
	}
	return 0;
}

/* Once the run's gateway is known: the filters' rules (this file's head). */
static int build_rules(const struct egress *e, const struct net_conf *net, struct rules *rs, struct pc_err *err)
{
	rule(rs, htonl(0x7f000000), htonl(0xff000000), 0, false, false);
	rule(rs, e->link.gw, ~0u, 53, true, false);
	for (int pass = 0; pass < 2; pass++) {
		/* pass 0: the link-local destinations written as such; then
		 * the rest of link-local and the pool are denied; pass 1: the
		 * others (a name's addresses are never link-local or the pool's:
		 * the name was not written as one) */
		for (size_t i = 0; i < e->n_dests; i++) {
			const struct egress_dest *d = &e->dests[i];
			const struct egress_name *n = d->name[0] ? find_name(e, d->name) : NULL;
			bool ll;
			if (n) {
				for (size_t k = 0; pass == 1 && k < n->n_addr; k++)
					rule(rs, n->addr[k], ~0u, d->port, false, false);
				continue;
			}
			ll = (d->mask & LINK_LOCAL_MASK) == LINK_LOCAL_MASK && (d->addr & LINK_LOCAL_MASK) == LINK_LOCAL;
			if (ll == (pass == 0))
				rule(rs, d->addr, d->mask, d->port, false, false);
		}
		if (pass == 0) {
			rule(rs, LINK_LOCAL, LINK_LOCAL_MASK, 0, false, true);
			rule(rs, net->pool_addr, net->pool_mask, 0, false, true);
		}
	}
	if (rs->n == EGRESS_RULES_MAX)
		return pc_fail(err, E2BIG, "egress", "the egress list resolves to more than %d rules",
			       EGRESS_RULES_MAX - 8);
	return 0;
}

/* ------------------------------------------------------------ DNS */

static size_t put16(unsigned char *b, size_t at, unsigned v)
{
	b[at] = (unsigned char)(v >> 8);
	b[at + 1] = (unsigned char)v;
	return at + 2;
}

/* Answer one query in q (n bytes) into a (DNS_MAX); its length, or 0 to
 * send nothing (not even a header to answer). */
static size_t dns_answer(struct egress *e, const unsigned char *q, size_t n, unsigned char *a)
{
	char name[EGRESS_NAME_MAX + 2];
	size_t at = 12, len = 0, out;
	unsigned qtype, rcode = 0, n_an = 0;
	const struct egress_name *hit;
	bool odd = false;

	if (n < 12 || (q[2] & 0x80))   /* too short, or an answer */
		return 0;
	memcpy(a, q, 4);
	a[2] = (unsigned char)(0x80 | (q[2] & 0x79) | 0x04);   /* QR, the opcode, AA, RD */
	a[3] = 0;
	memset(a + 4, 0, 8);
	if ((q[2] >> 3 & 0x0f) != 0) {
		a[3] = 4;    /* NOTIMP: queries only */
		e->dns_refused++;
		return 12;
	}
	if (q[4] != 0 || q[5] != 1)
		goto formerr;
	while (at < n && q[at]) {
		size_t l = q[at];
		if (l > 63 || at + 1 + l >= n || len + l + 1 > EGRESS_NAME_MAX + 1)
			goto formerr;   /* also a compression pointer: none in a question */
		for (size_t i = 0; i < l; i++) {
			char ch = (char)q[at + 1 + i];
			odd |= ch == '\0' || ch == '.';   /* no allowed name has these in a label */
			name[len++] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
		}
		name[len++] = '.';
		at += 1 + l;
	}
	if (at + 5 > n)
		goto formerr;
	name[len ? len - 1 : 0] = '\0';
	qtype = (unsigned)q[at + 1] << 8 | q[at + 2];
	at += 5;   /* the root label, type, class */
	/* the question, as asked */
	memcpy(a + 12, q + 12, at - 12);
	out = at;
	put16(a, 4, 1);
	hit = odd ? NULL : find_name(e, name);
	if (!hit) {
		rcode = 3;   /* NXDOMAIN: nothing but the allowed names exists */
		e->dns_refused++;
	} else if (qtype == 1 && (q[at - 2] << 8 | q[at - 1]) == 1) {
		for (size_t i = 0; i < hit->n_addr && out + 16 <= DNS_MAX; i++, n_an++) {
			out = put16(a, out, 0xc00c);    /* the question's name */
			out = put16(a, out, 1);         /* A */
			out = put16(a, out, 1);         /* IN */
			out = put16(a, out, 0);
			out = put16(a, out, DNS_TTL);
			out = put16(a, out, 4);
			memcpy(a + out, &hit->addr[i], 4);
			out += 4;
		}
	}
	/* an allowed name's other types: no data (NOERROR, no answer) */
	a[3] = (unsigned char)rcode;
	put16(a, 6, n_an);
	return out;
formerr:
	a[3] = 1;
	e->dns_refused++;
	return 12;
}

static void on_dns(struct loop_watch *w, uint32_t events, void *data)
{
	struct egress *e = data;
	unsigned char q[DNS_MAX + 1], a[DNS_MAX];
	for (int i = 0; i < DNS_READS_PER_WAKE; i++) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(e->dns_fd, q, sizeof(q), MSG_TRUNC, (struct sockaddr *)&from, &fl);
		size_t len;
		if (n < 0)
			break;
		if ((size_t)n > DNS_MAX) {   /* longer than a plain UDP query may be */
			e->dns_refused++;
			continue;
		}
		if ((len = dns_answer(e, q, (size_t)n, a)) > 0)
			sendto(e->dns_fd, a, len, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
	}
	(void)w;
	(void)events;
}

static int dns_open(struct egress *e, struct pc_err *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = e->link.gw };
	e->dns_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (e->dns_fd < 0)
		return pc_syserr(err, "egress", "socket for the DNS responder");
	if (bind(e->dns_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return pc_syserr(err, "egress", "bind the DNS responder to %s:53", inet_ntoa(sa.sin_addr));
	if (loop_add(e->loop, &e->w_dns, e->dns_fd, EPOLLIN, on_dns, e) < 0)
		return pc_syserr(err, "egress", "watch the DNS responder");
	e->watched = true;
	return 0;
}

/* ------------------------------------------------------------ the host */

int egress_host_check(const struct cgroup_env *cgroups, struct pc_err *err)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct caps[2];
	struct cgroup_info ci = { 0 };

#if !defined(HAVE_LIBNL) || !defined(HAVE_LIBBPF)
	return pc_fail(err, ENOTSUP, "egress", "an egress network needs pycell built with libnl and libbpf");
#endif
	if (cgroups)
		cgroup_env_info(cgroups, &ci);
	if (!cgroups || !ci.v2_parent || !ci.bpf_device)
		return pc_fail(err, ENOTSUP, "egress", "an egress network needs a cgroup v2 directory for each run, "
			       "where its BPF filters attach; this host gives runs none (%s; see `pycell doctor`)",
			       !cgroups || !ci.v2_parent ? "no cgroup v2 directory for runs"
							 : ci.bpf_detail ? ci.bpf_detail : "no cgroup BPF");
	if (syscall(SYS_capget, &hdr, caps) < 0)
		return pc_syserr(err, "egress", "capget");
	if (!(caps[CAP_NET_ADMIN / 32].permitted & (1u << (CAP_NET_ADMIN % 32))))
		return pc_fail(err, EPERM, "egress", "an egress network needs CAP_NET_ADMIN for each run's veth pair: "
			       "run pycell as root");
	return 0;
}

/* ------------------------------------------------------------ the run's */

int egress_new(struct loop *l, const struct policy *p, int cgroup_fd, struct egress **out, struct pc_err *err)
{
	struct egress *e = xcalloc(1, sizeof(*e));

	e->loop = l;
	e->cgroup_fd = cgroup_fd;
	e->map_fd = e->dns_fd = -1;
	for (int h = 0; h < EGRESS_NHOOKS; h++)
		e->prog[h] = -1;
	*out = NULL;
	if (cgroup_fd < 0) {
		pc_fail(err, ENOTSUP, "egress", "an egress network needs a cgroup v2 directory for each run, where "
			"its BPF filters attach; this host gives runs none (see `pycell doctor`)");
		goto fail;
	}
	if (!l) {
		pc_fail(err, EINVAL, "egress", "an egress network needs the supervisor's loop (a bug in pycell)");
		goto fail;
	}
	if (resolve_dests(e, p, net_conf(), err) < 0 || (e->map_fd = cgroup_bpf_counter_new(err)) < 0)
		goto fail;
	*out = e;
	return 0;
fail:
	egress_free(e);
	return -1;
}

/* The release (jail_spec.net_setup): the pair into the jail's namespace,
 * then what names its gateway: the filters on the run's cgroup (the jail
 * is in it, waiting for this) and the responder. */
static int net_setup(void *ctx, pid_t pid, uint32_t *addr, uint32_t *gw, struct pc_err *err)
{
	struct egress *e = ctx;
	const struct net_conf *net = net_conf();
	struct rules *rs = xcalloc(1, sizeof(*rs));
	struct pc_err lower_err = { 0 };
	int rc = -1;

	if (caps_net(true, err) < 0 || net_link_create(&e->link, net, pid, err) < 0)
		goto out;
	if (build_rules(e, net, rs, err) < 0)
		goto out;
	for (int h = 0; h < EGRESS_NHOOKS; h++) {
		if ((e->prog[h] = cgroup_bpf_egress_load((enum egress_hook)h, rs->r, rs->n, e->map_fd, err)) < 0)
			goto out;
		if (fault_at("egress_bpf"))
			continue;   /* tests only: a jail without its filters, which the probes must catch */
		if (cgroup_bpf_egress_attach(e->prog[h], e->cgroup_fd, (enum egress_hook)h, err) < 0)
			goto out;
	}
	if (dns_open(e, err) < 0)
		goto out;
	*addr = e->link.addr;
	*gw = e->link.gw;
	log_debug("egress: %s, jail %s, %zu rules, %zu names", e->link.host_if,
		  inet_ntoa((struct in_addr){ e->link.addr }), rs->n, e->n_names);
	rc = 0;
out:
	free(rs);
	if (caps_net(false, &lower_err) < 0)
		log_warn("egress: %s", lower_err.msg);
	return rc;
}

void egress_spec(struct egress *e, struct jail_spec *spec)
{
	spec->net_setup = net_setup;
	spec->net_ctx = e;
}

void egress_counts(const struct egress *e, uint64_t *connections, uint64_t *dns_queries)
{
	*connections = cgroup_bpf_counter_read(e->map_fd);
	*dns_queries = e->dns_refused;
}

void egress_report(const struct egress *e, struct run_result *r)
{
	uint64_t c, d;
	egress_counts(e, &c, &d);
	json_decref(r->network);
	r->network = json_pack("{s:I,s:I}", "refused_connections", (json_int_t)c, "refused_dns_queries", (json_int_t)d);
}

void egress_free(struct egress *e)
{
	if (!e)
		return;
	if (e->watched)
		loop_del(e->loop, &e->w_dns);
	if (e->dns_fd >= 0)
		close(e->dns_fd);
	for (int h = 0; h < EGRESS_NHOOKS; h++)
		if (e->prog[h] >= 0)
			close(e->prog[h]);
	if (e->map_fd >= 0)
		close(e->map_fd);
	free(e->dests);
	free(e->names);
	free(e);
}
