/* pycell: the warm request (run/warm_req.c): every member of struct
 * jail_spec has a row that says how a jail the zygote makes gets it, and
 * each row holds: what the request carries comes out of it equal, what
 * the zygote keeps is its own, what a warm jail never has is refused.
 * And the jail's messages to the supervisor (recv_packet). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "config/policy.h"
#include "run/hot_pages.h"
#include "run/spawner.h"
#include "run/zygote.h"
#include "unit.h"

/* Every member of struct jail_spec, in order, by position: a member added
 * to the struct leaves this initializer one short, and the build stops
 * here (a member in what was padding escapes the byte count below; not
 * this).  Add the member's row to warm_members, then its value here. */
#pragma GCC diagnostic error "-Wmissing-field-initializers"
static const struct jail_spec every_member __attribute__((unused)) = {
	NULL, NULL, { false, false, -1, { -1 }, 0 }, NULL, NULL,
	{ { NULL, NULL, 0 } }, 0, NULL, NULL, NULL, { 0, 1, 2 }, 3, NULL, NULL, false, false, NULL, false, false,
	false, -1,
};

/* Every byte of struct jail_spec is in a row's member or is the padding
 * the compiler puts before a member: a member added without a row fails. */
START_TEST(test_table_covers_the_spec)
{
	struct unit_span spans[64];

	ck_assert_uint_le(warm_n_members, ARRAY_SIZE(spans));
	for (size_t i = 0; i < warm_n_members; i++)
		spans[i] = (struct unit_span){ warm_members[i].off, warm_members[i].size, warm_members[i].align,
					       warm_members[i].name };
	unit_check_spans("jail_spec", "warm_members", spans, warm_n_members, sizeof(struct jail_spec),
			 __alignof__(struct jail_spec));
}
END_TEST

static struct policy pol; /* no interpreter flags: argv[1] is the script */
static char *argv_[] = { "/usr/bin/python3", "/run/pycell/main.py", "--flag", NULL };
static char *envp_[] = { "HOME=/tmp", "LANG=C.UTF-8", NULL };
static void fake_inline(const struct jail_spec *s, int prog_fd)
{
	(void)s;
	(void)prog_fd;
	abort();
}

/* A request's spec, as run.c makes one: a script (or a ready jail with
 * park) with every member a request carries given a value that is not
 * its zero, and the supervisor's own policy, filter and runtime dir. */
static void supervisor_spec(struct jail_spec *s, bool park)
{
	*s = (struct jail_spec){ 0 };
	s->policy = &pol;
	s->filter = (const struct seccomp_filter *)&pol;
	s->argv = argv_;
	s->envp = envp_;
	s->runtime_dir = "/usr/share/pycell/runtime";
	s->fonts_dir = "/var/cache/pycell/fonts/0123";
	s->park = park;
	/* a cell's spec has its files when it is made ready at once (run.c's
	 * served path): they go with its delivery, not with the request */
	s->files[0] = (struct jail_file){ "main.py", "print(1)\n", 9 };
	s->files[1] = (struct jail_file){ "vars.json", "{}", 2 };
	s->n_files = 2;
	s->stdio[0] = 40;
	s->stdio[1] = 41;
	s->stdio[2] = 42;
	s->tool_fd = 43;
	s->cgroup.into = true;
	s->cgroup.dir_fd = 44;
	for (int i = 0; i < CGROUP_MAX_TASKS; i++)
		s->cgroup.tasks[i] = 50 + i;
	s->cgroup.n_tasks = CGROUP_MAX_TASKS;
	s->linger = true;
}

/* The zygote's template (cmd_zygote): its own of each WARM_ZYGOTE row. */
static void zygote_template(struct jail_spec *t)
{
	static char *python[] = { "/usr/bin/python3", NULL };
	memset(t, 0, sizeof(*t));
	t->policy = (const struct policy *)&python;
	t->filter = (const struct seccomp_filter *)&python[1];
	t->argv = python;
	t->runtime_dir = "/zygote/runtime";
	t->fonts_dir = "/zygote/fonts";
	t->run_inline = fake_inline;
}

