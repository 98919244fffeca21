/* pycell: fault injection for the test suite (fault.h). */
#include "config.h"

#ifdef PYCELL_FAULT_INJECTION
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"

#define SITES_MAX 8

static struct site {
	char name[16];
	unsigned long nth;   /* 0: every time */
	unsigned long hits;
} sites[SITES_MAX];
static int n_sites = -1;

void fault_init(void)
{
	const char *env = getenv("PYCELL_FAULT");
	n_sites = 0;
	while (env && *env && n_sites < SITES_MAX) {
		struct site *s = &sites[n_sites];
		size_t len = strcspn(env, ":,");
		snprintf(s->name, sizeof(s->name), "%.*s", (int)len, env);
		env += len;
		if (*env == ':') {
			s->nth = strtoul(env + 1, NULL, 10);
			env += strcspn(env, ",");
		}
		if (*env == ',')
			env++;
		n_sites++;
	}
}

bool fault_at(const char *site)
{
	if (n_sites < 0)
		fault_init();
	for (int i = 0; i < n_sites; i++)
		if (strcmp(sites[i].name, site) == 0) {
			sites[i].hits++;
			return sites[i].nth == 0 || sites[i].hits == sites[i].nth;
		}
	return false;
}
#endif
