/* sbexec: run a command inside the sandbox behind the current sbfs mount.
 * A thin client: the daemon holds the credentials and runs the command;
 * this process maps the cwd, streams bytes and turns the outcome into an
 * exit status. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/client.h"
#include "control/frame.h"

/* As docker run / GNU timeout: 125 = sbexec or the sandbox failed. */
#define EXIT_FAILED 125
#define EXIT_TIMEDOUT 124

static struct frame_writer writer;
static int sock = -1;
/* Set once stdin EOF has been sent (or stdin is not forwarded): from then
 * on the daemon reads our frames promptly, so a K frame cannot get stuck
 * behind stdin data. */
static atomic_bool stdin_done;
static atomic_int forwarded_signal;

static void usage(FILE *out)
{
	fputs("usage: sbexec [-m MOUNT] [-t SECONDS] [-e K=V]... [-w DIR] [--] CMD [ARG...]\n"
	      "\n"
	      "Runs CMD inside the sandbox behind an sbfs mount, in the sandbox folder\n"
	      "that matches the current directory. No shell is involved: use\n"
	      "`sbexec sh -c '...'` for one.\n"
	      "\n"
	      "  -m MOUNT     use this sbfs mount (default: the one containing the\n"
	      "               current directory)\n"
	      "  -t SECONDS   kill the command after this long (decimals allowed)\n"
	      "  -e K=V       set an environment variable for the command (repeatable)\n"
	      "  -w DIR       run in DIR: absolute in the sandbox, or relative to the\n"
	      "               mapped current directory\n"
	      "  -h, --help   show this help\n"
	      "\n"
	      "stdin is forwarded unless it is a terminal; Ctrl-C kills the remote\n"
	      "command (a second one leaves at once).\n"
	      "\n"
	      "Exit status: the command's; 124 if the timeout fired; 128+N if it was\n"
	      "killed by signal N; 125 if sbexec or the sandbox failed.\n",
	      out);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("sbexec: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	/* _exit: other threads may be mid-write; there is nothing to flush */
	_exit(EXIT_FAILED);
}

/* Asks the daemon to kill the command. While stdin is still streaming, a
 * K frame would queue behind data the command may never read, so the
 * write side is closed instead: the daemon treats that as a kill too, and
 * we keep reading the command's last output and its exit status. */
static void kill_remote(void)
{
	if (atomic_load(&stdin_done))
		(void)frame_write(&writer, FRAME_KILL, NULL, 0);
	else
		shutdown(sock, SHUT_WR);
}

static void *signal_main(void *arg)
{
	sigset_t *set = arg;
	for (;;) {
		int sig;
		if (sigwait(set, &sig) != 0)
			continue;
		if (atomic_exchange(&forwarded_signal, sig) != 0)
			_exit(128 + sig); /* second signal: the user insists */
		kill_remote();
	}
	return NULL;
}

static void *stdin_main(void *arg)
{
	(void)arg;
	static char buf[FRAME_CHUNK];
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fprintf(stderr, "sbexec: cannot read stdin: %s; the command sees end of input\n",
				strerror(errno));
		if (n <= 0)
			break;
		if (atomic_load(&forwarded_signal))
			return NULL;
		if (frame_write(&writer, FRAME_STDIN, buf, (size_t)n) < 0)
			return NULL;
	}
	if (frame_write(&writer, FRAME_STDIN_EOF, NULL, 0) == 0)
		atomic_store(&stdin_done, true);
	return NULL;
}

static int exit_status(const struct frame *f)
{
	json_error_t jerr;
	json_t *x = json_loadb(f->data ? f->data : "", f->len, 0, &jerr);
	if (!json_is_object(x))
		die("the sbfs daemon sent a garbled exit status (is it a different version?)");
	const char *error = json_string_value(json_object_get(x, "error"));
	int code = (int)json_integer_value(json_object_get(x, "exit_code"));
	int sig = (int)json_integer_value(json_object_get(x, "signal"));
	bool timed_out = json_is_true(json_object_get(x, "timed_out"));
	bool cancelled = json_is_true(json_object_get(x, "cancelled"));
	bool terminated = json_is_true(json_object_get(x, "sandbox_terminated"));
	int status;
	if (error) {
		fprintf(stderr, "sbexec: %s\n", error);
		status = EXIT_FAILED;
	} else if (timed_out) {
		status = EXIT_TIMEDOUT;
	} else if (cancelled && atomic_load(&forwarded_signal)) {
		/* As a local command killed by the same Ctrl-C would. */
		status = 128 + atomic_load(&forwarded_signal);
	} else if (sig > 0) {
		status = 128 + sig;
	} else if (terminated) {
		fprintf(stderr, "sbexec: the sandbox terminated during the command\n");
		status = EXIT_FAILED;
	} else {
		status = code & 0xff;
	}
	json_decref(x);
	return status;
}

static void write_output(int fd, const struct frame *f)
{
	int rc = write_full(fd, f->data, f->len);
	if (rc == 0)
		return;
	kill_remote();
	if (rc == -EPIPE)
		_exit(128 + SIGPIPE); /* the reader left, as for a local command */
	/* stderr itself may be what failed; nothing better to do then */
	die("cannot write the command's %s: %s; the command was killed",
	    fd == STDOUT_FILENO ? "output" : "error output", strerror(-rc));
}

