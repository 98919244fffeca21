/* pycell: SHA-256 as hex. */
#ifndef PYCELL_SHA256_H
#define PYCELL_SHA256_H

#include <stddef.h>

/* SHA-256 of data as 64 lowercase hex digits and a NUL. */
void sha256_hex(const void *data, size_t len, char out[65]);

#endif
