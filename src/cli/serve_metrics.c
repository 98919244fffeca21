/* pycell: /metrics and /healthz of `pycell serve` (serve_metrics.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli/serve_metrics.h"
#include "config/result.h"

/* The gauges of each policy: an unsigned field of struct mcp_stats. */
static const struct {
	const char *name, *help;
	size_t field;
} gauges[] = {
	{ "pycell_runs_running", "Runs in their jails now, by policy.", offsetof(struct mcp_stats, running) },
	{ "pycell_runs_queued", "Runs waiting for a run slot now (the queue depth), by policy.",
	  offsetof(struct mcp_stats, queued) },
	{ "pycell_ready_jails", "Jails made ahead and ready now (warm starts), by policy.",
	  offsetof(struct mcp_stats, ready) },
	{ "pycell_ready_jails_target", "Ready jails the pool keeps (0 without warm starts), by policy.",
	  offsetof(struct mcp_stats, ready_target) },
	{ "pycell_tasks", "Tasks kept (running, or ended and not yet expired), by policy.",
	  offsetof(struct mcp_stats, tasks) },
};

static void runs(struct prom *p, const struct ops_policy *ps, const struct mcp_stats *st, size_t n)
{
	prom_family(p, "pycell_runs_total", "counter", "run_python runs ended, by policy and status.");
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < RUN_STATUS_N; k++)
			prom_sample(p, "pycell_runs_total", (double)st[i].runs[k], "policy", ps[i].name, "status",
				    run_status_name((enum run_status)k), NULL);

	prom_family(p, "pycell_run_duration_seconds", "histogram", "Wall-clock time of ended runs, by policy.");
	for (size_t i = 0; i < n; i++) {
		uint64_t cum = 0;
		for (int b = 0; b < MCP_DURATION_BUCKETS; b++) {
			char le[32];
			cum += st[i].duration[b];
			if (b < MCP_DURATION_BUCKETS - 1)
				snprintf(le, sizeof(le), "%g", mcp_duration_bounds_s[b]);
			else
				snprintf(le, sizeof(le), "+Inf");
			prom_sample(p, "pycell_run_duration_seconds_bucket", (double)cum, "policy", ps[i].name, "le", le,
				    NULL);
		}
		prom_sample(p, "pycell_run_duration_seconds_sum", (double)st[i].duration_ms_sum / 1000, "policy",
			    ps[i].name, NULL);
		prom_sample(p, "pycell_run_duration_seconds_count", (double)cum, "policy", ps[i].name, NULL);
	}

	prom_family(p, "pycell_jail_setup_failures_total", "counter",
		    "Runs whose jail could not be built or started, by policy.");
	for (size_t i = 0; i < n; i++)
		prom_sample(p, "pycell_jail_setup_failures_total",
			    (double)(st[i].runs[RUN_SETUP_FAILED] + st[i].start_failures), "policy", ps[i].name, NULL);
}

void ops_metrics(struct prom *p, const struct ops_policy *ps, size_t n, const struct bridge *b,
		 const struct http_server *http)
{
	struct mcp_stats *st = xcalloc(n ? n : 1, sizeof(*st));
	struct bridge_stats bs;
	struct http_stats hs = { 0 };

	for (size_t i = 0; i < n; i++)
		mcp_server_stats(ps[i].srv, &st[i]);
	bridge_stats(b, &bs);
	if (http)
		http_server_stats(http, &hs);

	prom_family(p, "pycell_build_info", "gauge", "Always 1; the version in a label.");
	prom_sample(p, "pycell_build_info", 1, "version", PACKAGE_VERSION, NULL);
	runs(p, ps, st, n);
	for (size_t g = 0; g < ARRAY_SIZE(gauges); g++) {
		prom_family(p, gauges[g].name, "gauge", gauges[g].help);
		for (size_t i = 0; i < n; i++)
			prom_sample(p, gauges[g].name, *(const unsigned *)((const char *)&st[i] + gauges[g].field),
				    "policy", ps[i].name, NULL);
	}

	prom_family(p, "pycell_denials_total", "counter", "Requests and tool calls refused, by kind: HTTP "
		    "(unauthorized, forbidden, body_too_large, quota, server_full) and the jail's tool calls "
		    "(tool_ and the reason).");
	for (int k = 0; k < HTTP_DENIALS; k++)
		prom_sample(p, "pycell_denials_total", (double)hs.denied[k], "kind", http_denial_names[k], NULL);
	for (int k = 0; k < BRIDGE_DENIAL_REASONS; k++) {
		char kind[64];
		snprintf(kind, sizeof(kind), "tool_%s", bridge_denial_reasons[k]);
		prom_sample(p, "pycell_denials_total", (double)bs.denied[k], "kind", kind, NULL);
	}
	prom_family(p, "pycell_tool_calls_total", "counter", "Tool calls from jails forwarded to an upstream.");
	prom_sample(p, "pycell_tool_calls_total", (double)bs.forwarded, NULL);
	prom_family(p, "pycell_upstream_up", "gauge", "1 when the upstream MCP server has listed its tools, else 0.");
	for (size_t i = 0; i < bridge_n_upstreams(b); i++)
		prom_sample(p, "pycell_upstream_up", bridge_upstream_ready(b, i), "upstream", bridge_upstream_name(b, i),
			    NULL);

	prom_family(p, "pycell_http_requests_total", "counter", "HTTP requests received, every path.");
	prom_sample(p, "pycell_http_requests_total", (double)hs.requests, NULL);
	prom_family(p, "pycell_http_requests_in_flight", "gauge", "MCP requests being answered now.");
	prom_sample(p, "pycell_http_requests_in_flight", hs.pending, NULL);
	prom_family(p, "pycell_http_connections", "gauge", "Open HTTP connections.");
	prom_sample(p, "pycell_http_connections", hs.connections, NULL);
	prom_family(p, "pycell_http_sessions", "gauge", "2025-revision sessions (Mcp-Session-Id) open.");
	prom_sample(p, "pycell_http_sessions", hs.sessions, NULL);
	free(st);
}

bool ops_healthy(const struct ops_policy *ps, size_t n, const struct bridge *b, char *why, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		struct mcp_stats st;
		mcp_server_stats(ps[i].srv, &st);
		if (!st.pool_up) {
			snprintf(why, len, "policy %s: warm starts are not up (no ready jail made yet, or the last "
				 "one failed)", ps[i].name);
			return false;
		}
	}
	for (size_t i = 0; i < bridge_n_upstreams(b); i++) {
		if (!bridge_upstream_ready(b, i)) {
			snprintf(why, len, "upstream %s has not listed its tools", bridge_upstream_name(b, i));
			return false;
		}
	}
	return true;
}
