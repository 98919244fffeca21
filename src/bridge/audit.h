/* pycell: the audit log, one JSON object per line (man pycell.conf(5),
 * "audit_log"): a record per run and per denied tool call. */
#ifndef PYCELL_AUDIT_H
#define PYCELL_AUDIT_H

#include <jansson.h>
#include <stddef.h>

#include "base/util.h"

struct audit;

/* Append to `path` (created 0600), or write to stderr when path is NULL. */
struct audit *audit_open(const char *path, struct pc_err *err);
void audit_close(struct audit *a);
/* Records of an audit log on stderr go to fn instead (the journal:
 * cli/systemd.h), as the record and as its line (no newline). */
void audit_set_sink(struct audit *a, void (*fn)(const json_t *rec, const char *line));
/* Write `rec` (stolen) as one line, with "time" (RFC 3339, UTC, ms) first.
 * One write(2) per line on an O_APPEND file, so lines from several
 * supervisors sharing the file never interleave. */
void audit_write(struct audit *a, json_t *rec);

#endif
