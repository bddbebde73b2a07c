/* A guest command through `sbx exec [-i] -w DIR --env-file F NAME ...`.
 *
 * The CLI's death does not stop a command in the VM (as with docker
 * exec), so the command runs under a small fixed wrapper script, its
 * arguments passed as positional parameters (never spliced into it):
 * `timeout -k` bounds it inside the guest, its pid goes to a file a
 * second exec signals on Ctrl-C or when the host gives up, and marks on
 * stderr (sbx_marker.c) tell the command's stderr from the CLI's and
 * prove that the command ran to its end.
 *
 * With a terminal (sbexec -t: `sbx exec -i -t`, the CLI on a host pty,
 * sbx_cli.c) the command's stderr is its terminal, so the marks come on
 * the terminal, and the CLI's stderr is all the CLI's own. `timeout`
 * would put the command in a process group of its own, in the terminal's
 * background, where a shell cannot take the terminal: the command runs
 * in the wrapper's, the terminal's foreground group, and the host keeps
 * the deadline. The signals and the kill then find the command's
 * processes by a marker in their environment (backends/exec_marker.h). */
#include "sbx.h"
#include "backends/exec_marker.h"
#include "backends/exec_pump.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define PIDFILE_DIR "/tmp"
/* "none": GNU timeout's 0 means no limit but busybox's does not; this is
 * over 24 days, and keeps the group kill timeout gives */
#define NO_TIMEOUT_S "2147483"
#define GUEST_KILL_TIMEOUT_S 15.0

/* $1 pid file, $2 seconds, $3 nonce, then the command. The command runs
 * in the background so the wrapper can write its pid and, after it, the
 * end mark; stdin is handed over on fd 3 (an asynchronous list's stdin
 * is /dev/null otherwise). GNU timeout puts the command in a process
 * group of its own and signals the whole group. */
static const char wrapper[] =
	"f=$1 t=$2 m=$3; shift 3\n"
	"printf '\\036%s S\\n' \"$m\" >&2\n"
	"exec 3<&0\n"
	"if command -v timeout >/dev/null 2>&1; then\n"
	"  timeout -k " STR(SBX_KILL_AFTER_S) " \"$t\" \"$@\" 0<&3 3<&- &\n"
	"else\n"
	"  \"$@\" 0<&3 3<&- &\n"
	"fi\n"
	"p=$!\n"
	"exec 3<&-\n"
	"echo \"$p\" >\"$f\" 2>/dev/null\n"
	"wait \"$p\"; r=$?\n"
	"rm -f \"$f\"\n"
	"printf '\\036%s E %d\\n' \"$m\" \"$r\" >&2\n"
	"exit \"$r\"\n";

/* Under -t. $1 nonce, then the command, in the foreground: the marks go
 * to the terminal. The wrapper outlives what the terminal's Ctrl-C and
 * the marker's signals do to the command (caught, so the command itself
 * gets them as default), and writes the end mark after it. env runs the
 * command as a program found in PATH, as an exec does, never as one of
 * the wrapper's builtins (`exit`, `exec` would end it unmarked). */
static const char tty_wrapper[] =
	"m=$1; shift\n"
	"trap : INT QUIT TERM HUP\n"
	"printf '\\036%s S\\n' \"$m\"\n"
	"env -- \"$@\"; r=$?\n"
	"printf '\\036%s E %d\\n' \"$m\" \"$r\"\n"
	"exit \"$r\"\n";

/* $1 pid file: TERM to the command's group (or the command), KILL what
 * is left after 3 s. It waits a moment for the file: a Ctrl-C can come
 * before the wrapper wrote it. */
static const char killer[] =
	"f=$1; i=0\n"
	"while [ ! -s \"$f\" ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done\n"
	"p=$(cat \"$f\" 2>/dev/null) || exit 0\n"
	"[ -n \"$p\" ] || exit 0\n"
	"kill -TERM -- \"-$p\" 2>/dev/null || kill -TERM \"$p\" 2>/dev/null || exit 0\n"
	"i=0; while kill -0 \"$p\" 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done\n"
	"kill -KILL -- \"-$p\" 2>/dev/null || kill -KILL \"$p\" 2>/dev/null\n"
	"exit 0\n";

/* $1 pid file, $2 a signal name: the signal for every process of the
 * command's process group but timeout itself (which would forward it and
 * then start its kill-after), as a terminal's Ctrl-C reaches its
 * foreground group; the command alone where it has no group of its own
 * (busybox timeout execs it). Held until the command has started: its
 * pid file (10 s at most), then a process in its group (3 s at most:
 * busybox's timeout makes none). Then two more passes signal what was
 * forked meanwhile (one kill per process is not a group's one kill: see
 * exec_marker.c). */
