/* pycell fuzz target: json_scan (src/base/json_scan.c), the checker that
 * decides whether a message jansson refused is JSON after all.  Checks:
 * whatever jansson accepts, json_scan accepts too (it is the wider of the
 * two), with no wide number in it (outside strings, jansson takes a NUL
 * byte for the end of the input and ignores what follows: json_scan,
 * rightly, does not, so texts with a NUL are left out of that check); the spans it reports lie inside the
 * text, and an "id" span is itself one JSON value. */
#include "config.h"

#include <assert.h>
#include <stdint.h>
#include <jansson.h>
#include <string.h>

#include "base/json_scan.h"

static void span_inside(struct json_span s, size_t len)
{
	assert(s.off <= len && s.len <= len - s.off);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct json_scan sc;
	json_t *j = json_loadb(text, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	int rc = json_scan(text, size, &sc);
	if (j && !memchr(text, '\0', size)) {
		assert(rc == 0);
		assert(sc.n_wide == 0);
	}
	if (rc == 0) {
		struct json_scan inner;
		span_inside(sc.id, size);
		span_inside(sc.vars, size);
		assert(sc.n_wide_outside <= sc.n_wide);
		for (size_t i = 0; i < sc.n_wide && i < JSON_SCAN_MAX_WIDE; i++)
			span_inside(sc.wide[i], size);
		if (sc.id.len)
			assert(json_scan(text + sc.id.off, sc.id.len, &inner) == 0);
	}
	json_decref(j);
	return 0;
}
