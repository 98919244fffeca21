/* pycell: unit tests for the compiled-program cache of src/jail/seccomp.c.
 * A cached program is used only when it is ours and nobody else could have
 * written it; every other case must compile afresh.  A "poisoned" file
 * holds a one-instruction allow-everything program: if it were used, the
 * result would differ from a fresh compile. */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/policy.h"
#include "jail/seccomp.h"
#include "unit.h"
#include "base/util.h"

static char *dir;

static struct seccomp_filter *compile_with(const char *cache)
{
	struct policy p;
	struct pc_err e;
	struct seccomp_filter *f = NULL;
	setenv("PYCELL_CACHE_DIR", cache, 1);
	policy_init_default(&p);
	ck_assert_msg(seccomp_filter_compile(&p, &f, &e) == 0, "%s", e.msg);
	policy_free(&p);
	return f;
}

/* The one file in dir/seccomp, or NULL. */
static char *cached_file(void)
{
	char *sub = xasprintf("%s/seccomp", dir), *found = NULL;
	DIR *d = opendir(sub);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.') {
			ck_assert_ptr_null(found);
			found = xasprintf("%s/%s", sub, de->d_name);
		}
	if (d)
		closedir(d);
	free(sub);
	return found;
}

static void poison(const char *path)
{
	struct { char magic[8]; uint32_t njail, nprog; struct sock_filter allow; } bad = {
		"PYCSEC02", 1, 0, BPF_STMT(BPF_RET | BPF_K, 0x7fff0000U /* SECCOMP_RET_ALLOW */) };
	int fd;
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, &bad, sizeof(bad)), (int)sizeof(bad));
	close(fd);
}

static void setup(void)
{
	dir = unit_mkdtemp();
}

static void teardown(void)
{
	unit_rmtree(dir);
	free(dir);
}

START_TEST(hit_is_identical)
{
	struct seccomp_filter *fresh = compile_with("none"), *first, *second;
	char *file;
	struct stat st;
	first = compile_with(dir);
	file = cached_file();
	ck_assert_ptr_nonnull(file);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(stat(dir, &st), 0);
	second = compile_with(dir);
	ck_assert(seccomp_filter_equal(fresh, first));
	ck_assert(seccomp_filter_equal(fresh, second));
	/* our own well-formed file is trusted: that is what a cache is */
	poison(file);
	seccomp_filter_free(second);
	second = compile_with(dir);
	ck_assert_uint_eq(seccomp_filter_length(second), 1);
	seccomp_filter_free(fresh);
	seccomp_filter_free(first);
	seccomp_filter_free(second);
	free(file);
}
END_TEST

/* Each way a file or directory could have been written by someone else. */
enum spoil { WORLD_WRITABLE, SYMLINK, DIR_GROUP_WRITABLE, TRUNCATED, NOT_OURS };

START_TEST(untrusted_is_ignored)
{
	struct seccomp_filter *fresh = compile_with("none"), *f;
	char *file, *sub = xasprintf("%s/seccomp", dir);
	seccomp_filter_free(compile_with(dir));
	file = cached_file();
	ck_assert_ptr_nonnull(file);
	poison(file);
	switch ((enum spoil)_i) {
	case WORLD_WRITABLE:
		ck_assert_int_eq(chmod(file, 0666), 0);
		break;
	case SYMLINK: {
		char *target = xasprintf("%s/elsewhere", dir);
		ck_assert_int_eq(rename(file, target), 0);
		ck_assert_int_eq(symlink(target, file), 0);
		free(target);
		break;
	}
	case DIR_GROUP_WRITABLE:
		ck_assert_int_eq(chmod(sub, 0770), 0);
		break;
	case TRUNCATED:
		ck_assert_int_eq(truncate(file, 20), 0);
		break;
	case NOT_OURS:
		if (geteuid() != 0) {
			fprintf(stderr, "seccomp cache: SKIP not-ours case: needs root to chown\n");
			break;
		}
		ck_assert_int_eq(chown(file, 65534, 65534), 0);
		break;
	default:
		ck_abort();
	}
	f = compile_with(dir);
	if (_i == NOT_OURS && geteuid() != 0)
		ck_assert_uint_eq(seccomp_filter_length(f), 1);
	else
		ck_assert_msg(seccomp_filter_equal(fresh, f), "case %d: the untrusted program was used", _i);
	seccomp_filter_free(f);
	seccomp_filter_free(fresh);
	free(file);
	free(sub);
}
END_TEST

START_TEST(none_writes_nothing)
{
	seccomp_filter_free(compile_with("none"));
	setenv("PYCELL_CACHE_DIR", dir, 1);
	ck_assert_ptr_null(cached_file());
}
END_TEST

Suite *seccomp_cache_suite(void)
{
	Suite *s = suite_create("seccomp_cache");
	TCase *t = tcase_create("cache");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, hit_is_identical);
	tcase_add_loop_test(t, untrusted_is_ignored, WORLD_WRITABLE, NOT_OURS + 1);
	tcase_add_test(t, none_writes_nothing);
	tcase_set_timeout(t, 60);
	suite_add_tcase(s, t);
	return s;
}