static bool same(const struct jail_spec *a, const struct jail_spec *b, const struct warm_member *m)
{
	return memcmp((const char *)a + m->off, (const char *)b + m->off, m->size) == 0;
}

/* The files of out are those of in (and .warm.json, for a script). */
static void check_files(const struct jail_spec *in, const struct jail_spec *out, bool script)
{
	ck_assert_int_eq(out->n_files, in->n_files + (script ? 1 : 0));
	ck_assert_int_gt(in->n_files, 0);
	for (int i = 0; i < in->n_files; i++) {
		ck_assert_str_eq(out->files[i].name, in->files[i].name);
		ck_assert_uint_eq(out->files[i].len, in->files[i].len);
		ck_assert(memcmp(out->files[i].data, in->files[i].data, in->files[i].len) == 0);
	}
}

/* sys.argv and os.environ of a script, in its .warm.json. */
static json_t *warm_json(const struct jail_spec *out)
{
	const struct jail_file *f = &out->files[out->n_files - 1];
	json_t *j;
	ck_assert_str_eq(f->name, WARM_FILE);
	j = json_loadb(f->data, f->len, 0, NULL);
	ck_assert_ptr_nonnull(j);
	return j;
}

static void check_argv(const struct jail_spec *in, const struct jail_spec *out)
{
	json_t *j = warm_json(out), *a = json_object_get(j, "argv");
	size_t k = 0;
	for (size_t i = 1 + in->policy->n_python_flags; in->argv[i]; i++, k++)
		ck_assert_str_eq(json_string_value(json_array_get(a, k)), in->argv[i]);
	ck_assert_uint_eq(json_array_size(a), k);
	json_decref(j);
}

static void check_envp(const struct jail_spec *in, const struct jail_spec *out)
{
	json_t *j = warm_json(out), *e = json_object_get(j, "env");
	size_t k = 0;
	for (; in->envp[k]; k++) {
		const char *eq = strchr(in->envp[k], '=');
		char *key = strndup(in->envp[k], (size_t)(eq - in->envp[k]));
		ck_assert_str_eq(json_string_value(json_object_get(e, key)), eq + 1);
		free(key);
	}
	ck_assert_uint_eq(json_object_size(e), k);
	json_decref(j);
}

/* A cell's program and linger, delivered to a ready jail's python. */
static void check_delivery(const struct jail_spec *in)
{
	struct jail_spec cell = *in, got = { 0 };
	struct jail j = { .pid = 0, .pidfd = -1 };
	struct pc_err err = { 0 };
	int prog[2], sync[2], fd;
	uint64_t len;
	bool linger = false;
	char *buf;
	struct program_msg_ { int32_t type, linger; uint64_t len; } m;

	cell.park = false;
	cell.files[0] = (struct jail_file){ "cell.py", "x = 1\n", 6 };
	cell.n_files = 1;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, prog), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync), 0);
	j.prog_fd = prog[0];
	j.sync_fd = sync[0];
	ck_assert_msg(spawner_deliver_cell(&cell, &j, &err) == 0, "%s: %s", err.step, err.msg);
	fd = jail_receive_program(prog[1], &len, &linger);
	ck_assert_int_ge(fd, 0);
	ck_assert(linger == cell.linger);
	buf = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	ck_assert(buf != MAP_FAILED);
	ck_assert_int_eq(jail_unpack_files(&got, buf, len), 0);
	check_files(&cell, &got, false);
	/* init is told, after python has it */
	ck_assert_int_eq(recv(sync[1], &m, sizeof(m), 0), (ssize_t)sizeof(m));
	munmap(buf, len);
	close(fd);
	close(prog[1]);
	close(sync[0]);
	close(sync[1]);
}

/* Each row holds through pack, check and unpack (a script, and a ready
 * jail's request); every row the request carries was given a value. */
