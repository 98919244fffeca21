/* pycell: the cold spawner: every jail is a fresh clone3 of the supervisor
 * into new namespaces, which builds itself and execs python. */
#include "config.h"

#include "run/spawner.h"

static int cold_prepare(struct spawner *sp, const struct policy *p, const char *runtime_dir,
			struct pc_err *err)
{
	return 0;
}

static bool cold_serves(const struct spawner *sp, const struct policy *p)
{
	return true;
}

static int cold_spawn(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	return jail_clone(s, j, err);
}

static int cold_release(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	return jail_release(s, j, err);
}

static void cold_free(struct spawner *sp)
{
}

static const struct spawner_ops cold_ops = {
	.name = "cold",
	.prepare = cold_prepare,
	.serves = cold_serves,
	.spawn = cold_spawn,
	.release = cold_release,
	.deliver = NULL,   /* a cold jail gets its program at once */
	.free = cold_free,
};

static struct spawner cold = { .ops = &cold_ops };

struct spawner *spawner_cold(void)
{
	return &cold;
}
