/* pycell: fault injection for the test suite.
 *
 * Built in only with ./configure --enable-fault-injection (CI's sanitizer
 * and coverage builds); otherwise fault_at() is a constant false and the
 * sites cost nothing.  PYCELL_FAULT names the sites that fail:
 *   PYCELL_FAULT=SITE[:N][,SITE[:N]...]
 * SITE alone fails every time it is reached, SITE:N only the Nth time (the
 * count is per process).  The sites, each at the start of a step that can
 * fail for real:
 *   clone   jail.c, clone3 of a jail (EAGAIN)
 *   idmap   jail.c, writing a jail's id maps (EPERM), after it was cloned
 *   cgroup  cgroup.c, making one of a run's cgroup directories (ENOSPC; the
 *           first run's are made by the probe, cgroup_probe.c)
 *   zygote  spawn_warm.c, starting a zygote, before its fork (EMFILE)
 *   small_clone   small_init.c, the clone of a warm jail's small init
 *           (EPERM: the zygote makes classic inits from then on)
 *   small_clone3  small_init.c, its clone3 taken as refused (clone, and
 *           a write to move it into its cgroup2 directory, from then on)
 *   huge_pages  huge_pages.c, the zygote's MADV_COLLAPSE (EINVAL: its memory
 *           stays in 4 KiB pages)
 *   veth    net.c, making an egress run's veth pair (EPERM)
 *   warm_reply  spawn_warm.c, a zygote's reply with a jail whose
 *           descriptors did not fit in the supervisor's table (EMFILE: the
 *           kernel drops them and says MSG_CTRUNC), counted over the
 *           replies that carry a jail
 *   egress_bpf  egress.c: not a failure but a weakening, for the tests
 *           only: the egress filters are loaded and not attached, which
 *           the egress probes of policy-test must catch
 * Each test in tests/integration/test_faults.py names the site it drives. */
#ifndef PYCELL_FAULT_H
#define PYCELL_FAULT_H

#include <stdbool.h>

#ifdef PYCELL_FAULT_INJECTION
/* Read PYCELL_FAULT now, before anything replaces the environment (the
 * zygote does); main() calls it first. */
void fault_init(void);
bool fault_at(const char *site);
#else
static inline void fault_init(void) {}
static inline bool fault_at(const char *site)
{
	(void)site;
	return false;
}
#endif

#endif
