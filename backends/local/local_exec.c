/* exec for the local backend: nsenter into the running sandbox's
 * namespaces and root, drop all capabilities (with CAP_SYS_ADMIN in its
 * user namespace it could remount the read-only host dirs writable; a root
 * daemon's sandbox keeps the few that act on its own id range only), then
 * env -i sets the environment and the working directory and runs argv. */
#include "local.h"
#include "backends/exec_pump.h"
#include "util/call_deadline.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const guest_defaults[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	NULL,
};

/* argv for the host-side nsenter; every string outlives the fork. */
static const char **build_argv(struct sb_backend *b, struct local *l,
			       const struct sb_exec_req *req, char *pidbuf,
			       size_t pidlen)
{
	size_t n = 40;
	for (size_t i = 0; b->spec.env && b->spec.env[i]; i++)
		n++;
	for (size_t i = 0; req->env && req->env[i]; i++)
		n++;
	for (size_t i = 0; req->argv[i]; i++)
		n++;
	const char **v = calloc(n, sizeof(*v));
	if (!v)
		return NULL;
	snprintf(pidbuf, pidlen, "%d", (int)l->init_pid);
	size_t k = 0;
	static const char *const head[] = {
		"/usr/bin/nsenter", "-t", NULL, "-U", "-m", "-p", "-n", "-i",
		"-u", "-C", "-r", "-w", "--preserve-credentials", "--",
		"/usr/bin/setpriv", "--bounding-set=-all", "--inh-caps=-all",
		"--no-new-privs", "--", "/usr/bin/env", "-i", "-C", NULL, "--",
	};
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		v[k++] = head[i];
	v[2] = pidbuf;
	/* In a mapped range the command runs as the namespace's root (host
	 * id uid_base); unmapped, it keeps our ids, which map to themselves. */
	if (l->ids.mapped) {
		v[12] = "--setuid=0";
		/* root of its own id range: it may own and chmod its files, as
		 * root in a container; these act on mapped ids only, so on
		 * nothing of the host's. Still no CAP_SYS_ADMIN. */
		v[15] = "--bounding-set=-all,+chown,+fowner,+fsetid,+dac_override";
	}
	v[22] = req->cwd ? req->cwd : b->spec.workdir;
	for (size_t i = 0; guest_defaults[i]; i++)
		v[k++] = guest_defaults[i];
	for (size_t i = 0; b->spec.env && b->spec.env[i]; i++)
		v[k++] = b->spec.env[i];
	for (size_t i = 0; req->env && req->env[i]; i++)
		if (strchr(req->env[i], '='))
			v[k++] = req->env[i];
	for (size_t i = 0; req->argv[i]; i++)
		v[k++] = req->argv[i];
	v[k] = NULL;
	return v;
}

struct io {
	int out, err;          /* read ends of the command's stdout/stderr */
	int in;                /* our end of its stdin socket, -1 once closed */
	struct stdin_pump stdin;
};

