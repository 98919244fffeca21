/* pycell: the Prometheus text exposition format (prom.h). */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/prom.h"
#include "base/util.h"

static void put(struct prom *p, const char *s, size_t n)
{
	if (p->len + n + 1 > p->cap) {
		p->cap = (p->len + n + 1) * 2;
		p->buf = xrealloc(p->buf, p->cap);
	}
	memcpy(p->buf + p->len, s, n);
	p->len += n;
	p->buf[p->len] = '\0';
}

static void puts_(struct prom *p, const char *s)
{
	put(p, s, strlen(s));
}

void prom_family(struct prom *p, const char *name, const char *type, const char *help)
{
	puts_(p, "# HELP ");
	puts_(p, name);
	put(p, " ", 1);
	puts_(p, help);
	puts_(p, "\n# TYPE ");
	puts_(p, name);
	put(p, " ", 1);
	puts_(p, type);
	put(p, "\n", 1);
}

static void label_value(struct prom *p, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			put(p, "\\", 1);
		if (*v == '\n')
			puts_(p, "\\n");
		else
			put(p, v, 1);
	}
}

void prom_sample(struct prom *p, const char *name, double value, ...)
{
	va_list ap;
	const char *k, *sep = "{";
	char num[64];

	puts_(p, name);
	va_start(ap, value);
	while ((k = va_arg(ap, const char *))) {
		const char *v = va_arg(ap, const char *);
		puts_(p, sep);
		puts_(p, k);
		puts_(p, "=\"");
		label_value(p, v ? v : "");
		put(p, "\"", 1);
		sep = ",";
	}
	va_end(ap);
	if (*sep == ',')
		put(p, "}", 1);
	if (isinf(value))
		snprintf(num, sizeof(num), " %s\n", value > 0 ? "+Inf" : "-Inf");
	else if (value == (double)(long long)value && fabs(value) < 1e15)
		snprintf(num, sizeof(num), " %lld\n", (long long)value);
	else
		snprintf(num, sizeof(num), " %.9g\n", value);
	puts_(p, num);
}