static int relay(void)
{
	for (;;) {
		struct frame f;
		int rc = frame_read(sock, &f);
		if (rc == 0 || rc == -ECONNRESET)
			die("the sbfs daemon closed the connection before the command finished (did it stop?)");
		if (rc < 0)
			die("lost the connection to the sbfs daemon: %s",
			    rc == -EPROTO ? "garbled data" : strerror(-rc));
		switch (f.type) {
		case FRAME_STDOUT:
			write_output(STDOUT_FILENO, &f);
			break;
		case FRAME_STDERR:
			write_output(STDERR_FILENO, &f);
			break;
		case FRAME_EXIT: {
			int status = exit_status(&f);
			frame_free(&f);
			return status;
		}
		case FRAME_JSON: {
			json_error_t jerr;
			json_t *j = json_loadb(f.data ? f.data : "", f.len, 0, &jerr);
			const char *e = json_string_value(json_object_get(j, "error"));
			die("%s", e ? e : "the sbfs daemon sent an unexpected reply");
		}
		default:
			die("the sbfs daemon sent an unknown message (is it a different version?)");
		}
		frame_free(&f);
	}
}

static void send_request(double timeout, bool forward_stdin, char **argv,
			 char **env, size_t envc, const char *rel,
			 const char *workdir)
{
	json_t *h = json_pack("{s:s,s:f,s:b}", "op", "exec", "timeout", timeout,
			      "stdin", forward_stdin);
	int rc = h ? frame_write_json(&writer, FRAME_HEADER, h) : -ENOMEM;
	json_decref(h);
	for (size_t i = 0; rc == 0 && argv[i]; i++)
		rc = frame_write_str(&writer, FRAME_ARG, argv[i]);
	for (size_t i = 0; rc == 0 && i < envc; i++)
		rc = frame_write_str(&writer, FRAME_ENV, env[i]);
	if (rc == 0)
		rc = frame_write_str(&writer, FRAME_CWD, rel);
	if (rc == 0 && workdir)
		rc = frame_write_str(&writer, FRAME_WORKDIR, workdir);
	if (rc == 0)
		rc = frame_write(&writer, FRAME_GO, NULL, 0);
	if (rc == -EMSGSIZE)
		die("an argument or variable is larger than %u bytes", FRAME_MAX_PAYLOAD);
	if (rc < 0)
		die("could not send the command to the sbfs daemon: %s", strerror(-rc));
}

int main(int argc, char **argv)
{
	const char *mount = NULL, *workdir = NULL;
	double timeout = 0;
	char **env = calloc((size_t)argc + 1, sizeof *env);
	size_t envc = 0;
	if (!env)
		die("out of memory");

	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{"mount", required_argument, NULL, 'm'},
		{"timeout", required_argument, NULL, 't'},
		{"env", required_argument, NULL, 'e'},
		{"workdir", required_argument, NULL, 'w'},
		{NULL, 0, NULL, 0},
	};
	opterr = 0;
	int c;
	/* '+': options end at the command, so `sbexec ls -l` works */
	while ((c = getopt_long(argc, argv, "+:hm:t:e:w:", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'm':
			mount = optarg;
			break;
		case 't': {
			char *end;
			errno = 0;
			timeout = strtod(optarg, &end);
			if (!*optarg || *end || errno || !isfinite(timeout) || timeout < 0)
				die("-t needs a number of seconds, not '%s'", optarg);
			break;
		}
		case 'e':
			if (!strchr(optarg, '=') || optarg[0] == '=')
				die("-e needs K=V, not '%s'", optarg);
			env[envc++] = optarg;
			break;
		case 'w':
			if (!*optarg)
				die("-w needs a directory");
			workdir = optarg;
			break;
		case ':': {
			static const char *const need[] = {
				['m'] = "a mount directory", ['t'] = "a number of seconds",
				['e'] = "a K=V setting", ['w'] = "a directory"};
			int o = optopt > 0 && optopt < 'x' ? optopt : 0;
			die("-%c needs %s (see sbexec --help)", o ? o : '?',
			    o && need[o] ? need[o] : "a value");
		}
		default:
			if (optopt)
				die("unknown option -%c (see sbexec --help)", optopt);
			die("unknown option %s (see sbexec --help)", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		die("no command given (usage: sbexec [-m MOUNT] [-t SECONDS] [-e K=V]... [-w DIR] [--] CMD [ARG...])");

	char err[PATH_MAX * 2 + 256];
	static struct control_target target;
	if (control_find_mount("sbexec", mount, NULL, &target, err, sizeof err) < 0 ||
	    (sock = control_connect("sbexec", &target, err, sizeof err)) < 0) {
		fprintf(stderr, "%s\n", err);
		free(env);
		return EXIT_FAILED;
	}
	/* A closed stdout must be an error we handle, not a silent death. */
	signal(SIGPIPE, SIG_IGN);
	frame_writer_init(&writer, sock);

	bool forward_stdin = !isatty(STDIN_FILENO);
	/* Blocked everywhere and taken by sigwait in one thread, so a
	 * Ctrl-C never interrupts a half-written frame. */
	static sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	send_request(timeout, forward_stdin, argv + optind, env, envc, target.rel,
		     workdir);
	free(env);

	pthread_t t;
	int rc = pthread_create(&t, NULL, signal_main, &sigs);
	if (rc != 0)
		die("cannot start a thread: %s", strerror(rc));
	pthread_detach(t);
	if (forward_stdin) {
		rc = pthread_create(&t, NULL, stdin_main, NULL);
		if (rc != 0)
			die("cannot start a thread: %s", strerror(rc));
		pthread_detach(t);
	} else {
		if (frame_write(&writer, FRAME_STDIN_EOF, NULL, 0) == 0)
			atomic_store(&stdin_done, true);
	}
	int status = relay();
	/* Flushes stdio only; the helper threads die with the process. */
	fflush(stdout);
	_exit(status);
}
