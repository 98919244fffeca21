/* pycell: what `pycell serve` tells its operators: the series of
 * /metrics (Prometheus text) and the readiness of /healthz, gathered from
 * the MCP servers (one per policy), the tool bridge and the listener. */
#ifndef PYCELL_SERVE_METRICS_H
#define PYCELL_SERVE_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/prom.h"
#include "bridge/bridge.h"
#include "mcp/mcp.h"
#include "mcp/transport_http.h"

struct ops_policy {
	const char *name;
	const struct mcp_server *srv;
};

/* Every series, appended to p.  http may be NULL (not listening yet). */
void ops_metrics(struct prom *p, const struct ops_policy *ps, size_t n, const struct bridge *b,
		 const struct http_server *http);
/* Ready: every policy's pool of ready jails is up (with warm starts: it
 * made the last one it tried; none ready at the moment is load, not a
 * fault) and every upstream has listed its tools.  Else false and why. */
bool ops_healthy(const struct ops_policy *ps, size_t n, const struct bridge *b, char *why, size_t len);

#endif
