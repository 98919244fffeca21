/* pycell: a command's configuration put in force (setup.h). */
#include "config.h"

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
