/* pycell fuzz target: the HTTP front end (src/mcp/transport_http.c on
 * libmicrohttpd), what a network peer of `pycell serve` sends.  Each input
 * is the bytes of one connection: written to the server's unix socket,
 * then the client stops writing and reads until the server closes.
 * Checks beyond "no crash": whatever came back is HTTP (every answer
 * begins with a status line), the connection is closed within the
 * loop's budget (no request left hanging), and every 64 inputs a fresh
 * well-formed request is still answered 200 (the server keeps serving).
 *
 * Runs cannot start here: the fault site "clone" fails every jail before
 * it exists, so a tools/call is answered setup_failed. */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/loop.h"
#include "config/tokens.h"
#include "jail/seccomp.h"
#include "mcp/mcp.h"
#include "mcp/transport_http.h"
#include "run/run.h"

static struct loop *l;
static struct run_env env;
static struct mcp_server *server;
static struct http_server *http;
static struct tokens toks;
static char sock_path[108];

static struct mcp_server *server_for(void *ctx, const struct token *t)
{
	(void)ctx;
	(void)t;
	return server;
}

static char sock_dir[] = "/tmp/pycell-fuzz-http-XXXXXX";

/* at libFuzzer's exit (its time is up): the socket and its directory */
static void remove_sock_dir(void)
{
	unlink(sock_path);
	rmdir(sock_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct pc_err err = { 0 };
	struct mcp_server_config cfg = { .max_runs = 2 };
	struct http_config hcfg = { 0 };
	static char listen[120];
	(void)argc;
	(void)argv;
	setenv("PYCELL_FAULT", "clone", 1);
	fault_init();
	if (!fault_at("clone") || !mkdtemp(sock_dir)) {
		fprintf(stderr, "fuzz_http: built without the fault sites, or no temp dir\n");
		abort();
	}
	snprintf(sock_path, sizeof(sock_path), "%s/s", sock_dir);
	atexit(remove_sock_dir);
	snprintf(listen, sizeof(listen), "unix:%s", sock_path);
	/* one token, so that Authorization headers meet a real check */
	if (tokens_parse("{\"tokens\": [{\"name\": \"f\", \"sha256\": "
			 "\"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\"}]}", "fuzz", &toks,
			 &err) < 0)
		abort();
	l = loop_new();
	if (!l || run_env_load(&env, "default", &err) < 0 ||
	    seccomp_filter_compile(&env.policy, &env.filter, &err) < 0) {
		fprintf(stderr, "fuzz_http: %s\n", err.msg);
		abort();
	}
	env.runtime_dir = xasprintf("%s/runtime", getenv("PYCELL_DATADIR") ? getenv("PYCELL_DATADIR") : ".");
	server = mcp_server_new(l, &env, &cfg, &err);
	hcfg.listen = listen;
	hcfg.tokens = &toks;
	hcfg.max_body = 64 * 1024;
	hcfg.max_connections = 64;
	hcfg.request_timeout_s = 2;
	hcfg.max_sessions = 16;
	hcfg.session_idle_ms = 60000;
	hcfg.max_pending = 64;
	hcfg.server_for = server_for;
	if (!server || !(http = http_server_new(l, &hcfg, &err))) {
		fprintf(stderr, "fuzz_http: %s\n", err.msg);
		abort();
	}
	return 0;
}

/* Send data on a new connection; what came back (NUL-terminated), and
 * whether the server closed it. */
static char *exchange(const uint8_t *data, size_t size, size_t *out_len, bool *closed)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	size_t off = 0, len = 0, cap = 4096;
	char *out = malloc(cap);
	bool shut = false;
	/* by wall time, not by rounds: a busy machine is slow, not wrong */
	uint64_t deadline = now_ms() + 3000;
	*closed = false;
	strcpy(a.sun_path, sock_path);
	assert(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	while (!*closed && now_ms() < deadline) {
		ssize_t n;
		if (off < size) {
			n = write(fd, data + off, size - off);
			if (n > 0)
				off += (size_t)n;
			else if (n < 0 && errno != EAGAIN)
				off = size;   /* the server closed early: fine */
		}
		if (off == size && !shut) {
			shutdown(fd, SHUT_WR);   /* an empty input too: the client is done */
			shut = true;
		}
		loop_run_once(l, off < size ? 0 : 5);
		for (;;) {
			if (len + 4096 > cap)
				out = realloc(out, cap *= 2);
			n = read(fd, out + len, cap - len - 1);
			if (n > 0) {
				len += (size_t)n;
				continue;
			}
			if (n == 0 || (n < 0 && errno != EAGAIN))
				*closed = true;
			break;
		}
	}
	close(fd);
	out[len] = '\0';
	*out_len = len;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned count;
	static const char body[] =
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
		"protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}";
	char good[512];
	size_t len;
	bool closed;
	char *out;

	if (size > 65536)
		return 0;
	out = exchange(data, size, &len, &closed);
	if (len && strncmp(out, "HTTP/1.", 7) != 0) {
		fprintf(stderr, "not an HTTP answer: %.200s\n", out);
		abort();
	}
	if (!closed) {
		fprintf(stderr, "the connection was not closed after the client stopped writing\n");
		abort();
	}
	free(out);
	if (++count % 64 == 0) {
		snprintf(good, sizeof(good), "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
			 "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
		out = exchange((const uint8_t *)good, strlen(good), &len, &closed);
		if (strncmp(out, "HTTP/1.1 200", 12) != 0) {
			fprintf(stderr, "the server stopped serving: %.300s\n", out);
			abort();
		}
		free(out);
	}
	return 0;
}
