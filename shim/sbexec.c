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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
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
/* The first SIGINT, SIGTERM or SIGHUP goes to the command's processes
 * (forwarded_signal); the second kills the command (kill_sent); the third
 * leaves at once. */
static atomic_int forwarded_signal;
static atomic_int signals_seen;
static atomic_bool kill_sent;

/* sbexec -t from a terminal: the terminal is raw while the command runs
 * (its own terminal in the sandbox does the line editing and turns Ctrl-C
 * into SIGINT), and restored on every way out. */
static struct termios saved_termios;
static atomic_bool termios_saved;

static void terminal_restore(void)
{
	if (atomic_exchange(&termios_saved, false))
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
}

static void terminal_raw(void)
{
	struct termios t;
	if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
		return;
	t = saved_termios;
	cfmakeraw(&t);
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) == 0)
		atomic_store(&termios_saved, true);
}

/* The size of the terminal on stdin, else stdout; 0 x 0 if neither is
 * one (the sandbox's terminal then keeps its default). */
static void terminal_size(unsigned short *rows, unsigned short *cols)
{
	struct winsize ws = {0};
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 &&
	    ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0)
		ws.ws_row = ws.ws_col = 0;
	*rows = ws.ws_row;
	*cols = ws.ws_col;
}

static void usage(FILE *out)
{
	fputs("usage: sbexec [-i] [-t] [-m MOUNT] [--timeout SECONDS] [-e K=V]... [-w DIR] [--] CMD [ARG...]\n"
	      "\n"
	      "Runs CMD inside the sandbox behind an sbfs mount, in the sandbox folder\n"
	      "that matches the current directory. No shell is involved: use\n"
	      "`sbexec sh -c '...'` for one.\n"
	      "\n"
	      "  -i           keep stdin open even when it is a terminal (python3, sh)\n"
	      "  -t           give the command a terminal (sbexec -it bash; -t implies\n"
	      "               -i); its output and errors then come as one stream\n"
	      "  -m MOUNT     use this sbfs mount (default: the one containing the\n"
	      "               current directory)\n"
	      "  -T, --timeout SECONDS\n"
	      "               kill the command after this long (decimals allowed)\n"
	      "  -e K=V       set an environment variable for the command (repeatable)\n"
	      "  -w DIR       run in DIR: absolute in the sandbox, or relative to the\n"
	      "               mapped current directory\n"
	      "  -h, --help   show this help\n"
	      "  -V, --version  show the version\n"
	      "\n"
	      "stdin is forwarded unless it is a terminal (then the command reads\n"
	      "end of file, unless -i). Ctrl-C, SIGTERM and SIGHUP are sent on to\n"
	      "the command's processes (a trap runs; on modal the first kills\n"
	      "it); a second one kills the\n"
	      "command, a third leaves at once.\n"
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
	terminal_restore();
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
		if (sig == SIGWINCH) {
			unsigned short rows, cols;
			terminal_size(&rows, &cols);
			const unsigned char size[4] = {rows >> 8, rows & 0xff, cols >> 8, cols & 0xff};
			(void)frame_write(&writer, FRAME_RESIZE, (const char *)size, sizeof size);
			continue;
		}
		switch (atomic_fetch_add(&signals_seen, 1)) {
		case 0: {
			/* A daemon whose backend cannot deliver it kills the
			 * command instead. */
			atomic_store(&forwarded_signal, sig);
			char b = (char)sig;
			if (frame_write(&writer, FRAME_SIGNAL, &b, 1) < 0)
				kill_remote();
			break;
		}
		case 1:
			atomic_store(&kill_sent, true);
			kill_remote();
			break;
		default:
			terminal_restore();
			_exit(128 + sig); /* the user insists */
		}
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
		if (atomic_load(&kill_sent))
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
			terminal_restore(); /* before any message */
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

/* The daemon refuses a request as soon as it sees it cannot run (a
 * command line past the sandbox's limit) and closes; what is still being
 * sent then fails with EPIPE. Its reason was sent first and is still
 * queued on the socket: that, not the broken pipe, is what went wrong. */
static _Noreturn void die_with_refusal(int send_rc)
{
	struct frame f;
	if ((send_rc == -EPIPE || send_rc == -ECONNRESET) && frame_read(sock, &f) == 1 &&
	    f.type == FRAME_JSON) {
		json_error_t jerr;
		json_t *j = json_loadb(f.data ? f.data : "", f.len, 0, &jerr);
		const char *e = json_string_value(json_object_get(j, "error"));
		if (e)
			die("%s", e);
	}
	die("could not send the command to the sbfs daemon: %s", strerror(-send_rc));
}

static void send_request(double timeout, bool tty, char **argv,
			 char **env, size_t envc, const char *rel,
			 const char *workdir)
{
	json_t *h = json_pack("{s:s,s:f,s:b}", "op", "exec", "timeout", timeout,
			      "stdin", true);
	if (h && tty) {
		unsigned short rows, cols;
		terminal_size(&rows, &cols);
		json_object_set_new(h, "tty", json_pack("{s:i,s:i}", "rows", rows, "cols", cols));
	}
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
		die_with_refusal(rc);
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
		{"version", no_argument, NULL, 'V'},
		{"interactive", no_argument, NULL, 'i'},
		{"mount", required_argument, NULL, 'm'},
		{"timeout", required_argument, NULL, 'T'},
		{"tty", no_argument, NULL, 't'},
		{"env", required_argument, NULL, 'e'},
		{"workdir", required_argument, NULL, 'w'},
		{NULL, 0, NULL, 0},
	};
	opterr = 0;
	int c;
	/* '+': options end at the command, so `sbexec ls -l` works */
	bool interactive = false, tty = false;
	while ((c = getopt_long(argc, argv, "+:hVitm:T:e:w:", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("sbexec %s (jansson %s)\n", SBFS_VERSION, jansson_version_str());
			return 0;
		case 'i':
			interactive = true;
			break;
		case 'm':
			mount = optarg;
			break;
		case 't':
			tty = true;
			break;
		case 'T': {
			char *end;
			errno = 0;
			timeout = strtod(optarg, &end);
			if (!*optarg || *end || errno || !isfinite(timeout) || timeout < 0)
				die("--timeout needs a number of seconds, not '%s'", optarg);
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
				['m'] = "a mount directory", ['T'] = "a number of seconds",
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
		die("no command given (usage: sbexec [-i] [-t] [-m MOUNT] [--timeout SECONDS] [-e K=V]... [-w DIR] [--] CMD [ARG...])");
	/* -t took a number before it meant a terminal: say so rather than
	 * run a command named after the number */
	if (tty && optind + 1 < argc && strspn(argv[optind], "0123456789.") == strlen(argv[optind]))
		die("-t gives the command a terminal; for a timeout of %s s use --timeout %s (-T)",
		    argv[optind], argv[optind]);

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

	/* A terminal is for typing: -t forwards what is typed, as -it */
	bool forward_stdin = interactive || tty || !isatty(STDIN_FILENO);
	/* Blocked everywhere and taken by sigwait in one thread, so a
	 * Ctrl-C never interrupts a half-written frame. */
	static sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	if (tty)
		sigaddset(&sigs, SIGWINCH);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	/* stdin is always attached: when it is not forwarded it ends at once
	 * (STDIN_EOF below), the one path every backend closes alike (a
	 * detached stdin left podman's exec stream open after the command
	 * ended) */
	send_request(timeout, tty, argv + optind, env, envc, target.rel,
		     workdir);
	free(env);
	if (tty && isatty(STDIN_FILENO))
		terminal_raw();

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
	terminal_restore();
	/* Flushes stdio only; the helper threads die with the process. */
	fflush(stdout);
	_exit(status);
}