/* Reads what is there; 0 = go on, 1 = EOF, <0 = callback abort/error. */
static int pump_output(int *fd, sb_output_fn fn, void *arg)
{
	char buf[EXEC_IO_CHUNK];
	for (;;) {
		ssize_t n = read(*fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		if (n == 0) {
			close(*fd);
			*fd = -1;
			return 1;
		}
		if (fn) {
			int rc = fn(arg, buf, (size_t)n);
			if (rc < 0)
				return rc;
		}
	}
}

static ssize_t send_stdin(void *arg, const char *buf, size_t len)
{
	struct io *io = arg;
	ssize_t n = send(io->in, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
	return n;
}

static void close_stdin(void *arg)
{
	struct io *io = arg;
	close(io->in);
	io->in = -1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int local_exec(struct sb_backend *b, const struct sb_exec_req *req,
	       struct sb_exec_result *res)
{
	struct local *l = b->priv;
	struct sb_exec_req bounded;
	int rc = exec_begin(req, &bounded, res);
	if (rc < 0)
		return rc;
	req = &bounded;
	char pidbuf[16];
	const char **argv = build_argv(b, l, req, pidbuf, sizeof(pidbuf));
	if (!argv)
		return -ENOMEM;
	int outp[2] = {-1, -1}, errp[2] = {-1, -1}, inp[2] = {-1, -1};
	if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, inp) < 0) {
		rc = -errno;
		goto out_fds;
	}
	static char *const empty_env[] = {NULL};
	pid_t pid = fork();
	if (pid == 0) {
		/* async-signal-safe only: the daemon is multithreaded. Own
		 * session and process group, so a kill reaches everything. */
		setsid();
		dup2(inp[0], 0);
		dup2(outp[1], 1);
		dup2(errp[1], 2);
		syscall(SYS_close_range, 3U, ~0U, 0U);
		execve(argv[0], (char *const *)argv, empty_env);
		static const char msg[] = "sbfs: cannot run nsenter\n";
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(127);
	}
	if (pid < 0) {
		rc = -errno;
		goto out_fds;
	}
	close_fd(&inp[0]);
	close_fd(&outp[1]);
	close_fd(&errp[1]);
	int child_fd = (int)syscall(SYS_pidfd_open, pid, 0);
	fcntl(outp[0], F_SETFL, O_NONBLOCK);
	fcntl(errp[0], F_SETFL, O_NONBLOCK);
	shutdown(inp[1], SHUT_RD);
	struct io *io = calloc(1, sizeof(*io));
	if (!io) {
		kill(-pid, SIGKILL);
		rc = -ENOMEM;
		goto reap;
	}
	io->out = outp[0];
	io->err = errp[0];
	io->in = inp[1];
	stdin_pump_init(&io->stdin, req->stdin_fd, true);
	const struct stdin_sink to_stdin = {send_stdin, close_stdin, io};
	outp[0] = errp[0] = inp[1] = -1;

	double deadline = req->timeout_s > 0 ? call_deadline_now() + req->timeout_s : 0;
	bool exited = false, kill_it = false;
	while (!exited || io->out >= 0 || io->err >= 0) {
		struct pollfd p[7];
		int np = 0;
		int i_out = -1, i_err = -1, i_src = -1, i_in = -1, i_cancel = -1,
		    i_box = -1, i_child = -1;
		if (io->out >= 0) { i_out = np; p[np++] = (struct pollfd){io->out, POLLIN, 0}; }
		if (io->err >= 0) { i_err = np; p[np++] = (struct pollfd){io->err, POLLIN, 0}; }
		if (!exited && stdin_pump_wants_src(&io->stdin)) {
			i_src = np; p[np++] = (struct pollfd){io->stdin.src, POLLIN, 0};
		}
		if (!exited && stdin_pump_wants_dst(&io->stdin)) {
			i_in = np; p[np++] = (struct pollfd){io->in, POLLOUT, 0};
		}
		if (req->cancel_fd >= 0) { i_cancel = np; p[np++] = (struct pollfd){req->cancel_fd, POLLIN, 0}; }
		i_box = np; p[np++] = (struct pollfd){l->bwrap_pidfd, POLLIN, 0};
		if (!exited && child_fd >= 0) { i_child = np; p[np++] = (struct pollfd){child_fd, POLLIN, 0}; }
		int wait_ms = exited ? 0 : -1;
		if (deadline > 0 && !exited) {
			double left = deadline - call_deadline_now();
			wait_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
		}
		if (!exited && child_fd < 0 && (wait_ms < 0 || wait_ms > 50))
			wait_ms = 50; /* no pidfd: poll for the exit */
		int n = poll(p, (nfds_t)np, wait_ms);
		if (n < 0 && errno != EINTR) {
			rc = -errno;
			kill_it = true;
			break;
		}
		if (n < 0)
			continue;
		if (deadline > 0 && !exited && call_deadline_now() >= deadline) {
			res->timed_out = true;
			kill_it = true;
			break;
		}
		if (i_cancel >= 0 && p[i_cancel].revents) {
			res->cancelled = true;
			kill_it = true;
			break;
		}
		if (p[i_box].revents) {
			res->sandbox_terminated = true;
			rc = sb_backend_fail(b, "sandbox (bwrap pid %d) exited or was killed",
					     (int)l->bwrap_pid);
			kill_it = true;
			break;
		}
		if (i_out >= 0 && p[i_out].revents) {
			int r = pump_output(&io->out, req->on_stdout, req->cb_arg);
			if (r < 0) { rc = r; kill_it = true; break; }
		}
		if (i_err >= 0 && p[i_err].revents) {
			int r = pump_output(&io->err, req->on_stderr, req->cb_arg);
			if (r < 0) { rc = r; kill_it = true; break; }
		}
		if (!exited)
			stdin_pump_step(&io->stdin, i_src >= 0 && p[i_src].revents,
					i_in >= 0 && p[i_in].revents, &to_stdin);
		if (!exited) {
			siginfo_t si = {0};
			bool check = child_fd < 0 || (i_child >= 0 && p[i_child].revents);
			if (check && waitid(P_PID, (id_t)pid, &si,
					    WEXITED | WNOHANG | WNOWAIT) == 0 &&
			    si.si_pid == pid)
				exited = true;
		} else {
			/* exited and drained what was buffered: a background
			 * process still holding the pipes does not keep us */
			break;
		}
	}
	if (kill_it)
		kill(-pid, SIGKILL);
	close_fd(&io->out);
	close_fd(&io->err);
	close_fd(&io->in);
	free(io);
reap:;
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (child_fd >= 0)
		close(child_fd);
	if (!res->timed_out && !res->cancelled && !res->sandbox_terminated) {
		if (WIFSIGNALED(status))
			res->term_signal = WTERMSIG(status);
		else
			res->exit_code = WEXITSTATUS(status);
	}
	if (rc == 0 && !res->sandbox_terminated && sb_backend_is_dead(b)) {
		res->sandbox_terminated = true;
		rc = -EIO;
	}
out_fds:
	close_fd(&outp[0]); close_fd(&outp[1]);
	close_fd(&errp[0]); close_fd(&errp[1]);
	close_fd(&inp[0]); close_fd(&inp[1]);
	free(argv);
	return rc;
}