START_TEST(test_every_row_holds_through_the_request)
{
	bool given[64] = { false };

	for (int park = 0; park <= 1; park++) {
		struct jail_spec in, out;
		struct spawn_req req;
		struct pc_err err = { 0 };
		int fds[REQ_MAX_FDS], nfds;
		char *buf = NULL;

		supervisor_spec(&in, park);
		in.linger = false; /* a spawn's: the delivery carries it */
		ck_assert_msg(warm_request_pack(&in, &req, fds, &nfds, &err) == 0, "%s: %s", err.step, err.msg);
		ck_assert_int_eq(warm_request_check(&req, sizeof(req), nfds, &err), 0);
		if (req.files_len) {
			buf = mmap(NULL, req.files_len, PROT_READ, MAP_PRIVATE, fds[REQ_FD_MEMFD], 0);
			ck_assert(buf != MAP_FAILED);
		}
		zygote_template(&out);
		ck_assert_int_eq(warm_request_unpack(&req, fds, buf, &out, &err), 0);
		for (size_t i = 0; i < warm_n_members; i++) {
			const struct warm_member *m = &warm_members[i];
			struct jail_spec tmpl;
			switch (m->carry) {
			case WARM_REQUEST:
				given[i] |= warm_member_set(&in, m);
				ck_assert_msg(same(&in, &out, m), "%s does not reach the zygote's jail", m->name);
				break;
			case WARM_ZYGOTE:
				zygote_template(&tmpl);
				ck_assert_msg(same(&tmpl, &out, m), "%s is not the zygote's own", m->name);
				break;
			case WARM_NEVER:
				ck_assert_msg(!warm_member_set(&out, m), "%s is set in a warm jail", m->name);
				break;
			case WARM_PROGRAM:
				given[i] = true;
				if (!strcmp(m->name, "files") || !strcmp(m->name, "n_files")) {
					/* a ready jail's come with its delivery (linger's check) */
					if (park)
						ck_assert_int_eq(out.n_files, 0);
					else
						check_files(&in, &out, true);
				}
				else if (!strcmp(m->name, "argv"))
					park ? (void)0 : check_argv(&in, &out);
				else if (!strcmp(m->name, "envp"))
					park ? (void)0 : check_envp(&in, &out);
				else if (!strcmp(m->name, "linger"))
					check_delivery(&in);
				else
					ck_abort_msg("%s goes with the program, and this test does not check it: add "
						     "its check", m->name);
				break;
			default:
				ck_abort_msg("%s: carried how?", m->name);
			}
		}
		if (buf)
			munmap(buf, req.files_len);
		close(fds[REQ_FD_MEMFD]);
	}
	for (size_t i = 0; i < warm_n_members; i++)
		ck_assert_msg(given[i] || warm_members[i].carry != WARM_REQUEST,
			      "%s is carried, but supervisor_spec gives it no value to check: give it one",
			      warm_members[i].name);
}
END_TEST

/* A spec that sets a member a warm jail never has is refused by name. */
START_TEST(test_never_rows_are_refused)
{
	const struct warm_member *m = &warm_members[_i];
	struct jail_spec in;
	struct spawn_req req;
	struct pc_err err = { 0 };
	int fds[REQ_MAX_FDS], nfds;

	if (m->carry != WARM_NEVER)
		return;
	supervisor_spec(&in, false);
	((unsigned char *)&in)[m->off] = 1;
	ck_assert_int_eq(warm_request_pack(&in, &req, fds, &nfds, &err), -1);
	ck_assert_msg(strstr(err.msg, m->name), "refused, but not by name: %s", err.msg);
}
END_TEST

/* A jail that fails a step sends its error and ends, perhaps before it
 * read the supervisor's last message (the cgroups, jail_cgroups_done):
 * the kernel then answers the supervisor's next recv with ECONNRESET,
 * once, ahead of the error.  recv_packet reads past it: the error, then
 * the end.  (run.c took the reset for the end, and a missing interpreter
 * came out as "killed" about one run in eight under ASan.  The tool
 * socket reads python's last messages the same way.) */
