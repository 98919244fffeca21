/* pycell: unit tests for the result object (src/config/result.c). */
#include "config.h"

#include <signal.h>
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

Suite *result_suite(void)
{
	Suite *s = suite_create("result");
	TCase *t = tcase_create("result");
	tcase_add_test(t, ok_result_shape);
	tcase_add_test(t, invalid_utf8_is_replaced_and_nul_kept);
	tcase_add_test(t, exit_statuses);
	tcase_add_test(t, setup_error_and_truncation);
	suite_add_tcase(s, t);
	return s;
}
