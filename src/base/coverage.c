/* pycell: coverage of the jail side (coverage.h). */
#include "config.h"

#ifdef PYCELL_COVERAGE
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/coverage.h"

void __gcov_dump(void);

static int host_root = -1;

void coverage_keep_host(void)
{
	int fd;
	if (host_root >= 0 || (fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	/* well above 0-3, which place_fds fills with the jail's own */
	host_root = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	close(fd);
}

int coverage_fd(void)
{
	return host_root;
}

void coverage_flush(void)
{
	/* "." + the absolute path of each counter file: relative to the
	 * working directory, which is the host's root, whatever the
	 * process's root is by now */
	if (host_root >= 0 && fchdir(host_root) == 0)
		setenv("GCOV_PREFIX", ".", 1);
	__gcov_dump();
}
#else
/* ISO C wants something in a translation unit */
typedef int pycell_coverage_unused;
#endif
