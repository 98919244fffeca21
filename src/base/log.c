/* pycell: logging to stderr. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "base/log.h"

enum log_level log_level = LOG_WARN;
void (*log_sink)(enum log_level lvl, const char *msg);

uint64_t log_elapsed_us(void)
{
	static uint64_t t0;
	struct timespec ts;
	uint64_t t;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
	if (!t0)
		t0 = t;
	return t - t0;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char buf[1024];
	int n;
	va_list ap;
	if (lvl > log_level)
		return;
	if (log_sink) {
		va_start(ap, fmt);
		vsnprintf(buf, sizeof(buf), fmt, ap);
		va_end(ap);
		log_sink(lvl, buf);
		return;
	}
	n = snprintf(buf, sizeof(buf), "pycell: %s: ", names[lvl]);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(buf))
		n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf) - 1)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	fwrite(buf, 1, (size_t)n, stderr);
}
