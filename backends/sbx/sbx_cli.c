/* One run of the `sbx` CLI: an argv (never a shell), its stdin fed from a
 * file descriptor, both outputs streamed to callbacks, and a deadline.
 * For `sbx exec -t` its stdin and stdout are a host pty instead of
 * pipes: like docker's, the CLI relays its own terminal to the one it
 * asks for in the VM, and reads that terminal's size and SIGWINCH.
 * The CLI runs in a process group of its own so that killing it reaches
 * whatever it forked on the host; killing it does not stop a command in
 * the guest (sbx_exec.c does that inside the guest). */
#include "sbx.h"
#include "backends/exec_pump.h"
#include "backends/exec_tty.h"
#include "backends/output_capture.h"
#include "util/call_deadline.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

struct pipes {
	int out, err, in;
	bool tty;            /* out and in are the pty's master */
	struct stdin_pump pump;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static ssize_t send_in(void *arg, const char *buf, size_t len)
{
	struct pipes *p = arg;
	ssize_t n = p->tty ? write(p->in, buf, len)
			   : send(p->in, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
	return n;
}

static void close_in(void *arg)
{
	struct pipes *p = arg;
	if (p->tty)
		exec_tty_type_eof(&p->in);
	else
		close_fd(&p->in);
}

static pid_t spawn(const struct sbx_call *c, const char **argv, int in,
		   int out, int err)
{
	pid_t pid = fork();
	if (pid == 0) {
		/* async-signal-safe only: the daemon is multithreaded. The
		 * CLI, and through it the guest command, start with no signal
		 * blocked or ignored: a mask inherited from a daemon thread
		 * would survive into the VM and make the guest's timeout and
		 * Ctrl-C (SIGTERM) do nothing. */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		static const int reset[] = {SIGPIPE, SIGINT, SIGQUIT, SIGTERM,
					    SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2};
		for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
			signal(reset[i], SIG_DFL);
		setsid();
		if (in < 0)
			in = open("/dev/null", O_RDONLY);
		dup2(in, 0);
		dup2(out, 1);
		dup2(err, 2);
		/* the pty is its controlling terminal: a size change we set on
		 * the master reaches it as SIGWINCH */
		if (c->tty)
			ioctl(0, TIOCSCTTY, 0);
		syscall(SYS_close_range, 3U, ~0U, 0U);
		execve(c->cli, (char *const *)argv, environ);
		static const char msg[] = "sbfs: cannot run the sbx CLI\n";
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(127);
	}
	return pid;
}

int sbx_cli_run(const struct sbx_call *c, struct sbx_outcome *o)
{
	memset(o, 0, sizeof(*o));
	size_t n = 0;
	while (c->args[n])
		n++;
	const char **argv = calloc(n + 2, sizeof(*argv));
	if (!argv)
		return -ENOMEM;
	argv[0] = c->cli;
	memcpy(argv + 1, c->args, n * sizeof(*argv));
	int outp[2] = {-1, -1}, errp[2] = {-1, -1}, inp[2] = {-1, -1};
	int rc = 0;
	if (c->tty) {
		/* master: outp[0] read, inp[1] written; slave: the CLI's stdin
		 * and stdout (outp[1], inp[0] the same descriptor's copies) */
		int slave = -1;
		rc = exec_tty_open(c->tty, &outp[0], &inp[1], &slave);
		if (rc < 0)
			goto out;
		/* Raw, as the CLI makes it (docker's does): what is typed goes
		 * as is to the VM's terminal, which echoes and cooks it; a
		 * cooked pty here would echo it twice, and eat a ^D typed
		 * before the CLI went raw. */
		struct termios t;
		if (tcgetattr(slave, &t) == 0) {
			cfmakeraw(&t);
			tcsetattr(slave, TCSANOW, &t);
		}
		outp[1] = slave;
		inp[0] = fcntl(slave, F_DUPFD_CLOEXEC, 0);
		if (inp[0] < 0 || pipe2(errp, O_CLOEXEC) < 0) {
			rc = -errno;
			goto out;
		}
	} else if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
		   (c->stdin_fd >= 0 &&
		    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, inp) < 0)) {
		rc = -errno;
		goto out;
	}
	pid_t pid = spawn(c, argv, inp[0], outp[1], errp[1]);
	if (pid < 0) {
		rc = -errno;
		goto out;
	}
	close_fd(&inp[0]);
	close_fd(&outp[1]);
	close_fd(&errp[1]);
	int child_fd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pipes p = {.out = outp[0], .err = errp[0], .in = inp[1], .tty = c->tty != NULL};
	outp[0] = errp[0] = inp[1] = -1;
	fcntl(p.out, F_SETFL, O_NONBLOCK);
	fcntl(p.err, F_SETFL, O_NONBLOCK);
	if (p.tty)
		fcntl(p.in, F_SETFL, O_NONBLOCK);
	else if (p.in >= 0)
		shutdown(p.in, SHUT_RD);
	stdin_pump_init(&p.pump, c->stdin_fd, p.in >= 0);
	const struct stdin_sink sink = {send_in, close_in, &p};