static const char signaller[] =
	"f=$1 s=$2; i=0\n"
	"while [ ! -s \"$f\" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n"
	"p=$(cat \"$f\" 2>/dev/null) || exit 0\n"
	"[ -n \"$p\" ] || exit 0\n"
	"found= quiet=0 i=0\n"
	"while [ $i -lt 30 ] && [ $quiet -lt 2 ]; do i=$((i+1)) new=0\n"
	"  for st in /proc/[0-9]*/stat; do\n"
	"    read -r l <\"$st\" 2>/dev/null || continue\n"
	"    q=${st#/proc/}; q=${q%/stat}\n"
	"    [ \"$q\" = \"$p\" ] && continue\n"
	"    case \" $found \" in *\" $q \"*) continue ;; esac\n"
	"    l=${l##*) }\n"
	"    set -- $l\n"
	"    [ \"$3\" = \"$p\" ] || continue\n"
	"    kill -s \"$s\" \"$q\" 2>/dev/null; found=\"$found $q\" new=1\n"
	"  done\n"
	"  [ -n \"$found\" ] && [ $new = 0 ] && quiet=$((quiet+1))\n"
	"  [ $quiet -lt 2 ] && { kill -0 \"$p\" 2>/dev/null || break; sleep 0.1; }\n"
	"done\n"
	"[ -n \"$found\" ] || kill -s \"$s\" \"$p\" 2>/dev/null\n"
	"exit 0\n";

static void new_nonce(char out[SBX_NONCE_LEN + 1])
{
	unsigned char r[SBX_NONCE_LEN / 2];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)(rand() ^ (int)getpid());
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
}

/* sbx_call has one cb_arg: every callback gets this. The marks are on
 * stderr, or with a terminal on stdout (then stderr is the CLI's). */
struct routes {
	sb_output_fn out_fn, err_fn;
	void *arg;
	struct sbx_marker mk;
	bool tty;
	struct sb_backend *b;
	const char *pidfile;   /* without a terminal */
	const char *marker;    /* with one: EXEC_MARKER_VAR's value */
};

static int on_out(void *arg, const char *d, size_t n)
{
	struct routes *r = arg;
	if (r->tty)
		return sbx_marker_feed(&r->mk, d, n, r->out_fn, r->arg);
	return r->out_fn ? r->out_fn(r->arg, d, n) : 0;
}

static int on_err(void *arg, const char *d, size_t n)
{
	struct routes *r = arg;
	if (!r->tty)
		return sbx_marker_feed(&r->mk, d, n, r->err_fn, r->arg);
	sbx_marker_keep_cli(&r->mk, d, n);
	return 0;
}

/* Under -t, what is typed waits for the command: typed earlier, the
 * VM's terminal would echo it before the start mark. */
static bool command_started(void *arg)
{
	struct routes *r = arg;
	return r->mk.phase != MK_BEFORE;
}

int sbx_sandbox_exists(const char *cli, const char *name, char *err, size_t errlen)
{
	static const char *const args[] = {"ls", "--json", NULL};
	struct sbx_outcome o;
	char *out = NULL, *serr = NULL;
	double prev = call_deadline_suspend();
	int rc = sbx_cli_capture(cli, args, SBX_QUICK_TIMEOUT_S, 64u << 20, &o, &out, &serr);
	call_deadline_restore(prev);
	if (rc == 0 && (!o.exited || o.status != 0)) {
		if (o.timed_out)
			snprintf(err, errlen, "`sbx ls --json` did not answer within %.0f s", SBX_QUICK_TIMEOUT_S);
		else
			sbx_describe(err, errlen, "ls", serr, o.status);
		rc = -EIO;
	}
	struct sbx_listed *v = NULL;
	size_t n = 0;
	if (rc == 0) {
		rc = sbx_ls_parse(out ? out : "", out ? strlen(out) : 0, &v, &n);
		if (rc < 0)
			snprintf(err, errlen, "`sbx ls --json` printed something this sbfs cannot read: update sbfs, or report the output");
	}
	int found = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (!strcmp(v[i].name, name))
			found = 1;
	free(v);
	free(out);
	free(serr);
	return rc < 0 ? rc : found;
}

/* One of our scripts in a second exec beside the command (the CLI has no
 * way to signal the command it runs); bounded, whatever deadline the
 * call had. A failure is warned as "could not WHAT ...". */
static void run_in_guest(struct sbx *s, const char *const *args, const char *what)
{
	struct sbx_outcome o;
	char *out = NULL, *err = NULL;
	double prev = call_deadline_suspend();
	int rc = sbx_cli_capture(s->cfg.cli, args, GUEST_KILL_TIMEOUT_S, 4096, &o, &out, &err);
	call_deadline_restore(prev);
	if (rc < 0 || !o.exited || o.status != 0) {
		char line[300];
		sbx_stderr_line(err, line, sizeof(line));
		sb_warn("sbx: could not %s in sandbox %s (%s)", what, s->name,
			o.timed_out ? "timed out" : line);
	}
	free(out);
	free(err);
}

