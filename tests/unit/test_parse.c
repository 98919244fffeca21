/* pycell: unit tests for parse_size and parse_duration_ms (src/base/util.c). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "base/json_out.h"
#include "base/json_scan.h"
#include "base/prom.h"
#include "base/util.h"

static const char size_syntax[] = "expected a size such as 4096, 64K, 512M or 2G";
static const char size_unit[] = "unknown unit (use K, M, G or T)";
static const char size_trailing[] = "trailing characters after the size";
static const char size_large[] = "size too large";

static const char dur_syntax[] = "expected seconds such as 30, 2.5, 500ms or 2m";
static const char dur_unit[] = "unknown unit (use ms, s, m or h)";
static const char dur_large[] = "duration too large";

static const struct { const char *in; uint64_t out; } good_sizes[] = {
	{ "0", 0 },
	{ "1", 1 },
	{ "4096", 4096 },
	{ "007", 7 },
	{ "1k", 1024 },
	{ "1K", 1024 },
	{ "64K", 65536 },
	{ "64KiB", 65536 },
	{ "64KB", 65536 },
	{ "64kb", 65536 },
	{ "1m", 1048576 },
	{ "512M", 536870912 },
	{ "512Mi", 536870912 },
	{ "2G", 2147483648ULL },
	{ "1g", 1073741824 },
	{ "1T", 1099511627776ULL },
	{ "1.5G", 1610612736 },
	{ "0.5K", 512 },
	{ "1.25K", 1280 },
	{ "1.5", 1 },                       /* fractions of a byte are dropped */
	{ "16777215T", 18446742974197923840ULL },
};

static const struct { const char *in; const char *why; } bad_sizes[] = {
	{ "", size_syntax },
	{ "-1", size_syntax },
	{ "+1", size_syntax },
	{ " 1", size_syntax },
	{ ".5", size_syntax },
	{ "1.", size_syntax },
	{ "1..2", size_syntax },
	{ "M", size_syntax },
	{ "lots", size_syntax },
	{ "1 ", size_unit },
	{ "1 K", size_unit },
	{ "10B", size_unit },
	{ "1iB", size_unit },
	{ "1e3", size_unit },
	{ "0x10", size_unit },
	{ "1P", size_unit },
	{ "1,5K", size_unit },
	{ "1KK", size_trailing },
	{ "1K ", size_trailing },
	{ "1KiBx", size_trailing },
	{ "1Mii", size_trailing },
	{ "16777216T", size_large },
	{ "17179869184G", size_large },
	{ "18446744073709551615", size_large },
	{ "99999999999999999999999", size_large },
};

START_TEST(test_size_good)
{
	uint64_t v = 12345;
	struct pc_err e = { 0 };
	ck_assert_msg(parse_size(good_sizes[_i].in, &v, &e) == 0, "\"%s\": %s", good_sizes[_i].in, e.msg);
	ck_assert_msg(v == good_sizes[_i].out, "\"%s\" gave %ju, expected %ju", good_sizes[_i].in,
		      (uintmax_t)v, (uintmax_t)good_sizes[_i].out);
}
END_TEST

START_TEST(test_size_bad)
{
	uint64_t v = 12345;
	struct pc_err e = { 0 };
	char want[sizeof(e.msg)];
	ck_assert_msg(parse_size(bad_sizes[_i].in, &v, &e) == -1, "\"%s\" was accepted as %ju",
		      bad_sizes[_i].in, (uintmax_t)v);
	snprintf(want, sizeof(want), "%s, got \"%s\"", bad_sizes[_i].why, bad_sizes[_i].in);
	ck_assert_msg(strcmp(e.msg, want) == 0, "\"%s\": got \"%s\", expected \"%s\"",
		      bad_sizes[_i].in, e.msg, want);
	ck_assert_str_eq(e.step, "parse");
	ck_assert_int_eq(e.errnum, EINVAL);
	ck_assert_msg(v == 12345, "\"%s\": output written on failure", bad_sizes[_i].in);
}
END_TEST

START_TEST(test_size_null)
{
	uint64_t v = 7;
	struct pc_err e = { 0 };
	char want[sizeof(e.msg)];
	ck_assert_int_eq(parse_size(NULL, &v, &e), -1);
	snprintf(want, sizeof(want), "%s, got \"\"", size_syntax);
	ck_assert_str_eq(e.msg, want);
	ck_assert_uint_eq(v, 7);
}
END_TEST

