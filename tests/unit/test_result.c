/* pycell: unit tests for the result object (src/config/result.c). */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/result.h"
#include "unit.h"

static json_t *to_json(struct run_result *r)
{
	json_t *j = result_to_json(r);
	ck_assert_ptr_nonnull(j);
	return j;
}

START_TEST(ok_result_shape)
{
	struct run_result r;
	json_t *j;
	result_init(&r);
	r.status = RUN_OK;
	r.exit_code = 0;
	r.out.data = strdup("hi\n");
	r.out.len = 3;
	r.duration_ms = 12;
	r.cpu_ms = 7;
	r.memory_peak_bytes = 8192;
	result_add_limit(&r, "memory", 1 << 20, ENF_CGROUP1);
	result_add_limit(&r, "memory", 2 << 20, ENF_CGROUP2); /* replaces, not appends */
	j = to_json(&r);
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "ok");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "exit_code")), 0);
	ck_assert(json_is_null(json_object_get(j, "signal")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "stdout")), "hi\n");
	ck_assert_str_eq(json_string_value(json_object_get(j, "stderr")), "");
	ck_assert(json_is_false(json_object_get(json_object_get(j, "truncated"), "stdout")));
	ck_assert(json_is_null(json_object_get(j, "return_value")));
	ck_assert_ptr_null(json_object_get(j, "setup_error"));
	ck_assert_ptr_null(json_object_get(j, "dropped_bytes"));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "duration_ms")), 12);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "cpu_ms")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "memory_peak_bytes")), 8192);
	ck_assert_int_eq(json_array_size(json_object_get(j, "limits")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "limits"), 0),
							   "enforced_by")), "cgroup2");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(json_object_get(j, "limits"), 0),
							    "value")), 2 << 20);
	ck_assert_int_eq(result_exit_status(&r), 0);
	json_decref(j);
	result_free(&r);
}
END_TEST

START_TEST(invalid_utf8_is_replaced_and_nul_kept)
{
	static const char raw[] = "a\xff" "b\xc3\x28" "\xe2\x82\xac" "\0z\xed\xa0\x80";
	struct run_result r;
	json_t *j;
	const char *s;
	result_init(&r);
	r.out.data = malloc(sizeof(raw));
	memcpy(r.out.data, raw, sizeof(raw));
	r.out.len = sizeof(raw) - 1;
	j = to_json(&r);
	s = json_string_value(json_object_get(j, "stdout"));
	/* a, U+FFFD, b, U+FFFD, '(', euro, NUL, z, and a lone surrogate: 3 x U+FFFD */
	static const char want[] = "a\xef\xbf\xbd" "b\xef\xbf\xbd(" "\xe2\x82\xac" "\0z"
		"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd";
	ck_assert_uint_eq(json_string_length(json_object_get(j, "stdout")), sizeof(want) - 1);
	ck_assert_mem_eq(s, want, sizeof(want) - 1);
	json_decref(j);
	result_free(&r);
}
END_TEST

START_TEST(exit_statuses)
{
	struct run_result r;
	result_init(&r);
	r.status = RUN_ERROR;
	r.exit_code = 3;
	ck_assert_int_eq(result_exit_status(&r), 3);
	r.exit_code = -1;
	r.signal = SIGSEGV;
	ck_assert_int_eq(result_exit_status(&r), 128 + SIGSEGV);
	r.status = RUN_TIMEOUT;
	ck_assert_int_eq(result_exit_status(&r), 124);
	r.status = RUN_MEMORY_LIMIT;
	ck_assert_int_eq(result_exit_status(&r), 123);
	r.status = RUN_SETUP_FAILED;
	ck_assert_int_eq(result_exit_status(&r), 125);
	r.status = RUN_KILLED;
	ck_assert_int_eq(result_exit_status(&r), 137);
	result_free(&r);
}
END_TEST

START_TEST(setup_error_and_truncation)
{
	struct run_result r;
	json_t *j, *se;
	result_init(&r);
	r.status = RUN_SETUP_FAILED;
	pc_fail(&r.setup_error, 2, "bind", "bind source /nope: No such file or directory");
	r.err.truncated = true;
	r.err.dropped = 5;
	r.return_value = strdup("{\"a\": [1, 2]}");
	result_add_warning(&r, "pids limit %d not enforced", 64);
	j = to_json(&r);
	se = json_object_get(j, "setup_error");
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "setup_failed");
	ck_assert_str_eq(json_string_value(json_object_get(se, "step")), "bind");
	ck_assert_int_eq(json_integer_value(json_object_get(se, "errno")), 2);
	ck_assert_str_eq(json_string_value(json_object_get(se, "errno_name")), "ENOENT");
	ck_assert_str_eq(json_string_value(json_object_get(se, "message")),
			 "bind source /nope: No such file or directory");
	ck_assert(json_is_true(json_object_get(json_object_get(j, "truncated"), "stderr")));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "dropped_bytes"), "stderr")), 5);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(json_object_get(j, "return_value"),
									  "a"), 1)), 2);
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "warnings"), 0)),
			 "pids limit 64 not enforced");
	ck_assert(json_is_null(json_object_get(j, "exit_code")));
	json_decref(j);
	result_free(&r);
}
END_TEST

