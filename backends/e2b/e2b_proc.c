/* The calls that act on a running process beside its Start stream (notes
 * 1.5): its input, as stdin or typed into its PTY, the end of that input,
 * its terminal's size, and signals. envd's SendSignal knows only SIGTERM
 * and SIGKILL and reaches only the process itself, so a forwarded Ctrl-C
 * and the kill of everything a command started go by the command's
 * marker (backends/exec_marker.h), from a second process as root. */
#include "e2b.h"
#include "backends/exec_marker.h"
#include "transport/base64.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Each call gets a bound of its own, whatever deadline the exec has: a
 * kill often runs because that deadline passed. */
#define PROC_CALL_S 10

static int proc_call(struct sb_backend *b, const char *proc, json_t *req)
{
	double held = call_deadline_suspend();
	double prev = call_deadline_enter(PROC_CALL_S);
	int rc = req ? e2b_rpc(b, proc, req, NULL) : -ENOMEM;
	call_deadline_restore(prev);
	call_deadline_restore(held);
	json_decref(req);
	return rc;
}

int e2b_proc_input(struct sb_backend *b, int64_t pid, bool pty,
		   const char *buf, size_t len)
{
	char *b64 = base64_encode(buf, len);
	if (!b64)
		return -ENOMEM;
	/* a PTY has no stdin pipe: envd refuses "stdin" input for it */
	json_t *req = json_pack("{s:{s:I},s:{s:s}}", "process", "pid", (json_int_t)pid,
				"input", pty ? "pty" : "stdin", b64);
	free(b64);
	return proc_call(b, "process.Process/SendInput", req);
}

int e2b_proc_end_input(struct sb_backend *b, int64_t pid, bool pty)
{
	/* A terminal's end of input is its EOF character, typed: envd
	 * refuses CloseStdin for a PTY process (as docker's -t, one ^D). */
	if (pty)
		return e2b_proc_input(b, pid, true, "\x04", 1);
	return proc_call(b, "process.Process/CloseStdin",
			 json_pack("{s:{s:I}}", "process", "pid", (json_int_t)pid));
}

void e2b_proc_resize(struct sb_backend *b, int64_t pid, unsigned short rows,
		     unsigned short cols)
{
	json_t *req = json_pack("{s:{s:I},s:{s:{s:i,s:i}}}", "process", "pid",
				(json_int_t)pid, "pty", "size", "cols", (int)cols,
				"rows", (int)rows);
	int rc = proc_call(b, "process.Process/Update", req);
	/* a failure only leaves the old size */
	if (rc < 0 && rc != -ENOENT)
		sb_debug("e2b: resizing the terminal of process %lld: %s", (long long)pid,
			 strerror(-rc));
}

void e2b_proc_kill(struct sb_backend *b, int64_t pid)
{
	int rc = proc_call(b, "process.Process/SendSignal",
			   json_pack("{s:{s:I},s:s}", "process", "pid", (json_int_t)pid,
				     "signal", "SIGNAL_SIGKILL"));
	if (rc < 0 && rc != -ENOENT)
		sb_warn("e2b: could not signal process %lld: %s", (long long)pid, strerror(-rc));
}

/* One of the marker scripts as root, so that it can read every environ
 * and signal anything; its output is not wanted. */
static void run_helper(struct sb_backend *b, const char *const *argv, const char *what)
{
	struct e2b_run r = {
		.argv = argv, .cwd = "/", .timeout_s = 15, .stdin_fd = -1,
		.cancel_fd = -1, .as_root = true,
	};
	struct sb_exec_result res;
	double held = call_deadline_suspend();
	int rc = e2b_run(b, &r, &res);
	call_deadline_restore(held);
	if (rc < 0 || res.timed_out || res.exit_code != 0 || res.term_signal)
		sb_warn("e2b: %s a command in sandbox %s failed (%s)", what,
			((struct e2b *)b->priv)->sandbox_id,
			rc < 0 ? strerror(-rc) : res.timed_out ? "timed out" : "its script failed");
}

void e2b_marker_kill(struct sb_backend *b, const char *marker)
{
	const char *argv[6];
	exec_marker_kill_argv(argv, marker);
	run_helper(b, argv, "killing");
}

void e2b_marker_signal(struct sb_backend *b, const char *marker, int sig)
{
	const char *argv[7];
	exec_marker_signal_argv(argv, marker, sig);
	run_helper(b, argv, "signalling");
}
