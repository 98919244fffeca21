/* pycell: libmicrohttpd, loaded at the first http_server_new (http_internal.h). */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>

#include "mcp/http_internal.h"

struct http_mhd_api mhd;

int http_mhd_open(struct pc_err *err)
{
	static void *lib;
	if (lib)
		return 0;
	lib = dlopen(PYCELL_MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return pc_fail(err, ELIBACC, "serve", "%s (libmicrohttpd, which pycell serve needs) would not load: "
			       "%s", PYCELL_MHD_SONAME, dlerror());
#define MHD_LOAD(name)                                                                             \
	if (!(*(void **)&mhd.name = dlsym(lib, "MHD_" #name))) {                                   \
		dlclose(lib);                                                                      \
		lib = NULL;                                                                        \
		return pc_fail(err, ELIBBAD, "serve", "%s has no MHD_" #name, PYCELL_MHD_SONAME);  \
	}
	MHD_FUNCTIONS(MHD_LOAD)
#undef MHD_LOAD
	return 0;
}
