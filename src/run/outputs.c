/* pycell: what a cell sends back besides its value (outputs.h). */
#include "config.h"

#include <string.h>

#include "base/util.h"
#include "run/outputs.h"

void blob_rx_reset(struct blob_rx *b)
{
	json_decref(b->meta);
	free(b->b64);
	memset(b, 0, sizeof(*b));
}

/* A MIME type as the jail names it: type/subtype of token characters. */
static const char *mime_or_default(const json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = s ? strlen(s) : 0, slash = s ? strcspn(s, "/") : 0;
	static const char tok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$&^_.+-";
	if (!s || n > 100 || json_string_length(v) != n || slash == 0 || slash >= n - 1 ||
	    strspn(s, tok) != slash || strspn(s + slash + 1, tok) != n - slash - 1)
		return "application/octet-stream";
	return s;
}

static size_t outputs_bytes(const json_t *list, const char *key)
{
	size_t sum = 0, i;
	json_t *e;
	json_array_foreach(list, i, e)
		if (json_object_get(e, "data"))
			sum += (size_t)json_integer_value(json_object_get(e, key));
	return sum;
}

/* A whole blob came: kept in the result, if it is what a cell may send and
 * within the caps; otherwise a warning says what was not kept. */
static void blob_done(struct blob_rx *b, struct run_result *res)
{
	static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
	const char *kind = json_string_value(json_object_get(b->meta, "kind"));
	const char *text = b->b64 ? b->b64 : "";
	size_t size = 0;
	/* standard base64, as clients take it in image content and blobs */
	char *raw = b->refused || strspn(text, b64_chars) != b->len ? NULL : b64_decode(text, b->len, &size);
	json_t *data = raw ? json_stringn(text, b->len) : NULL;

	free(raw);
	if (kind && strcmp(kind, "image") == 0) {
		const char *src = json_string_value(json_object_get(b->meta, "source"));
		size_t n = res->images ? json_array_size(res->images) : 0;
		if (!data || size > RESULT_IMAGE_BYTES || n >= RESULT_IMAGES_MAX ||
		    outputs_bytes(res->images, "bytes") + size > RESULT_IMAGES_BYTES ||
		    !str_eq(json_string_value(json_object_get(b->meta, "mime")), "image/png")) {
			result_add_warning(res, "an image was not kept: at most %d a cell, %d MiB each and %d "
					   "MiB in all, as PNG", RESULT_IMAGES_MAX, RESULT_IMAGE_BYTES >> 20,
					   RESULT_IMAGES_BYTES >> 20);
			json_decref(data);
		} else {
			if (!res->images)
				res->images = json_array();
			json_array_append_new(res->images, json_pack("{s:s,s:s,s:I,s:o}", "mime_type", "image/png",
				"source", src && strlen(src) <= 64 ? src : "image", "bytes", (json_int_t)size,
				"data", data));
		}
	} else if (kind && strcmp(kind, "file") == 0) {
		json_t *path = json_object_get(b->meta, "path"), *omitted = json_object_get(b->meta, "omitted");
		json_t *size_v = json_object_get(b->meta, "size");
		json_t *e;
		if (!json_is_string(path) ||
		    rel_path_problem(json_string_value(path), json_string_length(path), RESULT_PATH_MAX) ||
		    (res->files && json_array_size(res->files) >= RESULT_FILES_MAX)) {
			json_decref(data);
			goto out;
		}
		if (json_is_true(json_object_get(b->meta, "deleted"))) {
			e = json_pack("{s:O,s:b}", "path", path, "deleted", 1);
			json_decref(data);
		} else if (omitted || !data ||
			   outputs_bytes(res->files, "size") + size > RESULT_FILES_BYTES) {
			e = json_pack("{s:O,s:I,s:s,s:s}", "path", path, "size",
				      (json_int_t)(json_is_integer(size_v) && json_integer_value(size_v) >= 0
						   ? json_integer_value(size_v) : (json_int_t)size),
				      "mime_type", mime_or_default(json_object_get(b->meta, "mime")), "omitted", "size");
			json_decref(data);
		} else {
			e = json_pack("{s:O,s:I,s:s,s:o}", "path", path, "size", (json_int_t)size, "mime_type",
				      mime_or_default(json_object_get(b->meta, "mime")), "data", data);
		}
		if (!res->files)
			res->files = json_array();
		json_array_append_new(res->files, e);
	} else {
		json_decref(data);
	}
out:
	blob_rx_reset(b);
}

/* A blob is capped as it comes: what passes the cap is read and dropped. */
void blob_rx_packet(struct blob_rx *b, struct run_result *res, json_t *params)
{
	json_t *data = json_object_get(params, "data");
	size_t n = json_string_length(data);

	if (!json_is_string(data))
		return;
	json_incref(data);
	if (!b->meta) {
		b->meta = json_incref(params);
		json_object_del(params, "data");
	}
	if (b->len + n > (size_t)RESULT_FILES_BYTES / 3 * 4 + 4)
		b->refused = true;
	if (!b->refused) {
		if (b->len + n + 1 > b->cap) {
			b->cap = (b->len + n + 1) * 2;
			b->b64 = xrealloc(b->b64, b->cap);
		}
		memcpy(b->b64 + b->len, json_string_value(data), n);
		b->len += n;
		b->b64[b->len] = '\0';
	}
	json_decref(data);
	if (!json_is_true(json_object_get(params, "more")))
		blob_done(b, res);
}