START_TEST(test_a_reset_does_not_hide_the_error)
{
	struct jail_msg sent = { .type = JAIL_MSG_ERROR }, got;
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	snprintf(sent.err.step, sizeof(sent.err.step), "python");
	ck_assert_int_eq(send(sv[1], &sent, sizeof(sent), 0), (ssize_t)sizeof(sent));
	ck_assert_int_eq(send(sv[0], "c", 1, 0), 1); /* never read by the jail */
	close(sv[1]);
	ck_assert_int_eq(recv_packet(sv[0], &got, sizeof(got), MSG_DONTWAIT), (ssize_t)sizeof(got));
	ck_assert_int_eq(got.type, JAIL_MSG_ERROR);
	ck_assert_str_eq(got.err.step, "python");
	ck_assert_int_eq(recv_packet(sv[0], &got, sizeof(got), MSG_DONTWAIT), 0);
	close(sv[0]);

	/* the kernel's side of it, so this test keeps testing something */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(send(sv[1], &sent, sizeof(sent), 0), (ssize_t)sizeof(sent));
	ck_assert_int_eq(send(sv[0], "c", 1, 0), 1);
	close(sv[1]);
	ck_assert_int_eq(recv(sv[0], &got, sizeof(got), MSG_DONTWAIT), -1);
	ck_assert_int_eq(errno, ECONNRESET);
	close(sv[0]);
}
END_TEST

/* The zygote's hot pages (run/hot_pages.c): a buffer of 16 pages, all
 * written before the probe forks; the probe writes pages 2-4 and 10. */
#define HOT_BUF_PAGES 16
static volatile char *hot_buf;
static size_t page_size;

static void probe_writes(void)
{
	static const int written[] = { 2, 3, 4, 10 };
	for (size_t i = 0; i < ARRAY_SIZE(written); i++)
		hot_buf[(size_t)written[i] * page_size] ^= 1;
}

/* whether page i of hot_buf is in a range of h */
static bool covered(const struct hot_pages *h, size_t i)
{
	uintptr_t a = (uintptr_t)hot_buf + i * page_size;
	for (size_t k = 0; k < h->n; k++)
		if (a >= h->r[k].start && a < h->r[k].start + h->r[k].len)
			return true;
	return false;
}

/* a write to page i not checked by a sanitizer, whose check reads its
 * shadow memory, a fault of its own the first time */
__attribute__((no_sanitize_address)) static void touch(size_t i)
{
	hot_buf[i * page_size] ^= 1;
}

/* by the system call into a static, already written: a sanitizer's
 * getrusage writes the shadow of its argument after the call, and its
 * stack frames may be fresh pages, faults the next count would see */
static struct rusage fault_count;
__attribute__((no_sanitize_address)) static long minor_faults(void)
{
	syscall(SYS_getrusage, RUSAGE_SELF, &fault_count);
	return fault_count.ru_minflt;
}

/* The faults taken writing pages from..to.  Its code is the same for
 * every call (noinline, noclone): a first call, whose count is not
 * looked at, maps its text pages and writes its static, and the next
 * count only the buffer's.  A fork copies no page table entry of a
 * file's mapping: a forked child faults at the first run of each page of
 * code, unless the kernel's fault-around mapped it already, which it
 * does when it can, not always. */
__attribute__((noinline, noclone)) static long faults_writing(size_t from, size_t to)
{
	long before = minor_faults();

	for (size_t i = from; i <= to; i++)
		touch(i);
	return minor_faults() - before;
}

