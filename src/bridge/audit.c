/* pycell: the audit log. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "bridge/audit.h"

struct audit {
	int fd;
	bool own_fd;
	bool warned;
	char *path;
	void (*sink)(const json_t *rec, const char *line);
};

void audit_set_sink(struct audit *a, void (*fn)(const json_t *rec, const char *line))
{
	if (!a->own_fd)
		a->sink = fn;
}

struct audit *audit_open(const char *path, struct pc_err *err)
{
	struct audit *a;
	int fd = 2;
	if (path) {
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
		if (fd < 0) {
			pc_syserr(err, "audit", "audit_log %s", path);
			return NULL;
		}
	}
	a = xcalloc(1, sizeof(*a));
	a->fd = fd;
	a->own_fd = path != NULL;
	a->path = xstrdup(path ? path : "stderr");
	return a;
}

void audit_close(struct audit *a)
{
	if (!a)
		return;
	if (a->own_fd)
		close(a->fd);
	free(a->path);
	free(a);
}

static void now_rfc3339(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
}

void audit_write(struct audit *a, json_t *rec)
{
	char when[96];
	json_t *line = json_object();
	char *text;
	size_t len;
	now_rfc3339(when, sizeof(when));
	json_object_set_new(line, "time", json_string(when));
	json_object_update(line, rec);
	json_decref(rec);
	text = jsonrpc_dump_line(line, &len);
	if (text && a->sink) {
		text[len - 1] = '\0';   /* the newline */
		a->sink(line, text);
		json_decref(line);
		free(text);
		return;
	}
	json_decref(line);
	if (!text)
		return;
	if (write(a->fd, text, len) != (ssize_t)len && !a->warned) {
		a->warned = true;
		log_warn("audit log %s: write failed: %s", a->path, strerror(errno));
	}
	free(text);
}
