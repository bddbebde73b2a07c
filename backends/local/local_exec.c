/* exec for the local backend: nsenter into the running sandbox's
 * namespaces and root, drop all capabilities (with CAP_SYS_ADMIN in its
 * user namespace it could remount the read-only host dirs writable; a root
 * daemon's sandbox keeps the few that act on its own id range only), then
 * env -i sets the environment and the working directory and runs argv. */
#include "local.h"
#include "backends/exec_pump.h"
#include "backends/exec_tty.h"
#include "util/call_deadline.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
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

/* sig to every process in the group `group` or the session `session`
 * (0: none) but `skip`. /proc/N/stat: pid (comm) state ppid pgrp session;
 * comm may hold anything, so the fields are read after its last ')'. */
static void signal_processes(pid_t group, pid_t session, pid_t skip, int sig)
{
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long p = strtol(e->d_name, &end, 10);
		if (*end || p <= 0 || p == skip)
			continue;
		char path[64], buf[512];
		snprintf(path, sizeof path, "/proc/%ld/stat", p);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		const char *rp = strrchr(buf, ')');
		long pgrp, sid;
		char state;
		if (rp && sscanf(rp + 1, " %c %*d %ld %ld", &state, &pgrp, &sid) == 3 &&
		    (pgrp == group || (session > 0 && sid == session)))
			kill((pid_t)p, sig);
	}
	closedir(d);
}

/* The pid of nsenter's one child (it forks into the pid namespace, then
 * execs setpriv, env, setsid and the command), 0 while there is none. */
static pid_t command_leader(pid_t nsenter)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)nsenter, (int)nsenter);
	FILE *f = fopen(path, "re");
	long child = 0;
	if (f) {
		if (fscanf(f, "%ld", &child) != 1)
			child = 0;
		fclose(f);
	}
	return (pid_t)child;
}

/* A forwarded signal, as a terminal's Ctrl-C reaches its foreground
 * group: with a terminal, the group it says is in front; else the group
 * setsid gave the command. One kill(2) of the group: the kernel lets no
 * fork slip past it, where one kill per process found in /proc missed a
 * sleep the shell forked meanwhile, and the shell waited on it with its
 * trap pending (CI: "sbexec still running after 1 HUP"). False while the
 * group does not exist yet (the command is still starting): the caller
 * holds the signal and tries again. */
static bool signal_command(pid_t nsenter, int tty_master, int sig)
{
	pid_t front = tty_master >= 0 ? tcgetpgrp(tty_master) : -1;
	if (tty_master >= 0)
		return front > 0 && kill(-front, sig) == 0;
	pid_t leader = command_leader(nsenter);
	return leader > 0 && getpgid(leader) == leader && kill(-leader, sig) == 0;
}

/* Kills everything the command started: its process group and the
 * session setsid made it (its own, so that a forwarded signal reaches the
 * command's group and not nsenter, and a terminal's foreground group
 * lives in the sandbox's pid namespace). */
static void kill_command(pid_t nsenter)
{
	/* The session's id is the pid of nsenter's one child (setsid does not
	 * fork: that child leads no group), read before nsenter dies. */
	pid_t session = command_leader(nsenter);
	kill(-nsenter, SIGKILL);
	if (session > 0)
		signal_processes(0, session, 0, SIGKILL);
}

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
	/* A command that may get forwarded signals leads a session and a
	 * group of its own: a signal goes to that group in one kill; with a
	 * terminal, it is the sandbox's own session leader, its terminal
	 * controlling. (Not the file calls' commands: one exec less each.) */
	if (req->tty || exec_signal_fd(req) >= 0)
		v[k++] = "/usr/bin/setsid";
	if (req->tty)
		v[k++] = "--ctty";
	for (size_t i = 0; req->argv[i]; i++)
		v[k++] = req->argv[i];
	v[k] = NULL;
	return v;
}

