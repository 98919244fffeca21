/* pycell: what a jail's init keeps of the address space it was cloned with.
 *
 * A cold jail's init is a clone of the process that made the jail, the
 * supervisor (a warm jail's executes pycell-init instead, small_init.h,
 * unless the zygote found none: then it is a clone of the zygote, with the
 * interpreter and whatever python.preload imported).  Its copy of that address space costs page tables of its own
 * for as long as the jail lives (the kernel copies them at the clone for
 * every mapping written to: some 70 KiB with the default policy, 240 KiB
 * with the data stack), while all init does once python runs is wait.  So
 * once python has run for a while (a session, a long run), init unmaps all
 * but what the process had when it started: its binary, the libraries it
 * was linked with, ld.so's, its stack, heap and vdso.  Nothing loaded or
 * mapped after that (libpython, modules, python's memory, malloc's mapped
 * chunks) is used by init again. */
#ifndef PYCELL_JAIL_INIT_MEM_H
#define PYCELL_JAIL_INIT_MEM_H

#include <stdbool.h>

/* At the start of main(): note the mappings the process has now.  Does
 * nothing in a sanitizer build (its runtime maps and uses memory of its
 * own later), or when /proc/self/maps cannot be read. */
void init_mem_note(void);
/* Whether a note was taken (init_mem_shrink does something). */
bool init_mem_noted(void);
/* In a jail's init, after the last call into anything but its own code
 * and the C library: unmap everything but the noted mappings, the stack
 * and the heap as they are now.  Async-signal-safe: no allocation. */
void init_mem_shrink(void);

#endif
