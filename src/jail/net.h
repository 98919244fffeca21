/* pycell: the jail's network namespace: loopback up, nothing else. */
#ifndef PYCELL_NET_H
#define PYCELL_NET_H

#include "base/util.h"

/* In the jail child (own netns): bring `lo` up. */
int net_loopback_up(struct pc_err *err);

#endif
