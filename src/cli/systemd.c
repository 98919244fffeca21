/* pycell: `pycell serve` under systemd (systemd.h), through libsystemd,
 * opened at run time (configure.ac says why). */
#include "config.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "base/log.h"
#include "cli/systemd.h"

/* Last: sd-journal.h brings syslog.h, whose LOG_INFO and LOG_DEBUG macros
 * shadow base/log.h's levels (this file uses neither). */
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

/* The functions of libsystemd used here, by their own prototypes. */
static struct {
	bool tried, ok;
	__typeof__(sd_listen_fds) *listen_fds;
	__typeof__(sd_is_socket) *is_socket;
	__typeof__(sd_notify) *notify;
	__typeof__(sd_watchdog_enabled) *watchdog_enabled;
	__typeof__(sd_journal_send) *journal_send;
} sd;

/* Open libsystemd once; false (and a warning where systemd is waiting
 * for it) when it cannot be.  Not at all outside systemd (none of its
 * variables set): it and the six libraries it brings would be mapped in
 * every jail's clone of the supervisor (35 more mappings), their page
 * tables copied at every cold start. */
static bool sd_open(void)
{
	void *lib;
	if (sd.tried)
		return sd.ok;
	sd.tried = true;
	if (!getenv("NOTIFY_SOCKET") && !getenv("LISTEN_FDS") && !getenv("JOURNAL_STREAM"))
		return false;
	lib = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
	if (lib) {
		sd.listen_fds = (__typeof__(sd.listen_fds))dlsym(lib, "sd_listen_fds");
		sd.is_socket = (__typeof__(sd.is_socket))dlsym(lib, "sd_is_socket");
		sd.notify = (__typeof__(sd.notify))dlsym(lib, "sd_notify");
		sd.watchdog_enabled = (__typeof__(sd.watchdog_enabled))dlsym(lib, "sd_watchdog_enabled");
		sd.journal_send = (__typeof__(sd.journal_send))dlsym(lib, "sd_journal_send");
	}
	sd.ok = lib && sd.listen_fds && sd.is_socket && sd.notify && sd.watchdog_enabled && sd.journal_send;
	if (!sd.ok && (getenv("NOTIFY_SOCKET") || getenv("LISTEN_FDS")))
		fprintf(stderr, "pycell: warning: serve: started by systemd, but libsystemd.so.0 would not load (%s): "
			"nothing is said to it\n", lib ? "a function is missing" : dlerror());
	return sd.ok;
}

int service_listen_fd(struct pc_err *err)
{
	int n = sd_open() ? sd.listen_fds(1) : 0;
	if (n < 0)
		return pc_fail(err, -n, "listen", "the sockets systemd passed: %s", strerror(-n));
	if (n == 0)
		return 0;
	if (n > 1)
		return pc_fail(err, EINVAL, "listen", "systemd passed %d sockets; pycell serve takes one (one "
			       "ListenStream= in pycell.socket)", n);
	if (sd.is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 1) <= 0)
		return pc_fail(err, EINVAL, "listen", "the socket systemd passed is not a listening stream socket");
	return SD_LISTEN_FDS_START;
}

void service_notify(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (sd_open())
		sd.notify(0, buf);
}

void service_notify_reloading(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	service_notify("RELOADING=1\nMONOTONIC_USEC=%llu",
		       (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
}

uint64_t service_watchdog_usec(void)
{
	uint64_t usec = 0;
	return sd_open() && sd.watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

static void journal_log(enum log_level lvl, const char *msg)
{
	static const int prio[] = { 3, 4, 6, 7 };   /* syslog's err, warning, info, debug */
	sd.journal_send("MESSAGE=pycell: %s", msg, "PRIORITY=%d", prio[lvl], "SYSLOG_IDENTIFIER=pycell", NULL);
}

static const char *field(const json_t *rec, const char *key)
{
	const char *v = json_string_value(json_object_get(rec, key));
	return v ? v : "";
}

static void journal_audit(const json_t *rec, const char *line)
{
	sd.journal_send("MESSAGE=%s", line, "PRIORITY=6", "SYSLOG_IDENTIFIER=pycell",
			"PYCELL_EVENT=%s", field(rec, "event"), "PYCELL_RUN_ID=%s", field(rec, "run"),
			"PYCELL_CLIENT=%s", field(rec, "client"), "PYCELL_POLICY=%s", field(rec, "policy"),
			"PYCELL_STATUS=%s", field(rec, "status"), NULL);
}

/* JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd connected to
 * stdout and stderr: stderr is the journal when they match. */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	return js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
	       (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

bool service_use_journal(struct bridge *b)
{
	if (!stderr_is_journal() || !sd_open())
		return false;
	log_sink = journal_log;
	bridge_audit_sink(b, journal_audit);
	return true;
}
