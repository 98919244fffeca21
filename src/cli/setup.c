/* pycell: a command's configuration put in force (setup.h). */
#include "config.h"

#include <sys/resource.h>

#include "base/log.h"
#include "cli/setup.h"
#include "jail/jail.h"
#include "run/egress.h"
#include "run/packages.h"

void cli_conf_apply(const struct pycell_conf *c)
{
	jail_host_id_base = c->host_uid_base;
	egress_configure(&c->net);
	packages_configure(c->packages_cache, c->packages_cache_max);
}

int cli_conf_setup(const char *path, struct pycell_conf *c, struct pc_err *err)
{
	if (conf_load(path, c, err) < 0)
		return -1;
	cli_conf_apply(c);
	return 0;
}

void cli_raise_nofile(const char *cmd, unsigned long sessions)
{
	struct rlimit nofile;
	/* the server's own, a connection's and a run's, beyond its sessions */
	unsigned long long need = (unsigned long long)sessions * SESSION_FDS + 256;
	if (getrlimit(RLIMIT_NOFILE, &nofile) < 0)
		return;
	if (nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	if (nofile.rlim_cur != RLIM_INFINITY && nofile.rlim_cur < need)
		log_warn("%s: sessions.max (%lu in all) needs about %llu open files (%d a session), and this "
			 "process may open %llu: sessions past that fail to open; raise the limit (LimitNOFILE= "
			 "in the unit, ulimit -Hn) or lower sessions.max",
			 cmd, sessions, need, SESSION_FDS, (unsigned long long)nofile.rlim_cur);
}