/* Keep a stream of n bytes made by byte(i) under cap: the result. */
static void feed(struct output_buf *b, uint64_t cap, size_t n, size_t chunk, char (*byte)(size_t))
{
	char *buf = malloc(chunk);
	outbuf_init(b, cap);
	for (size_t off = 0; off < n; off += chunk) {
		size_t k = n - off < chunk ? n - off : chunk;
		for (size_t i = 0; i < k; i++)
			buf[i] = byte(off + i);
		outbuf_append(b, buf, k);
	}
	free(buf);
	outbuf_finish(b, "stdout");
}

static char digit(size_t i) { return (char)('0' + i % 10); }

START_TEST(output_fits_whole)
{
	struct output_buf b;
	feed(&b, 4096, 4096, 100, digit);
	ck_assert(!b.truncated);
	ck_assert_uint_eq(b.len, 4096);
	ck_assert_uint_eq(b.head_len, 2048);   /* what was final as it came */
	ck_assert_uint_eq(b.dropped, 0);
	for (size_t i = 0; i < b.len; i++)
		ck_assert_int_eq(b.data[i], digit(i));
	outbuf_free(&b);
}
END_TEST

/* Past its cap a stream keeps its first half, a marker, and its last
 * bytes: whatever the sizes of the writes (one byte, odd ones, one write
 * bigger than the whole ring). */
START_TEST(output_keeps_head_and_tail)
{
	static const size_t chunks[] = { 1, 7, 100, 4096, 1 << 20 };
	const size_t n = 100000, cap = 4096;
	struct output_buf b;
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		size_t tail_len, head = cap / 2;
		char marker[96];
		feed(&b, cap, n, chunks[c], digit);
		ck_assert(b.truncated);
		ck_assert_uint_le(b.len, cap);
		ck_assert_uint_eq(b.head_len, head);
		for (size_t i = 0; i < head; i++)
			ck_assert_int_eq(b.data[i], digit(i));
		snprintf(marker, sizeof(marker), "\n[... pycell: %llu bytes of stdout dropped here ...]\n",
			 (unsigned long long)b.dropped);
		ck_assert_int_eq(memcmp(b.data + head, marker, strlen(marker)), 0);
		tail_len = b.len - head - strlen(marker);
		ck_assert_uint_eq(tail_len, cap - head - OUTBUF_MARKER_MAX);
		/* what was dropped is exactly what is not kept */
		ck_assert_uint_eq(head + tail_len + b.dropped, n);
		for (size_t i = 0; i < tail_len; i++)
			ck_assert_int_eq(b.data[head + strlen(marker) + i], digit(n - tail_len + i));
		ck_assert_int_eq(b.data[b.len], '\0');
		outbuf_free(&b);
	}
}
END_TEST

static char euro(size_t i) { return "\xe2\x82\xac"[i % 3]; }

/* The cuts on both sides of the marker fall between characters. */
START_TEST(output_cuts_whole_characters)
{
	struct output_buf b;
	json_t *s;
	feed(&b, 2048, 30000, 13, euro);
	ck_assert(b.truncated);
	ck_assert_uint_eq(b.head_len % 3, 0);
	ck_assert_int_eq((unsigned char)b.data[b.len - 1], 0xac);
	s = json_stringn(b.data, b.len);   /* NULL for invalid UTF-8 */
	ck_assert_ptr_nonnull(s);
	json_decref(s);
	outbuf_free(&b);
}
END_TEST

/* A small cap keeps the head only, as before there was a tail. */
START_TEST(output_small_cap_keeps_head)
{
	struct output_buf b;
	feed(&b, 100, 1000, 64, digit);
	ck_assert(b.truncated);
	ck_assert_uint_eq(b.len, 100);
	ck_assert_uint_eq(b.dropped, 900);
	ck_assert_int_eq(b.data[99], digit(99));
	outbuf_free(&b);
}
END_TEST

Suite *result_suite(void)
{
	Suite *s = suite_create("result");
	TCase *t = tcase_create("result");
	tcase_add_test(t, ok_result_shape);
	tcase_add_test(t, invalid_utf8_is_replaced_and_nul_kept);
	tcase_add_test(t, exit_statuses);
	tcase_add_test(t, setup_error_and_truncation);
	tcase_add_test(t, output_fits_whole);
	tcase_add_test(t, output_keeps_head_and_tail);
	tcase_add_test(t, output_cuts_whole_characters);
	tcase_add_test(t, output_small_cap_keeps_head);
	suite_add_tcase(s, t);
	return s;
}