static const struct { const char *in; uint64_t out; } good_durations[] = {
	{ "0", 0 },
	{ "10", 10000 },
	{ "2.5", 2500 },
	{ "30s", 30000 },
	{ "0.25s", 250 },
	{ "250ms", 250 },
	{ "1.5ms", 2 },          /* rounded to the nearest millisecond */
	{ "0.0004", 0 },
	{ "0.0005", 1 },
	{ "1m", 60000 },
	{ "1min", 60000 },
	{ "2.5m", 150000 },
	{ "1h", 3600000 },
	{ "24h", 86400000 },
	{ "1000000000000000ms", 1000000000000000ULL },
};

static const struct { const char *in; const char *why; } bad_durations[] = {
	{ "", dur_syntax },
	{ "-1", dur_syntax },
	{ "+1", dur_syntax },
	{ " 1", dur_syntax },
	{ ".5", dur_syntax },
	{ "1.", dur_syntax },
	{ "ms", dur_syntax },
	{ "soon", dur_syntax },
	{ "1 s", dur_unit },
	{ "1S", dur_unit },
	{ "1MS", dur_unit },
	{ "1sec", dur_unit },
	{ "1d", dur_unit },
	{ "1mss", dur_unit },
	{ "1ms ", dur_unit },
	{ "1.5.2", dur_unit },
	{ "1e3", dur_unit },
	{ "1000000000001s", dur_large },
	{ "277777778h", dur_large },
};

START_TEST(test_duration_good)
{
	uint64_t v = 12345;
	struct pc_err e = { 0 };
	ck_assert_msg(parse_duration_ms(good_durations[_i].in, &v, &e) == 0, "\"%s\": %s",
		      good_durations[_i].in, e.msg);
	ck_assert_msg(v == good_durations[_i].out, "\"%s\" gave %ju ms, expected %ju", good_durations[_i].in,
		      (uintmax_t)v, (uintmax_t)good_durations[_i].out);
}
END_TEST

START_TEST(test_duration_bad)
{
	uint64_t v = 12345;
	struct pc_err e = { 0 };
	char want[sizeof(e.msg)];
	ck_assert_msg(parse_duration_ms(bad_durations[_i].in, &v, &e) == -1, "\"%s\" was accepted as %ju",
		      bad_durations[_i].in, (uintmax_t)v);
	snprintf(want, sizeof(want), "%s, got \"%s\"", bad_durations[_i].why, bad_durations[_i].in);
	ck_assert_msg(strcmp(e.msg, want) == 0, "\"%s\": got \"%s\", expected \"%s\"",
		      bad_durations[_i].in, e.msg, want);
	ck_assert_str_eq(e.step, "parse");
	ck_assert_int_eq(e.errnum, EINVAL);
	ck_assert_msg(v == 12345, "\"%s\": output written on failure", bad_durations[_i].in);
}
END_TEST

START_TEST(test_duration_null)
{
	uint64_t v = 7;
	struct pc_err e = { 0 };
	char want[sizeof(e.msg)];
	ck_assert_int_eq(parse_duration_ms(NULL, &v, &e), -1);
	snprintf(want, sizeof(want), "%s, got \"\"", dur_syntax);
	ck_assert_str_eq(e.msg, want);
	ck_assert_uint_eq(v, 7);
}
END_TEST

/* /proc/self/mountinfo lines (proc(5)): any number of optional fields
 * before "-" (a cgroup mount with three was skipped when the parser kept
 * at most twelve fields), escapes in paths, and malformed lines. */
static const struct {
	const char *line;
	const char *root, *point, *fstype, *super;   /* NULL root: refused */
} mountinfo[] = {
	{ "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate",
	  "/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate" },
	/* 13 fields: three optional tags */
	{ "36 35 0:31 / /sys/fs/cgroup/memory rw,nosuid shared:16 master:2 propagate_from:3 - cgroup cgroup rw,memory",
	  "/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory" },
	/* no optional field at all */
	{ "40 1 0:40 /a /b rw - tmpfs tmpfs rw,size=64k", "/a", "/b", "tmpfs", "rw,size=64k" },
	{ "41 1 0:41 /with\\040space /mnt/x\\134y rw - ext4 /dev/sda1 rw", "/with space", "/mnt/x\\y", "ext4", "rw" },
	{ "42 1 0:42 / /x rw shared:1", NULL, NULL, NULL, NULL },       /* no "-" */
	{ "43 1 0:43 / /x rw - cgroup cgroup", NULL, NULL, NULL, NULL }, /* no super options */
	{ "44 1 0:44 /", NULL, NULL, NULL, NULL },
	{ "", NULL, NULL, NULL, NULL },
};

