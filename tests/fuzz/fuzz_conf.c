/* pycell fuzz target: the configuration file (src/config/conf.c).  Checks:
 * it loads or says why, and what loads frees cleanly (ASan). */
#include "config.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "config/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct pycell_conf c;
	struct pc_err err = { 0 };
	memcpy(text, data, size);
	text[size] = '\0';
	if (conf_parse(text, "fuzz.conf", &c, &err) == 0)
		conf_free(&c);
	else
		assert(err.msg[0]);
	free(text);
	return 0;
}