static void setup_hot_buf(void)
{
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	hot_buf = mmap(NULL, HOT_BUF_PAGES * page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne((void *)hot_buf, MAP_FAILED);
	memset((void *)hot_buf, 7, HOT_BUF_PAGES * page_size);
}

/* What the probe wrote, and only that, of the zygote's pages: the pages it
 * made its own, in ranges (2-4 are one) */
START_TEST(test_the_probe_learns_the_pages_it_wrote)
{
	struct hot_pages h;

	setup_hot_buf();
	ck_assert_int_eq(hot_pages_learn(&h, 1, probe_writes), 0);
	for (size_t i = 0; i < HOT_BUF_PAGES; i++)
		ck_assert_msg(covered(&h, i) == (i == 2 || i == 3 || i == 4 || i == 10), "page %zu", i);
	for (size_t k = 0; k < h.n; k++)
		if (h.r[k].start == (uintptr_t)hot_buf + 2 * page_size)
			ck_assert_uint_eq(h.r[k].len, 3 * page_size);
	ck_assert_uint_ge(h.pages, 4);
	ck_assert_uint_le(h.pages, HOT_PAGES_MAX);
	hot_pages_free(&h, 1);
	ck_assert_uint_eq(h.n, 0);
}
END_TEST

/* A clone that copied the hot pages ahead takes no fault writing them (a
 * page not in them still faults), keeps their bytes, and a range missing
 * from it (unmapped) is passed over.  A fault count can take a stray
 * fault the clone did not cause (the kernel may move a page meanwhile:
 * compaction), so up to three clones are made, each from the same pages;
 * one that takes no stray fault must show all of it, and a populate that
 * copies nothing fails all three. */
static int clone_copies_ahead(const struct hot_pages *h)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int rc = 0;
		munmap((void *)(hot_buf + 10 * page_size), page_size);
		if (hot_pages_populate(h) < 3)
			_exit(10); /* pages 2-4 at least (a range may fail: page 10) */
		faults_writing(0, 0); /* its code's pages; page 0 is not hot */
		if (faults_writing(2, 4) != 0)
			rc = 11;
		if (rc == 0 && faults_writing(6, 6) != 1)
			rc = 12;
		if (hot_buf[2 * page_size + 1] != 7)
			rc = 13;
		_exit(rc);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

START_TEST(test_a_clone_copies_them_ahead)
{
	struct hot_pages h;
	int status[3] = { -1, -1, -1 };

	setup_hot_buf();
	ck_assert_int_eq(hot_pages_learn(&h, 1, probe_writes), 0);
	for (size_t i = 0; i < ARRAY_SIZE(status); i++)
		if ((status[i] = clone_copies_ahead(&h)) == 0)
			break;
	ck_assert_msg(status[0] == 0 || status[1] == 0 || status[2] == 0,
		      "clones: status %#x, %#x, %#x (exit 10: under 3 pages copied, 11: a hot page faulted, 12: a cold one "
		      "did not fault once, 13: its bytes changed)",
		      status[0], status[1], status[2]);
	hot_pages_free(&h, 1);
}
END_TEST

/* Phases: 2-4, then 10 and 3 again (3 was the first phase's), then 12;
 * the third is dropped when two are asked for */
static void probe_in_phases(void)
{
	touch(2);
	touch(3);
	touch(4);
	hot_pages_mark();
	touch(10);
	touch(3);
	hot_pages_mark();
	touch(12);
}

/* The mappings looked at: a private writable one, of a file or not; an
 * anonymous one alone when anonymous is asked for; never a shared one,
 * a read-only one, or one over 1 GiB (a reservation) */
static bool listed(const struct hot_range *r, size_t n, const void *at, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].start == (uintptr_t)at && r[i].len == len)
			return true;
	return false;
}

START_TEST(test_the_maps_looked_at)
{
	size_t len = 4 * (size_t)sysconf(_SC_PAGESIZE), big = (size_t)3 << 30, n;
	char path[] = "/tmp/pycell-unit-maps-XXXXXX";
	int fd = mkstemp(path);
	struct hot_range *r;
	void *anon, *file, *shared, *ro, *huge;

	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
	/* each with its own protection, so that none merges with a neighbour */
	anon = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	file = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	shared = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ro = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	huge = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert(anon != MAP_FAILED && file != MAP_FAILED && shared != MAP_FAILED && ro != MAP_FAILED &&
		  huge != MAP_FAILED);
	ck_assert_int_eq(mprotect((char *)anon + len / 2, len / 2, PROT_READ | PROT_WRITE | PROT_EXEC), 0);

	ck_assert_int_eq(hot_pages_maps(&r, &n, false), 0);
	ck_assert(listed(r, n, anon, len / 2) && listed(r, n, file, len));
	ck_assert(!listed(r, n, shared, len) && !listed(r, n, ro, len) && !listed(r, n, huge, big));
	free(r);
	ck_assert_int_eq(hot_pages_maps(&r, &n, true), 0);
	ck_assert(listed(r, n, anon, len / 2) && !listed(r, n, file, len));
	ck_assert(!listed(r, n, shared, len) && !listed(r, n, ro, len) && !listed(r, n, huge, big));
	free(r);
	munmap(anon, len);
	munmap(file, len);
	munmap(shared, len);
	munmap(ro, len);
	munmap(huge, big);
	close(fd);
}
END_TEST