/* Kills the command whose pid the wrapper wrote, or under -t every
 * process holding its marker. */
static void kill_in_guest(struct sb_backend *b, const struct routes *rt)
{
	struct sbx *s = b->priv;
	const char *args[10] = {"exec", s->name, "sh", "-c", killer, "sh", rt->pidfile, NULL};
	if (rt->tty)
		exec_marker_kill_argv(args + 2, rt->marker);
	run_in_guest(s, args, "stop the command (it may still run there)");
}

/* sbexec's Ctrl-C, SIGTERM, SIGHUP: for the command's processes. */
static void signal_in_guest(void *arg, int sig)
{
	struct routes *rt = arg;
	struct sbx *s = rt->b->priv;
	const char *args[10] = {"exec", s->name, "sh", "-c", signaller, "sh",
				rt->pidfile, sigabbrev_np(sig), NULL};
	if (rt->tty)
		exec_marker_signal_argv(args + 2, rt->marker, sig);
	run_in_guest(s, args, "signal the command");
}

/* The CLI gave up before the command started: what its stderr says. */
static int failed_to_start(struct sb_backend *b, struct sbx *s, const char *cli_text,
			   int status, struct sb_exec_result *res)
{
	char msg[SB_REASON_MAX];
	sbx_describe(msg, sizeof(msg), "exec", cli_text, status);
	switch (sbx_classify(cli_text)) {
	case SBX_FAIL_SIGNED_OUT:
	case SBX_FAIL_NO_HYPERVISOR:
		return sb_backend_fail(b, "%s", msg);
	case SBX_FAIL_TRANSIENT:
		/* nothing ran: the dispatcher may try again */
		snprintf(b->error, sizeof(b->error), "%s", msg);
		sb_info("%s", msg);
		return -ECONNREFUSED;
	case SBX_FAIL_NOT_FOUND: {
		char err[SB_REASON_MAX];
		int ex = sbx_sandbox_exists(s->cfg.cli, s->name, err, sizeof(err));
		if (ex == 0) {
			res->sandbox_terminated = true;
			return sb_backend_fail(b, "the sbx sandbox %s is gone (removed, or its VM died): unmount; files written since the last sync are saved by unmount",
					       s->name);
		}
		snprintf(b->error, sizeof(b->error), "%s", msg);
		sb_warn("%s", msg);
		return -ENOENT;
	}
	default:
		snprintf(b->error, sizeof(b->error), "%s", msg);
		sb_warn("%s", msg);
		return -EIO;
	}
}

/* The command started, but the CLI ended without its end mark: the VM
 * died, or the CLI lost it. Only sbx can say which. */
static int cut_short(struct sb_backend *b, struct sbx *s, const char *cli_text,
		     struct sb_exec_result *res)
{
	char err[SB_REASON_MAX], line[300];
	sbx_stderr_line(cli_text, line, sizeof(line));
	int ex = sbx_sandbox_exists(s->cfg.cli, s->name, err, sizeof(err));
	if (ex == 0) {
		res->sandbox_terminated = true;
		return sb_backend_fail(b, "the sbx sandbox %s is gone (removed, or its VM died) while a command ran (%s): unmount",
				       s->name, line);
	}
	snprintf(b->error, sizeof(b->error), "sbx exec ended before the command did (%s): the command's end is unknown", line);
	sb_warn("%s", b->error);
	return -EIO;
}

