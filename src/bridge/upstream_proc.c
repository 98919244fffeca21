/* pycell: an upstream MCP server's process: forked in its own session
 * (so its whole group can be killed: an npx-style launcher leaves the real
 * server as a grandchild), dying with the supervisor, with the
 * supervisor's environment and the configuration's entries on top. */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "bridge/upstream_proc.h"

extern char **environ;

/* The supervisor's environment with the config's entries on top. */
static char **build_env(const struct upstream_conf *c)
{
	size_t n = 0, k = 0;
	char **v;
	while (environ && environ[n])
		n++;
	v = xcalloc(n + c->n_env + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		bool overridden = false;
		for (size_t j = 0; j < c->n_env; j++)
			if (strncmp(c->env[j], environ[i], klen) == 0 && c->env[j][klen] == '=')
				overridden = true;
		if (!overridden)
			v[k++] = environ[i];
	}
	for (size_t j = 0; j < c->n_env; j++)
		v[k++] = c->env[j];
	return v;
}

static void child_exec(const struct upstream_conf *c, char **envp, int in, int out, int err, pid_t parent)
{
	sigset_t none;
	char msg[300];
	int n;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setsid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(127);
	syscall(SYS_close_range, 3U, ~0U, 0U);
	execvpe(c->argv[0], c->argv, envp);
	n = snprintf(msg, sizeof(msg), "exec %s: %s\n", c->argv[0], strerror(errno));
	if (n > 0)
		(void)!write(2, msg, (size_t)n);
	_exit(127);
}

int upstream_proc_start(const struct upstream_conf *c, struct upstream_proc *p, struct pc_err *err)
{
	cleanup_pair int in[2] = { -1, -1 }, out[2] = { -1, -1 }, er[2] = { -1, -1 };
	cleanup_free char **envp = build_env(c);
	cleanup_child pid_t pid = -1;
	pid_t parent = getpid();
	int pidfd;

	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0)
		return pc_syserr(err, "upstream", "upstream %s: pipe", c->name);
	pid = fork();
	if (pid < 0)
		return pc_syserr(err, "upstream", "upstream %s: fork", c->name);
	if (pid == 0)
		child_exec(c, envp, in[0], out[1], er[1], parent);
	pidfd = pidfd_open(pid, 0);
	if (pidfd < 0)
		return pc_syserr(err, "upstream", "upstream %s: pidfd_open", c->name);
	set_nonblock(in[1], true);
	set_nonblock(out[0], true);
	set_nonblock(er[0], true);
	/* the server's ends close as this returns */
	*p = (struct upstream_proc){ .pid = steal_pid(&pid), .pidfd = pidfd, .in_fd = steal_fd(&in[1]),
				     .out_fd = steal_fd(&out[0]), .err_fd = steal_fd(&er[0]) };
	return 0;
}
