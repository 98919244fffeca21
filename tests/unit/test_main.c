/* pycell: the unit test runner.  CK_VERBOSITY and CK_RUN_SUITE /
 * CK_RUN_CASE from the environment select output and tests, as usual for
 * Check. */
#include "config.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "base/util.h"

const char *unit_srcdir(void)
{
	const char *d = getenv("PYCELL_SRCDIR");
	return d && *d ? d : ".";
}

char *unit_mkdtemp(void)
{
	const char *tmp = getenv("TMPDIR");
	char *dir = xasprintf("%s/pycell-unit.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
	return dir;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

void unit_rmtree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *unit_write(const char *dir, const char *name, const char *text)
{
	char *path = xasprintf("%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "create %s", path);
	ck_assert_int_eq(write_all(fd, text, strlen(text)), 0);
	close(fd);
	return path;
}

static int by_offset(const void *a, const void *b)
{
	const struct unit_span *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

void unit_check_spans(const char *what, const char *table, struct unit_span *spans, size_t n, size_t size,
		      size_t align)
{
	size_t end = 0;
	qsort(spans, n, sizeof(*spans), by_offset);
	for (size_t i = 0; i < n; i++) {
		size_t aligned = (end + spans[i].align - 1) / spans[i].align * spans[i].align;
		ck_assert_msg(spans[i].off == aligned, "bytes %zu..%zu of struct %s (before %s) are in no row of %s",
			      end, spans[i].off, what, spans[i].name, table);
		end = spans[i].off + spans[i].size;
	}
	ck_assert_msg((end + align - 1) / align * align == size, "bytes %zu..%zu of struct %s are in no row of %s",
		      end, size, what, table);
}

int main(void)
{
	SRunner *sr;
	int failed;
	/* every filter test compiles afresh; the cache has its own suite */
	setenv("PYCELL_CACHE_DIR", "none", 1);
	unit_skip_init();
	sr = srunner_create(parse_suite());
	srunner_add_suite(sr, policy_suite());
	srunner_add_suite(sr, conf_suite());
	srunner_add_suite(sr, result_suite());
	srunner_add_suite(sr, cli_suite());
	srunner_add_suite(sr, options_suite());
	srunner_add_suite(sr, seccomp_suite());
	srunner_add_suite(sr, seccomp_bpf_suite());
	srunner_add_suite(sr, seccomp_cache_suite());
	srunner_add_suite(sr, bridge_suite());
	srunner_add_suite(sr, mcp_suite());
	srunner_add_suite(sr, warm_suite());
	srunner_add_suite(sr, state_suite());
	srunner_run_all(sr, CK_ENV);
	failed = unit_report("unit", sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
