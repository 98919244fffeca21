/* pycell: the message that brings a ready jail its program, on its sync
 * socket (init) or its program socket (python): jail.c's init and python
 * read it, jail_program.c's functions (jail.h) write and read it. */
#ifndef PYCELL_JAIL_PROGRAM_H
#define PYCELL_JAIL_PROGRAM_H

#include <stdint.h>
#include <sys/types.h>

struct jail_spec;
struct pc_err;

struct program_msg {
	int32_t type;   /* JAIL_MSG_PROGRAM */
	int32_t linger; /* jail_spec.linger */
	uint64_t len;   /* bytes in the memfd that comes with it */
};

/* In a native ready jail's init (jail_program.c), until its cell comes:
 * python gets it straight from the supervisor, which tells init after
 * with a program message without a memfd.  A supervisor that let the jail
 * go unused (EOF), or a python that died waiting, ends init (_exit(0)).
 * pycell-init (init_main.c) does the same on its own. */
int program_await_start(int sync_fd, pid_t python, struct pc_err *err);
/* The wasm backend's ready jail: the program's bytes, after their length,
 * copied into the pipe node reads (WASM_PROG_FD). */
int program_forward_bytes(int sync_fd, int pipe_fd, struct pc_err *err);
/* A bare jail's node: spec's files, the same way. */
int program_write_bytes(const struct jail_spec *s, int pipe_fd, struct pc_err *err);

#endif