int sbx_exec(struct sb_backend *b, const struct sb_exec_req *req0,
	     struct sb_exec_result *res)
{
	struct sbx *s = b->priv;
	struct sb_exec_req r;
	int rc = exec_begin(req0, &r, res);
	if (rc < 0)
		return rc;
	char nonce[SBX_NONCE_LEN + 1], envfile[1200], pidfile[128], secs[32];
	char marker[EXEC_MARKER_SIZE], marker_env[EXEC_MARKER_SIZE + 16];
	const bool tty = r.tty != NULL;
	new_nonce(nonce);
	exec_marker_new(marker);
	snprintf(marker_env, sizeof(marker_env), EXEC_MARKER_VAR "=%s", marker);
	const char *const extra_env[] = {marker_env, NULL};
	snprintf(envfile, sizeof(envfile), "%s/env-%s", s->tmpdir, nonce);
	snprintf(pidfile, sizeof(pidfile), PIDFILE_DIR "/.sbfs-exec-%s", nonce);
	double t = r.timeout_s;
	if (t > 0)
		snprintf(secs, sizeof(secs), "%.0f", ceil(t) < 1 ? 1 : ceil(t));
	else
		snprintf(secs, sizeof(secs), NO_TIMEOUT_S);
	rc = sbx_envfile_write(envfile, (const char *const *)b->spec.env, r.env,
			       tty ? extra_env : NULL);
	if (rc == -EINVAL) {
		snprintf(b->error, sizeof(b->error), "an environment entry of this command is not NAME=VALUE on one line, which sbx's env file needs");
		return rc;
	}
	if (rc < 0) {
		snprintf(b->error, sizeof(b->error), "cannot write the env file %.200s: %s", envfile, strerror(-rc));
		return rc;
	}
	size_t argc = 0;
	while (r.argv[argc])
		argc++;
	const char **args = calloc(argc + 20, sizeof(*args));
	if (!args) {
		unlink(envfile);
		return -ENOMEM;
	}
	size_t k = 0;
	args[k++] = "exec";
	/* a terminal always reads what is typed: with no stdin, only ^D */
	if (r.stdin_fd >= 0 || tty)
		args[k++] = "-i";
	if (tty)
		args[k++] = "-t";
	args[k++] = "-w";
	args[k++] = r.cwd ? r.cwd : b->spec.workdir;
	args[k++] = "--env-file";
	args[k++] = envfile;
	args[k++] = s->name;
	args[k++] = "sh";
	args[k++] = "-c";
	args[k++] = tty ? tty_wrapper : wrapper;
	args[k++] = "sh";
	if (!tty) {
		args[k++] = pidfile;
		args[k++] = secs;
	}
	args[k++] = nonce;
	for (size_t i = 0; i < argc; i++)
		args[k++] = r.argv[i];
	args[k] = NULL;

	struct routes rt = {.out_fn = r.on_stdout, .err_fn = r.on_stderr, .arg = r.cb_arg,
			    .tty = tty, .b = b, .pidfile = pidfile, .marker = marker};
	sbx_marker_init(&rt.mk, nonce);
	/* without a terminal the guest's timeout ends the command, the host
	 * only backs it up; with one the host's deadline is the timeout */
	double host_limit = t <= 0 ? 0 : tty ? t : t + SBX_KILL_AFTER_S + SBX_HOST_GRACE_S;
	struct sbx_call c = {
		.cli = s->cfg.cli, .args = args, .stdin_fd = r.stdin_fd,
		.timeout_s = host_limit,
		.cancel_fd = r.cancel_fd, .signal_fd = exec_signal_fd(&r),
		.on_signal = signal_in_guest, .on_stdout = on_out, .on_stderr = on_err,
		.cb_arg = &rt, .tty = r.tty, .stdin_ready = tty ? command_started : NULL,
	};
	double start = call_deadline_now();
	struct sbx_outcome o;
	rc = sbx_cli_run(&c, &o);
	double took = call_deadline_now() - start;
	unlink(envfile);
	if (rc == 0 && o.cb_rc == 0 && o.exited)
		o.cb_rc = sbx_marker_finish(&rt.mk, tty ? r.on_stdout : r.on_stderr, r.cb_arg);
	const char *cli_text = rt.mk.cli ? rt.mk.cli : "";
	if (rt.mk.cli_len)
		sb_debug("sbx: exec %s: the CLI said: %.300s", s->name, cli_text);
	bool started = rt.mk.phase != MK_BEFORE;
	if (rc < 0) {
		snprintf(b->error, sizeof(b->error), "cannot run %.200s: %s", s->cfg.cli, strerror(-rc));
	} else if (o.cb_rc < 0 || o.cancelled || o.timed_out) {
		/* we stopped the CLI: the command may still run in the guest
		 * (under -t the marker finds it even before its start mark) */
		if ((started || tty) && rt.mk.phase != MK_AFTER)
			kill_in_guest(b, &rt);
		res->cancelled = o.cancelled;
		res->timed_out = o.timed_out;
		rc = o.cb_rc;
	} else if (rt.mk.phase == MK_AFTER) {
		int st = rt.mk.status;
		double limit = t > 0 ? ceil(t) : 0;
		/* 124: timeout's TERM; 137: its KILL after -k. A command's own
		 * 124 or 137 comes sooner than that. */
		if (!tty && limit > 0 && ((st == 124 && took >= limit - 0.5) ||
				  (st == 137 && took >= limit + SBX_KILL_AFTER_S - 0.5)))
			res->timed_out = true;
		else
			res->exit_code = st;
	} else if (started) {
		rc = cut_short(b, s, cli_text, res);
	} else {
		rc = failed_to_start(b, s, cli_text, o.status, res);
	}
	sbx_marker_free(&rt.mk);
	free(args);
	if (rc == 0 && !res->sandbox_terminated && sb_backend_is_dead(b)) {
		res->sandbox_terminated = true;
		rc = -EIO;
	}
	return rc;
}
