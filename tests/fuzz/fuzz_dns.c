/* pycell fuzz target: an egress run's DNS responder (src/run/egress.c,
 * dns_answer), which answers whatever the jail sends to its gateway's
 * port 53: code under attack controls every byte of the query.
 * Checks: the answer fits in a UDP message without EDNS, is empty or has
 * a whole header with the query's id and QR set; an answer with records
 * is NOERROR for exactly one of the allowed names, its records that
 * name's addresses; every other query is refused and counted.
 *
 * egress.c is compiled into this file to reach its static responder;
 * run.sh leaves its own object out. */
/* fuzz: includes src/run/egress.c */
#include "../../src/run/egress.c"

#include <assert.h>
#include <stdint.h>

static struct egress_name names[] = {
	{ "index.test", { 0x0200a8c0 }, 1 },
	{ "multi.test", { 0x0200a8c0, 0x0300a8c0, 0x0400a8c0, 0x0500a8c0, 0x0600a8c0, 0x0700a8c0, 0x0800a8c0,
			  0x0900a8c0 }, 8 },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct egress e = { .names = names, .n_names = ARRAY_SIZE(names), .dns_fd = -1, .map_fd = -1 };
	unsigned char a[DNS_MAX];
	size_t n, an;

	if (size > DNS_MAX)
		return 0;   /* on_dns refuses these before the parser */
	n = dns_answer(&e, data, size, a);
	assert(n <= DNS_MAX);
	if (n == 0) {
		assert(size < 12 || (data[2] & 0x80));
		return 0;
	}
	assert(n >= 12 && memcmp(a, data, 2) == 0 && (a[2] & 0x80));
	an = (size_t)a[6] << 8 | a[7];
	if ((a[3] & 15) != 0) {
		assert(an == 0 && e.dns_refused == 1);
		return 0;
	}
	assert(e.dns_refused == 0);
	if (an) {
		/* A records of one allowed name: each 16 bytes after the question */
		const struct egress_name *hit = NULL;
		size_t q_end = n - 16 * an;
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			if (names[i].n_addr == an)
				hit = &names[i];
		assert(hit);
		for (size_t i = 0; i < an; i++)
			assert(memcmp(a + q_end + 16 * i + 12, &hit->addr[i], 4) == 0);
	}
	return 0;
}
