/* pycell fuzz target: policy files (src/config/policy*.c).  Checks: a
 * policy that loads survives policy_to_json and back and compares equal
 * (policy_equal decides which zygote may serve it: a field lost on the way
 * would be a security bug), and a refused one says why. */
#include "config.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "config/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct policy p, q;
	struct pc_err err = { 0 };
	memcpy(text, data, size);
	text[size] = '\0';
	if (policy_parse(text, "fuzz.json", &p, &err) == 0) {
		json_t *j = policy_to_json(&p);
		char *again = json_dumps(j, JSON_COMPACT);
		struct pc_err err2 = { 0 };
		assert(again);
		if (policy_parse(again, "fuzz.json", &q, &err2) != 0) {
			fprintf(stderr, "round trip refused: %s\n%s\n", err2.msg, again);
			abort();
		}
		assert(policy_equal(&p, &q));
		policy_free(&q);
		free(again);
		json_decref(j);
		policy_free(&p);
	} else {
		assert(err.msg[0]);
	}
	free(text);
	return 0;
}