struct io {
	int out, err;          /* read ends of the command's stdout/stderr */
	int in;                /* our end of its stdin socket, -1 once closed */
	bool tty;              /* out and in are a pty's master; err is -1 */
	struct stdin_pump stdin;
};

static ssize_t send_stdin(void *arg, const char *buf, size_t len)
{
	struct io *io = arg;
	ssize_t n = io->tty ? write(io->in, buf, len)
			    : send(io->in, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
	return n;
}

static void close_stdin(void *arg)
{
	struct io *io = arg;
	if (io->tty) {
		exec_tty_type_eof(&io->in);
		return;
	}
	close(io->in);
	io->in = -1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Starts argv (nsenter) on in, out and err, in a session of its own so a
 * kill reaches everything, with no signal blocked and every standard one
 * at its default: a mask or disposition of a daemon thread would outlive
 * the exec into the command. (glibc leaves its two internal real-time
 * signals ignored in a spawned child; a C library sets them up where it
 * uses them.) posix_spawn, not fork: no copy of the daemon's page tables
 * on every command. A tty slave (in == out == err) is not our controlling
 * terminal: setsid --ctty in the sandbox makes it the command's
 * (build_argv). */
static int spawn_command(const char **argv, int in, int out, int err,
			 pid_t *pid)
{
	static char *const empty_env[] = {NULL};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	int rc = posix_spawn_file_actions_init(&fa);
	if (rc)
		return -rc;
	rc = posix_spawnattr_init(&at);
	if (rc) {
		posix_spawn_file_actions_destroy(&fa);
		return -rc;
	}
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	if (!(rc = posix_spawn_file_actions_adddup2(&fa, in, 0)) &&
	    !(rc = posix_spawn_file_actions_adddup2(&fa, out, 1)) &&
	    !(rc = posix_spawn_file_actions_adddup2(&fa, err, 2)) &&
	    !(rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) &&
	    !(rc = posix_spawnattr_setsigmask(&at, &none)) &&
	    !(rc = posix_spawnattr_setsigdefault(&at, &all)) &&
	    !(rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID |
						     POSIX_SPAWN_SETSIGMASK |
						     POSIX_SPAWN_SETSIGDEF)))
		rc = posix_spawn(pid, argv[0], &fa, &at, (char *const *)argv,
				 empty_env);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return -rc;
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
	int outp[2] = {-1, -1}, errp[2] = {-1, -1}, inp[2] = {-1, -1}, tty_slave = -1;
	if (req->tty) {
		/* its master read as the output, written as the input; the
		 * slave the command's stdin, stdout, stderr and terminal */
		rc = exec_tty_open(req->tty, &outp[0], &inp[1], &tty_slave);
		if (rc < 0)
			goto out_fds;
	} else if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
		   socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, inp) < 0) {
		rc = -errno;
		goto out_fds;
	}
	pid_t pid;
	rc = spawn_command(argv, tty_slave >= 0 ? tty_slave : inp[0],
			   tty_slave >= 0 ? tty_slave : outp[1],
			   tty_slave >= 0 ? tty_slave : errp[1], &pid);
	if (rc < 0)
		goto out_fds;
	close_fd(&tty_slave);
	close_fd(&inp[0]);
	close_fd(&outp[1]);
	close_fd(&errp[1]);
	int child_fd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* A read window comes through this pipe: at the default 64 KiB it
	 * took three times as long as at 1 MiB here (a wake-up per 64 KiB).
	 * Best effort: the system's pipe-max-size may be lower. */
	if (!req->tty)
		fcntl(outp[0], F_SETPIPE_SZ, 1 << 20);
	fcntl(outp[0], F_SETFL, O_NONBLOCK);
	fcntl(errp[0], F_SETFL, O_NONBLOCK);
	if (!req->tty)
		shutdown(inp[1], SHUT_RD);
	struct io *io = calloc(1, sizeof(*io));
	if (!io) {
		kill_command(pid);
		rc = -ENOMEM;
		goto reap;
	}
	io->out = outp[0];
	io->err = errp[0];
	io->in = inp[1];
	io->tty = req->tty != NULL;
	/* No stdin to forward: the command reads end of file at once (an
	 * open, silent stdin would hang `cat` or a shell forever). */
	stdin_pump_init(&io->stdin, req->stdin_fd, req->stdin_fd >= 0);
	const struct stdin_sink to_stdin = {send_stdin, close_stdin, io};
	outp[0] = errp[0] = inp[1] = -1;
	if (req->stdin_fd < 0)
		close_stdin(io);

	double deadline = req->timeout_s > 0 ? call_deadline_now() + req->timeout_s : 0;
	bool exited = false, kill_it = false;
	const int sig_fd = exec_signal_fd(req);
	int held_sig = 0; /* forwarded before the command's group existed */
	while (!exited || io->out >= 0 || io->err >= 0) {
		struct pollfd p[9];
		int np = 0;
		int i_out = -1, i_err = -1, i_src = -1, i_in = -1, i_cancel = -1,
		    i_box = -1, i_child = -1, i_sig = -1, i_size = -1;
		if (io->out >= 0) { i_out = np; p[np++] = (struct pollfd){io->out, POLLIN, 0}; }
		if (io->err >= 0) { i_err = np; p[np++] = (struct pollfd){io->err, POLLIN, 0}; }
		if (!exited && stdin_pump_wants_src(&io->stdin)) {
			i_src = np; p[np++] = (struct pollfd){io->stdin.src, POLLIN, 0};
		}
		if (!exited && stdin_pump_wants_dst(&io->stdin)) {
			i_in = np; p[np++] = (struct pollfd){io->in, POLLOUT, 0};
		}
		if (req->cancel_fd >= 0) { i_cancel = np; p[np++] = (struct pollfd){req->cancel_fd, POLLIN, 0}; }
		if (!exited && sig_fd >= 0) { i_sig = np; p[np++] = (struct pollfd){sig_fd, POLLIN, 0}; }
		if (!exited && req->tty && io->out >= 0) {
			i_size = np; p[np++] = (struct pollfd){req->tty->resize_fd, POLLIN, 0};
		}
		i_box = np; p[np++] = (struct pollfd){l->bwrap_pidfd, POLLIN, 0};
		if (!exited && child_fd >= 0) { i_child = np; p[np++] = (struct pollfd){child_fd, POLLIN, 0}; }
		int wait_ms = exited ? 0 : -1;
		if (deadline > 0 && !exited) {
			double left = deadline - call_deadline_now();
			wait_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
		}
		if (!exited && child_fd < 0 && (wait_ms < 0 || wait_ms > 50))
			wait_ms = 50; /* no pidfd: poll for the exit */
		if (held_sig && !exited && (wait_ms < 0 || wait_ms > 10))
			wait_ms = 10; /* until the command's group exists */
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
		if (i_size >= 0 && p[i_size].revents)
			exec_tty_follow_size(req->tty, io->out);
		if (i_sig >= 0 && p[i_sig].revents) {
			int sig = exec_forwarded_signal(sig_fd);
			if (sig)
				held_sig = sig;
		}
		if (held_sig && !exited &&
		    signal_command(pid, io->tty ? io->out : -1, held_sig))
			held_sig = 0;
		if (p[i_box].revents) {
			res->sandbox_terminated = true;
			rc = sb_backend_fail(b, "sandbox (bwrap pid %d) exited or was killed",
					     (int)l->bwrap_pid);
			kill_it = true;
			break;
		}
		if (i_out >= 0 && p[i_out].revents) {
			int r = exec_pump_fd(&io->out, req->on_stdout, req->cb_arg);
			if (r < 0) { rc = r; kill_it = true; break; }
		}
		if (i_err >= 0 && p[i_err].revents) {
			int r = exec_pump_fd(&io->err, req->on_stderr, req->cb_arg);
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
		kill_command(pid);
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
	close_fd(&tty_slave);
	free(argv);
	return rc;
}
