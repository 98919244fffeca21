/* pycell: the state directory (run/state.c): records read back as they
 * were written, damaged records refused with the key, a directory another
 * user could write refused, and a snapshot kept whole or not at all. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/state.h"
#include "unit.h"

static struct state_record sample(void)
{
	struct state_record r = { .opened_at = 1700000000000ULL, .paused_at = 1700000060000ULL, .idle_ms = 600000,
				  .lived_ms = 61000, .bytes = 5, .cells = 3 };
	strcpy(r.id, "r1.0123456789abcdef0123456789abcdef");
	r.scope = "serve";
	r.owner = "alice";
	r.policy = "default";
	r.not_kept = json_pack("[{s:s,s:s}]", "name", "conn", "why", "socket (socket)");
	return r;
}

START_TEST(test_a_record_reads_back_as_written)
{
	struct state_record r = sample(), back;
	struct pc_err err = { 0 };
	char *text = state_record_format(&r);
	ck_assert_int_eq(state_record_parse(text, strlen(text), &back, &err), 0);
	ck_assert_str_eq(back.id, r.id);
	ck_assert_str_eq(back.scope, "serve");
	ck_assert_str_eq(back.owner, "alice");
	ck_assert_str_eq(back.policy, "default");
	ck_assert_uint_eq(back.opened_at, r.opened_at);
	ck_assert_uint_eq(back.paused_at, r.paused_at);
	ck_assert_uint_eq(back.idle_ms, 600000);
	ck_assert_uint_eq(back.lived_ms, 61000);
	ck_assert_uint_eq(back.bytes, 5);
	ck_assert_uint_eq(back.cells, 3);
	ck_assert(json_equal(back.not_kept, r.not_kept));
	state_record_free(&back);
	json_decref(r.not_kept);
	free(text);
}
END_TEST

static const struct {
	const char *text, *says;
} damaged[] = {
	{ "", "a damaged session record: " },
	{ "[]", "a damaged session record: not a JSON object" },
	{ "{\"version\":2}", "\"version\" must be 1 (a record of another version of pycell)" },
	{ "{\"version\":1,\"id\":\"../x\"}", "\"id\" must be a session id" },
	{ "{\"version\":1,\"id\":\".x\"}", "\"id\" must be a session id" },
	{ "{\"version\":1,\"id\":\"x\",\"extra\":1}", "a session record with an unknown key \"extra\"" },
	{ "{\"version\":1,\"id\":\"x\",\"not_kept\":[1]}", "\"not_kept\" must be an array of {name, why}" },
	{ "{\"version\":1,\"id\":\"x\",\"not_kept\":[],\"scope\":\"s\",\"owner\":null,\"policy\":null,"
	  "\"opened_at\":-1}", "\"opened_at\" must be an integer, 0 or more" },
	{ "{\"version\":1,\"id\":\"x\",\"id\":\"y\"}", "duplicate object key" },
};

START_TEST(test_a_damaged_record_is_refused_naming_the_key)
{
	struct state_record r;
	struct pc_err err = { 0 };
	const char *text = damaged[_i].text;
	ck_assert_int_eq(state_record_parse(text, strlen(text), &r, &err), -1);
	if (!strstr(err.msg, damaged[_i].says))
		ck_abort_msg("%s: got \"%s\", expected it to say \"%s\"", text, err.msg, damaged[_i].says);
	ck_assert_ptr_null(r.scope);
}
END_TEST

START_TEST(test_ids_that_name_files_only)
{
	ck_assert(state_id_ok("r1.0123abcd"));
	ck_assert(state_id_ok("0123456789abcdef0123456789abcdef"));
	ck_assert(!state_id_ok(""));
	ck_assert(!state_id_ok(".hidden"));
	ck_assert(!state_id_ok("a/b"));
	ck_assert(!state_id_ok("a b"));
	ck_assert(!state_id_ok(NULL));
	ck_assert(!state_id_ok("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"));
}
END_TEST

START_TEST(test_a_directory_others_can_write_is_refused)
{
	char *dir = unit_mkdtemp();
	char *path = unit_write(dir, "x", ""), *state;
	struct state_dir *d = NULL;
	struct pc_err err = { 0 };

	unlink(path);
	free(path);
	state = malloc(strlen(dir) + 8);
	sprintf(state, "%s/state", dir);
	ck_assert_int_eq(mkdir(state, 0700), 0);
	ck_assert_int_eq(chmod(state, 0770), 0);
	ck_assert_int_eq(state_dir_open(state, &d, &err), -1);
	ck_assert_msg(strstr(err.msg, "is writable by its group or by others (mode 0770)"), "%s", err.msg);
	ck_assert_int_eq(chmod(state, 0700), 0);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(state_dir_open(state, &d, &err), 0);
	state_dir_free(d);
	/* its sessions subdirectory too */
	sprintf(state, "%s/state", dir);
	{
		char *sub = malloc(strlen(state) + 16);
		sprintf(sub, "%s/sessions", state);
		ck_assert_int_eq(chmod(sub, 0722), 0);
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(state_dir_open(state, &d, &err), -1);
		ck_assert_msg(strstr(err.msg, "/sessions is writable by its group or by others (mode 0722)"), "%s",
			      err.msg);
		free(sub);
	}
	/* a symbolic link is not followed */
	{
		char *link = malloc(strlen(dir) + 8);
		sprintf(link, "%s/link", dir);
		ck_assert_int_eq(symlink(state, link), 0);
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(state_dir_open(link, &d, &err), -1);
		ck_assert_msg(strstr(err.msg, "a symbolic link, or not a directory"), "%s", err.msg);
		free(link);
	}
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(state_dir_open("relative/path", &d, &err), -1);
	ck_assert_msg(strstr(err.msg, "must be an absolute path"), "%s", err.msg);
	free(state);
	unit_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(test_a_snapshot_is_kept_whole_claimed_once_and_checked)
{
	char *dir = unit_mkdtemp();
	struct state_dir *d = NULL;
	struct state_record r = sample(), back, *list = NULL;
	struct pc_err err = { 0 };
	int fd;

	ck_assert_int_eq(state_dir_open(dir, &d, &err), 0);
	fd = state_snap_create(d, r.id, &err);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "hello", 5), 5);
	/* until committed, there is no session */
	ck_assert_int_eq(state_load(d, r.id, &back, &err), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(state_commit(d, &r, fd, &err), 0);
	ck_assert_uint_eq(state_list(d, "serve", "alice", false, &list), 1);
	state_record_free(&list[0]);
	free(list);
	ck_assert_uint_eq(state_list(d, "serve", "bob", false, &list), 0);
	free(list);
	ck_assert_uint_eq(state_list(d, "stdio.x", NULL, true, &list), 0);
	free(list);
	/* one claim wins */
	ck_assert_int_eq(state_claim(d, r.id, &back, &err), 0);
	ck_assert_uint_eq(back.bytes, 5);
	memset(&err, 0, sizeof(err));
	{
		struct state_record again;
		ck_assert_int_eq(state_claim(d, r.id, &again, &err), -1);
		ck_assert_msg(strstr(err.msg, "it was resumed elsewhere first"), "%s", err.msg);
	}
	fd = state_snap_open(d, &back, &err);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* cut short: refused, and the record says how big it was */
	state_unclaim(d, r.id);
	{
		char *snap = malloc(strlen(dir) + 80);
		sprintf(snap, "%s/sessions/%s.snap", dir, r.id);
		ck_assert_int_eq(truncate(snap, 3), 0);
		free(snap);
	}
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(state_snap_open(d, &back, &err), -1);
	ck_assert_msg(strstr(err.msg, "is damaged: 3 bytes where its record says 5"), "%s", err.msg);
	state_record_free(&back);
	/* a sweep by scope removes it, and what an interrupted write left */
	fd = state_snap_create(d, "other", &err);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_eq(state_sweep(d, 0, "serve"), 1);
	ck_assert_int_eq(state_load(d, r.id, &back, &err), -1);
	state_abort(d, "other", fd);
	json_decref(r.not_kept);
	state_dir_free(d);
	unit_rmtree(dir);
	free(dir);
}
END_TEST

Suite *state_suite(void)
{
	Suite *s = suite_create("state");
	TCase *tc = tcase_create("state");
	tcase_add_test(tc, test_a_record_reads_back_as_written);
	tcase_add_loop_test(tc, test_a_damaged_record_is_refused_naming_the_key, 0, ARRAY_SIZE(damaged));
	tcase_add_test(tc, test_ids_that_name_files_only);
	tcase_add_test(tc, test_a_directory_others_can_write_is_refused);
	tcase_add_test(tc, test_a_snapshot_is_kept_whole_claimed_once_and_checked);
	suite_add_tcase(s, tc);
	return s;
}