START_TEST(test_mountinfo_line)
{
	char *line = xstrdup(mountinfo[_i].line);
	struct mountinfo m;
	int rc = mountinfo_parse_line(line, &m);
	if (!mountinfo[_i].root) {
		ck_assert_int_eq(rc, -1);
	} else {
		ck_assert_int_eq(rc, 0);
		ck_assert_str_eq(m.root, mountinfo[_i].root);
		ck_assert_str_eq(m.point, mountinfo[_i].point);
		ck_assert_str_eq(m.fstype, mountinfo[_i].fstype);
		ck_assert_str_eq(m.super_opts, mountinfo[_i].super);
		free(m.root);
		free(m.point);
	}
	free(line);
}
END_TEST

/* Cutting a message at a byte count keeps whole characters (é is 2
 * bytes, € 3, 😀 4): a name of 63 ASCII bytes and an é, cut at 64, keeps
 * the 63. */
START_TEST(test_utf8_cuts)
{
	char s[128];
	memset(s, 'a', 63);
	strcpy(s + 63, "\xc3\xa9z");
	ck_assert_int_eq(utf8_prefix(s, 64), 63);
	ck_assert_int_eq(utf8_prefix(s, 65), 65);
	ck_assert_int_eq(utf8_prefix(s, 200), 66);
	ck_assert_int_eq(utf8_prefix("\xe2\x82\xac", 1), 0);
	ck_assert_int_eq(utf8_prefix("\xe2\x82\xac", 2), 0);
	ck_assert_int_eq(utf8_prefix("\xe2\x82\xac", 3), 3);
	ck_assert_int_eq(utf8_prefix("x\xf0\x9f\x98\x80", 4), 1);
	strcpy(s, "ab\xc3");
	utf8_trim_tail(s);
	ck_assert_str_eq(s, "ab");
	strcpy(s, "ab\xe2\x82");
	utf8_trim_tail(s);
	ck_assert_str_eq(s, "ab");
	strcpy(s, "ab\xe2\x82\xac");
	utf8_trim_tail(s);
	ck_assert_str_eq(s, "ab\xe2\x82\xac");
	strcpy(s, "\xf0\x9f\x98");
	utf8_trim_tail(s);
	ck_assert_str_eq(s, "");
	strcpy(s, "plain");
	utf8_trim_tail(s);
	ck_assert_str_eq(s, "plain");
}
END_TEST

/* json_scan: JSON texts jansson refuses for their numbers alone. */
START_TEST(test_json_scan)
{
	static const char *const bad[] = { "", "{", "{\"a\":}", "[1,]", "01", "1.", "-", "\"\\x\"", "\"\x01\"",
					   "\"\xc3\x28\"", "\"\xed\xa0\x80\"", "tru", "{} x", "{\"a\" 1}", "1e" };
	const char *t = "{\"id\": 7, \"x\": 18446744073709551616, \"params\": {\"arguments\": "
			"{\"variables\": {\"a\": [1e99999, -9223372036854775808, 9223372036854775807]}}}}";
	struct json_scan sc;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(json_scan(bad[i], strlen(bad[i]), &sc) == -1, "accepted: %s", bad[i]);
	ck_assert_int_eq(json_scan(t, strlen(t), &sc), 0);
	ck_assert_uint_eq(sc.n_wide, 2);          /* 2^64 and 1e99999; the int64 bounds fit */
	ck_assert_uint_eq(sc.n_wide_outside, 1);  /* 2^64 */
	ck_assert_int_eq(strncmp(t + sc.id.off, "7", sc.id.len), 0);
	ck_assert_int_eq(strncmp(t + sc.wide[0].off, "18446744073709551616", sc.wide[0].len), 0);
	ck_assert_int_eq(strncmp(t + sc.wide[1].off, "1e99999", sc.wide[1].len), 0);
	ck_assert_int_eq(strncmp(t + sc.vars.off, "{\"a\": [1e99999", 14), 0);
	ck_assert_uint_eq(sc.vars.off + sc.vars.len, strlen(t) - 3);
	t = " [\"\xf0\x9f\x98\x80\", 1.5e-400, {}] ";   /* an underflow is 0, which jansson takes */
	ck_assert_int_eq(json_scan(t, strlen(t), &sc), 0);
	ck_assert_uint_eq(sc.n_wide, 0);
	/* and so is a subnormal (strtod says ERANGE; jansson takes it:
	 * the fuzzer's find) */
	t = "[1, 1.5e-3, 2.5e-310, -4.9e-324]";
	ck_assert_int_eq(json_scan(t, strlen(t), &sc), 0);
	ck_assert_uint_eq(sc.n_wide, 0);
	{
		json_t *j = json_loads(t, 0, NULL);
		ck_assert_ptr_nonnull(j);
		json_decref(j);
	}
}
END_TEST

