/* pycell: compact JSON text of a jansson value in one pass (the bytes of
 * json_dumpb(v, JSON_COMPACT | JSON_ENCODE_ANY)), fast for long strings. */
#ifndef PYCELL_JSON_OUT_H
#define PYCELL_JSON_OUT_H

#include <jansson.h>
#include <stddef.h>

/* The text of v followed by `end` (NULL: nothing), NUL-terminated, its
 * length (without the NUL) in *len; the caller frees it.  NULL for NULL. */
char *json_out(const json_t *v, const char *end, size_t *len);

#endif
