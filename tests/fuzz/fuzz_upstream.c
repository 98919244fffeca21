/* pycell fuzz target: the upstream MCP client's reader (src/bridge/
 * upstream.c), what an upstream server writes on its stdout.  The input is
 * that output: a real process (cat of the input) plays the server, so
 * the bytes arrive through the real pipe, line reader, handshake
 * (initialize is id 1, tools/list id 2) and calls.  A call is made as
 * soon as the client is started.  Checks: the call is answered exactly
 * once, whatever the server wrote, by the time the server has gone (its
 * timeout is short); freeing the client afterwards answers nothing twice. */
#include "config.h"

#include <assert.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/loop.h"
#include "bridge/upstream.h"
#include "config/conf.h"

static struct loop *l;
static char input_path[64];

struct answer {
	int n;
	enum upstream_status st;
};

static void on_reply(void *ctx, enum upstream_status st, json_t *result, const char *message)
{
	struct answer *a = ctx;
	(void)result;
	(void)message;
	a->n++;
	a->st = st;
	assert(a->n == 1);
}

/* at libFuzzer's exit (its time is up): the last input's file */
static void remove_input(void)
{
	unlink(input_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN); /* as main() does: a server gone mid-write is an EPIPE */
	l = loop_new();
	snprintf(input_path, sizeof(input_path), "/tmp/pycell-fuzz-upstream-%d", (int)getpid());
	atexit(remove_input);
	return l ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[] = { "/bin/cat", input_path, NULL };
	struct upstream_conf c = { .name = (char *)"fuzz", .argv = argv, .argc = 2, .timeout_ms = 30 };
	struct pc_err err = { 0 };
	struct answer a = { 0 };
	struct upstream *u;
	json_t *args = json_object();
	FILE *f = fopen(input_path, "w");
	uint64_t id, deadline;

	if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	u = upstream_new(l, &c, NULL, NULL);
	assert(u);
	if (upstream_start(u, &err) < 0) {
		upstream_free(u);
		json_decref(args);
		return 0;
	}
	id = upstream_call(u, "echo", args, on_reply, &a, &err);
	deadline = now_ms() + 2000;
	while (id && a.n == 0 && now_ms() < deadline)
		loop_run_once(l, 20);
	if (id)
		assert(a.n == 1);
	upstream_free(u);
	assert(a.n == (id ? 1 : 0));
	json_decref(args);
	return 0;
}
