/* pycell: what a cell sends back besides its value: the images it shows
 * and the files it changed in /workspace, which the runtime in the jail
 * sends over the tool socket as pycell/blob packets (the first of a blob
 * says what it is, each carries a part of its base64, the last has "more":
 * false).  The jail is not trusted: every blob is bounded as it arrives,
 * and kept in the result (run_result images and files) only within the
 * RESULT_* caps, with a path and MIME type that pass the checks. */
#ifndef PYCELL_OUTPUTS_H
#define PYCELL_OUTPUTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/result.h"

/* The blob being received: its first packet's params, its base64 so far. */
struct blob_rx {
	json_t *meta;
	char *b64;
	size_t len, cap;
	bool refused;     /* past its cap: the rest is read and dropped */
};

/* One pycell/blob packet's params; a blob that ends goes to res. */
void blob_rx_packet(struct blob_rx *b, struct run_result *res, json_t *params);
/* Drop a blob not finished (the run ended). */
void blob_rx_reset(struct blob_rx *b);

#endif
