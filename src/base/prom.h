/* pycell: the Prometheus text exposition format (version 0.0.4), built in
 * memory: a family's HELP and TYPE, then its samples.  Label values are
 * escaped here (backslash, quote, newline); names are the caller's
 * constants.
 *
 *	struct prom p = { 0 };
 *	prom_family(&p, "pycell_runs_total", "counter", "Runs ended, by status.");
 *	prom_sample(&p, "pycell_runs_total", 3, "policy", "default", "status", "ok", NULL);
 *	... p.buf, p.len ...
 *	free(p.buf);
 */
#ifndef PYCELL_PROM_H
#define PYCELL_PROM_H

#include <stddef.h>

struct prom {
	char *buf;       /* NUL-terminated */
	size_t len, cap;
};

void prom_family(struct prom *p, const char *name, const char *type, const char *help);
/* One sample: name, value, then label name/value pairs ending in NULL. */
void prom_sample(struct prom *p, const char *name, double value, ...) __attribute__((sentinel));

#endif
