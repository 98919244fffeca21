/* pycell: what a jail's init keeps of the address space it was cloned
 * with (see init_mem.h). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/init_mem.h"

/* a sanitizer's runtime maps memory of its own after the start, and uses it */
#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || __has_feature(address_sanitizer) || \
	__has_feature(memory_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED true
#else
#define SANITIZED false
#endif

/* A process just started has some 30 mappings; more than this (or more
 * text) and the note is not taken. */
#define NOTE_MAX 128
#define NOTE_TEXT_MAX (32 << 10)
/* Below the stack pointer at the shrink: what the rest of init's calls
 * may use (the signal handler's frame among them). */
#define STACK_SLACK (256 << 10)

struct range {
	uintptr_t start, end;
};

static struct range noted[NOTE_MAX];
static size_t n_noted;
static uintptr_t noted_brk; /* the program break at the note */
static size_t stack_i;      /* the noted mapping holding the stack */

void init_mem_note(void)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	cleanup_free char *text = NULL;
	size_t len;
	bool have_stack = false;

	if (SANITIZED || read_file("/proc/self/maps", NOTE_TEXT_MAX, &text, &len) < 0)
		return;
	for (char *p = text; *p;) {
		char *eol = strchrnul(p, '\n');
		struct range r;
		r.start = (uintptr_t)strtoull(p, &p, 16);
		if (*p != '-' || n_noted == NOTE_MAX)
			goto no_note;
		r.end = (uintptr_t)strtoull(p + 1, &p, 16);
		if (r.end <= r.start)
			goto no_note;
		if (sp >= r.start && sp < r.end) {
			stack_i = n_noted;
			have_stack = true;
		}
		noted[n_noted++] = r;
		p = *eol ? eol + 1 : eol;
	}
	if (!have_stack)
		goto no_note;
	noted_brk = (uintptr_t)sbrk(0);
	return;
no_note:
	n_noted = 0;
}

bool init_mem_noted(void)
{
	return n_noted > 0;
}

static void keep(struct range *k, size_t *n, uintptr_t start, uintptr_t end)
{
	size_t i = *n;
	/* insertion by start (a few dozen ranges) */
	while (i > 0 && k[i - 1].start > start) {
		k[i] = k[i - 1];
		i--;
	}
	k[i] = (struct range){ start, end };
	(*n)++;
}

void init_mem_shrink(void)
{
	struct range k[NOTE_MAX + 2];
	size_t n = 0;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	uintptr_t at = 0;

	if (!n_noted)
		return;
	for (size_t i = 0; i < n_noted; i++) {
		struct range r = noted[i];
		/* the stack, as far down as it has grown since, and some more */
		if (i == stack_i && sp - STACK_SLACK < r.start)
			r.start = (sp - STACK_SLACK) & ~(page - 1);
		keep(k, &n, r.start, r.end);
	}
	/* the heap, as far as it has grown since: malloc's own, which init
	 * no longer calls, but the C library's state points into it */
	if (noted_brk && noted_brk != (uintptr_t)-1) {
		uintptr_t now = (uintptr_t)sbrk(0);
		if (now > noted_brk)
			keep(k, &n, noted_brk & ~(page - 1), (now + page - 1) & ~(page - 1));
	}
	/* every gap below the highest kept mapping: nothing the process
	 * mapped after its start lies above the stack, vdso and vsyscall */
	for (size_t i = 0; i < n; i++) {
		if (k[i].start > at)
			munmap((void *)at, k[i].start - at);
		if (k[i].end > at)
			at = k[i].end;
	}
}
