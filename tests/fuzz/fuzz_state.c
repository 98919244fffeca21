/* pycell fuzz target: a paused session's record (src/run/state.c), read
 * from the state directory as untrusted input.  Checks: it parses or says
 * why; what parses is a valid id, and formats to text that parses to the
 * same record (ASan: and frees cleanly). */
#include "config.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "run/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct state_record r, again;
	struct pc_err err = { 0 };
	char *text;

	if (state_record_parse((const char *)data, size, &r, &err) < 0) {
		assert(err.msg[0]);
		return 0;
	}
	assert(state_id_ok(r.id));
	text = state_record_format(&r);
	assert(text);
	memset(&err, 0, sizeof(err));
	assert(state_record_parse(text, strlen(text), &again, &err) == 0);
	assert(strcmp(again.id, r.id) == 0 && r.bytes == again.bytes && r.cells == again.cells &&
	       r.lived_ms == again.lived_ms && json_equal(r.not_kept, again.not_kept));
	assert((!r.owner && !again.owner) || (r.owner && again.owner && strcmp(r.owner, again.owner) == 0));
	state_record_free(&again);
	state_record_free(&r);
	free(text);
	return 0;
}