/* Each phase's pages are those it wrote first: a page an earlier phase
 * wrote is not a later one's, and phases past those asked for are
 * dropped.  A mark outside a probe does nothing. */
START_TEST(test_the_probe_learns_each_phase_apart)
{
	struct hot_pages h[3];

	setup_hot_buf();
	hot_pages_mark();
	ck_assert_int_eq(hot_pages_learn(h, 2, probe_in_phases), 0);
	for (size_t i = 0; i < HOT_BUF_PAGES; i++) {
		ck_assert_msg(covered(&h[0], i) == (i >= 2 && i <= 4), "phase 0, page %zu", i);
		ck_assert_msg(covered(&h[1], i) == (i == 10), "phase 1, page %zu", i);
	}
	/* and maybe a page of the probe's own (its stack, the list of pages it
	 * reported): the buffer's are exact */
	ck_assert_uint_ge(h[1].pages, 1);
	hot_pages_free(h, 2);
	ck_assert_int_eq(hot_pages_learn(h, 3, probe_in_phases), 0);
	for (size_t i = 0; i < HOT_BUF_PAGES; i++)
		ck_assert_msg(covered(&h[2], i) == (i == 12), "phase 2, page %zu", i);
	hot_pages_free(h, 3);
	for (size_t i = 0; i < 3; i++)
		ck_assert_uint_eq(h[i].n, 0);
}
END_TEST

static void probe_hangs(void)
{
	pause();
}

static void probe_hangs_in_its_second_phase(void)
{
	touch(2);
	hot_pages_mark();
	touch(5);
	pause();
}

/* A probe that does not end is killed: nothing is learned, and the
 * zygote goes on (its jails take their faults) */
START_TEST(test_a_probe_that_hangs_is_killed)
{
	struct hot_pages h;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(hot_pages_learn(&h, 1, probe_hangs), -1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_uint_eq(h.n, 0);
	ck_assert_uint_eq(h.pages, 0);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 4);
	ck_assert_int_eq(hot_pages_populate(&h), 0);
}
END_TEST

/* One killed in a later phase keeps the phases it ended: a slow first
 * use costs its own pages only */
START_TEST(test_a_probe_killed_in_a_phase_keeps_those_it_ended)
{
	struct hot_pages h[2];

	setup_hot_buf();
	ck_assert_int_eq(hot_pages_learn(h, 2, probe_hangs_in_its_second_phase), 0);
	for (size_t i = 0; i < HOT_BUF_PAGES; i++)
		ck_assert_msg(covered(&h[0], i) == (i == 2), "phase 0, page %zu", i);
	ck_assert_uint_eq(h[1].n, 0);
	hot_pages_free(h, 2);
}
END_TEST

Suite *warm_suite(void)
{
	Suite *s = suite_create("warm");
	TCase *t = tcase_create("request");
	tcase_add_test(t, test_table_covers_the_spec);
	tcase_add_test(t, test_every_row_holds_through_the_request);
	tcase_add_loop_test(t, test_never_rows_are_refused, 0, (int)warm_n_members);
	suite_add_tcase(s, t);
	t = tcase_create("messages");
	tcase_add_test(t, test_a_reset_does_not_hide_the_error);
	suite_add_tcase(s, t);
	t = tcase_create("hot pages");
	tcase_add_test(t, test_the_probe_learns_the_pages_it_wrote);
	tcase_add_test(t, test_a_clone_copies_them_ahead);
	tcase_add_test(t, test_the_probe_learns_each_phase_apart);
	tcase_add_test(t, test_the_maps_looked_at);
	tcase_add_test(t, test_a_probe_that_hangs_is_killed);
	tcase_add_test(t, test_a_probe_killed_in_a_phase_keeps_those_it_ended);
	suite_add_tcase(s, t);
	return s;
}