/* The Prometheus text of /metrics: label values escaped, numbers as
 * integers when they are, +Inf spelled as the format wants. */
START_TEST(test_prom_text)
{
	struct prom p = { 0 };
	prom_family(&p, "x_total", "counter", "Things.");
	prom_sample(&p, "x_total", 3, "policy", "a\"b\\c\nd", "status", "ok", NULL);
	prom_sample(&p, "x_total", 0.25, NULL);
	prom_sample(&p, "x_total", INFINITY, "le", "+Inf", NULL);
	prom_sample(&p, "x_total", 12345678901.0, NULL);
	ck_assert_str_eq(p.buf, "# HELP x_total Things.\n# TYPE x_total counter\n"
				"x_total{policy=\"a\\\"b\\\\c\\nd\",status=\"ok\"} 3\n"
				"x_total 0.25\n"
				"x_total{le=\"+Inf\"} +Inf\n"
				"x_total 12345678901\n");
	ck_assert_uint_eq(p.len, strlen(p.buf));
	free(p.buf);
}
END_TEST

/* json_out is json_dumpb(JSON_COMPACT | JSON_ENCODE_ANY), byte for byte. */
static void same_as_jansson(const json_t *v)
{
	size_t n, want_n = json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	cleanup_free char *want = xmalloc(want_n + 1);
	cleanup_free char *got = json_out(v, "\n", &n);
	ck_assert_uint_eq(json_dumpb(v, want, want_n, JSON_COMPACT | JSON_ENCODE_ANY), want_n);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(n, want_n + 1);
	ck_assert_msg(memcmp(got, want, want_n) == 0 && got[want_n] == '\n' && got[n] == '\0',
		      "json_out %.*s\njansson  %.*s", (int)n, got, (int)want_n, want);
}

START_TEST(test_json_out)
{
	/* each byte that may stand in a string, at each offset from an 8-byte
	 * boundary (the writer skips 8 clean bytes at a time) and beside
	 * another */
	char s[48];
	for (unsigned c = 0; c < 0x80; c++)
		for (size_t at = 0; at < 17; at++) {
			json_t *j;
			memset(s, 'a', sizeof(s));
			s[at] = (char)c;
			s[at + 9] = (char)(c ^ 0x20);
			j = json_stringn(s, at + 1 + (c & 31));
			same_as_jansson(j);
			json_decref(j);
		}
	{
		json_t *v = json_pack("{s:[i,I,I,f,f,f,f,b,b,n,s,s,{},[]],s:{s:s%},s:s}", "a", 0, (json_int_t)INT64_MIN,
				      (json_int_t)INT64_MAX, 1.0, 0.1, -0.0, 1e300, 1, 0, "", "\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x90\x8d",
				      "k\"\\\n", "v", "nul\0in", (size_t)6, "z/</script>", "\x7f");
		ck_assert_ptr_nonnull(v);
		same_as_jansson(v);
		same_as_jansson(json_object_get(v, "a"));
		json_decref(v);
	}
#if JANSSON_VERSION_HEX >= 0x020e00
	{
		/* a key with a NUL in it (jansson 2.14 keeps key lengths) */
		json_t *o = json_object();
		json_object_setn_new(o, "a\0b", 3, json_integer(1));
		json_object_set_new(o, "c", json_null());
		same_as_jansson(o);
		json_decref(o);
	}
#endif
	ck_assert_ptr_null(json_out(NULL, NULL, &(size_t){ 0 }));
}
END_TEST

Suite *parse_suite(void)
{
	Suite *s = suite_create("parse");
	TCase *size = tcase_create("size"), *dur = tcase_create("duration"), *mi = tcase_create("text");
	tcase_add_loop_test(size, test_size_good, 0, (int)ARRAY_SIZE(good_sizes));
	tcase_add_loop_test(size, test_size_bad, 0, (int)ARRAY_SIZE(bad_sizes));
	tcase_add_test(size, test_size_null);
	tcase_add_loop_test(dur, test_duration_good, 0, (int)ARRAY_SIZE(good_durations));
	tcase_add_loop_test(dur, test_duration_bad, 0, (int)ARRAY_SIZE(bad_durations));
	tcase_add_test(dur, test_duration_null);
	tcase_add_loop_test(mi, test_mountinfo_line, 0, (int)ARRAY_SIZE(mountinfo));
	tcase_add_test(mi, test_utf8_cuts);
	tcase_add_test(mi, test_json_scan);
	tcase_add_test(mi, test_prom_text);
	tcase_add_test(mi, test_json_out);
	suite_add_tcase(s, size);
	suite_add_tcase(s, dur);
	suite_add_tcase(s, mi);
	return s;
}
