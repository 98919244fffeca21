/* pycell: `pycell serve` under systemd (contrib/systemd/): the socket it
 * was passed (socket activation), what it tells the service manager
 * (READY, RELOADING, STOPPING, STATUS, the watchdog), and logs and audit
 * records as journal entries with fields of their own.  Outside systemd
 * each of these is a no-op. */
#ifndef PYCELL_SYSTEMD_H
#define PYCELL_SYSTEMD_H

#include <stdint.h>

#include "base/util.h"
#include "bridge/bridge.h"

/* The listening socket systemd passed (fd 3), 0 when it passed none, -1
 * with err when it passed more than one or something else. */
int service_listen_fd(struct pc_err *err);
/* sd_notify(3) with a printf format: "READY=1", "STOPPING=1", ... */
void service_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* RELOADING=1 with the MONOTONIC_USEC systemd asks of a reload. */
void service_notify_reloading(void);
/* The watchdog interval systemd set (WATCHDOG_USEC), 0 without one. */
uint64_t service_watchdog_usec(void);
/* When stderr is the journal's stream (JOURNAL_STREAM): logs, and the
 * audit records of b, go to the journal as entries with fields
 * (PRIORITY; PYCELL_EVENT, PYCELL_RUN_ID, PYCELL_CLIENT, PYCELL_POLICY,
 * PYCELL_STATUS for a record).  Returns whether they do. */
bool service_use_journal(struct bridge *b);

#endif
