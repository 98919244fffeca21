/* pycell: skips in the C unit tests.  Check has no skip: a test that
 * returns early passes.  unit_skip() records why in a file that every
 * forked test inherits, and unit_report() prints each reason and a closing
 * line that counts the skips as skips, not as passes. */
#include "config.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "unit.h"

static int skip_fd = -1;

void unit_skip_init(void)
{
	FILE *f = tmpfile();
	if (!f) {
		perror("unit: tmpfile for the skip list");
		exit(99);
	}
	skip_fd = fileno(f);   /* stays open for the whole run */
	/* forked tests append whole lines */
	if (fcntl(skip_fd, F_SETFL, O_APPEND) < 0) {
		perror("unit: O_APPEND on the skip list");
		exit(99);
	}
}

void unit_skip(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (skip_fd < 0 || write(skip_fd, line, (size_t)n) != n)
		fprintf(stderr, "unit: could not record a skip: %.*s", n, line);
}

int unit_report(const char *name, SRunner *sr)
{
	char *text = NULL;
	size_t len = 0;
	int skipped = 0, failed = srunner_ntests_failed(sr), run = srunner_ntests_run(sr);
	if (skip_fd >= 0 && lseek(skip_fd, 0, SEEK_SET) == 0 && read_fd_all(skip_fd, 1 << 20, &text, &len) == 0) {
		for (char *l = text; l && *l;) {
			char *nl = strchr(l, '\n');
			if (nl)
				*nl = '\0';
			printf("SKIP: %s\n", l);
			skipped++;
			l = nl ? nl + 1 : NULL;
		}
	}
	free(text);
	printf("%s: %d failed, %d passed, %d skipped\n", name, failed, run - failed - skipped, skipped);
	return failed;
}
