/* pycell: the message that brings a ready jail its program, on its sync
 * socket (init) or its program socket (python): jail.c's init and python
 * read it, jail_program.c's functions (jail.h) write and read it. */
#ifndef PYCELL_JAIL_PROGRAM_H
#define PYCELL_JAIL_PROGRAM_H

#include <stdint.h>

struct program_msg {
	int32_t type;   /* JAIL_MSG_PROGRAM */
	int32_t linger; /* jail_spec.linger */
	uint64_t len;   /* bytes in the memfd that comes with it */
};

#endif