	double timeout = call_deadline_clamp(c->timeout_s);
	double deadline = timeout > 0 ? call_deadline_now() + timeout : 0;
	double drain_until = 0;
	bool exited = false, kill_it = false;
	for (;;) {
		struct pollfd f[8];
		int nf = 0, i_out = -1, i_err = -1, i_src = -1, i_in = -1,
		    i_cancel = -1, i_sig = -1, i_child = -1, i_size = -1;
		bool feed = !exited && (!c->stdin_ready || c->stdin_ready(c->cb_arg));
		if (p.out >= 0) { i_out = nf; f[nf++] = (struct pollfd){p.out, POLLIN, 0}; }
		if (p.err >= 0) { i_err = nf; f[nf++] = (struct pollfd){p.err, POLLIN, 0}; }
		if (feed && stdin_pump_wants_src(&p.pump)) {
			i_src = nf; f[nf++] = (struct pollfd){p.pump.src, POLLIN, 0};
		}
		if (feed && stdin_pump_wants_dst(&p.pump)) {
			i_in = nf; f[nf++] = (struct pollfd){p.in, POLLOUT, 0};
		}
		if (!exited && c->tty) { i_size = nf; f[nf++] = (struct pollfd){c->tty->resize_fd, POLLIN, 0}; }
		if (c->cancel_fd >= 0) { i_cancel = nf; f[nf++] = (struct pollfd){c->cancel_fd, POLLIN, 0}; }
		if (!exited && c->signal_fd >= 0 && c->on_signal) {
			i_sig = nf; f[nf++] = (struct pollfd){c->signal_fd, POLLIN, 0};
		}
		if (!exited && child_fd >= 0) { i_child = nf; f[nf++] = (struct pollfd){child_fd, POLLIN, 0}; }
		/* a pty's last bytes may need a moment (see below) */
		int wait_ms = exited ? (p.tty ? 100 : 0) : -1;
		if (deadline > 0 && !exited) {
			double left = deadline - call_deadline_now();
			wait_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
		}
		if (!exited && child_fd < 0 && (wait_ms < 0 || wait_ms > 50))
			wait_ms = 50; /* no pidfd: poll for the exit */
		int r = poll(f, (nfds_t)nf, wait_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			kill_it = true;
			break;
		}
		if (i_out >= 0 && f[i_out].revents) {
			int d = exec_pump_fd(&p.out, c->on_stdout, c->cb_arg);
			if (d < 0) { o->cb_rc = d; kill_it = true; break; }
		}
		if (i_err >= 0 && f[i_err].revents) {
			int d = exec_pump_fd(&p.err, c->on_stderr, c->cb_arg);
			if (d < 0) { o->cb_rc = d; kill_it = true; break; }
		}
		if (exited) {
			/* ended and drained what was there: a guest process left
			 * in the background holding the pipes does not keep us.
			 * A pty is read to its end (EIO once the CLI's side is
			 * closed), which also takes what the kernel still held
			 * of the CLI's last writes; bounded all the same. */
			if (!p.tty || p.out < 0 || call_deadline_now() >= drain_until)
				break;
			continue;
		}
		if (deadline > 0 && call_deadline_now() >= deadline) {
			o->timed_out = true;
			kill_it = true;
			break;
		}
		if (i_cancel >= 0 && f[i_cancel].revents) {
			o->cancelled = true;
			kill_it = true;
			break;
		}
		if (i_sig >= 0 && f[i_sig].revents) {
			int sig = exec_forwarded_signal(c->signal_fd);
			if (sig)
				c->on_signal(c->cb_arg, sig);
		}
		if (i_size >= 0 && f[i_size].revents)
			exec_tty_follow_size(c->tty, p.out);
		if (feed)
			stdin_pump_step(&p.pump, i_src >= 0 && f[i_src].revents,
					i_in >= 0 && f[i_in].revents, &sink);
		siginfo_t si = {0};
		bool check = child_fd < 0 || (i_child >= 0 && f[i_child].revents);
		if (check && waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == pid) {
			exited = true;
			drain_until = call_deadline_now() + 2.0;
		}
	}
	if (kill_it)
		kill(-pid, SIGKILL);
	close_fd(&p.out);
	close_fd(&p.err);
	close_fd(&p.in);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (child_fd >= 0)
		close(child_fd);
	o->exited = !kill_it;
	o->status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
out:
	close_fd(&outp[0]); close_fd(&outp[1]);
	close_fd(&errp[0]); close_fd(&errp[1]);
	close_fd(&inp[0]); close_fd(&inp[1]);
	free(argv);
	return rc;
}

/* sbx_cli_capture's callbacks: cb_arg is both captures, [0] stdout. */
static int capture_out(void *arg, const char *d, size_t n)
{
	struct output_capture **both = arg;
	return output_capture_cb(both[0], d, n);
}

static int capture_err(void *arg, const char *d, size_t n)
{
	struct output_capture **both = arg;
	return output_capture_cb(both[1], d, n);
}

int sbx_cli_capture(const char *cli, const char *const *args, double timeout_s,
		    size_t out_limit, struct sbx_outcome *o, char **out, char **err)
{
	struct output_capture co = {.limit = out_limit};
	struct output_capture ce = {.limit = 8192, .keep_head = true};
	struct output_capture *both[2] = {&co, &ce};
	struct sbx_call c = {
		.cli = cli, .args = args, .stdin_fd = -1, .timeout_s = timeout_s,
		.cancel_fd = -1, .signal_fd = -1, .on_stdout = capture_out,
		.on_stderr = capture_err, .cb_arg = both,
	};
	int rc = sbx_cli_run(&c, o);
	if (rc == 0 && o->cb_rc)
		rc = o->cb_rc;
	*out = co.data;
	*err = ce.data;
	if (rc < 0) {
		output_capture_free(&co);
		output_capture_free(&ce);
		*out = *err = NULL;
	}
	return rc;
}
