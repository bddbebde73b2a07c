/* Generic file operations over a backend's raw exec slot: one POSIX sh
 * command per operation, paths only as positional parameters, tools limited
 * to what GNU coreutils and busybox share. This file runs a script and
 * maps its outcome (the exit codes are in shell_run.h). */
#include "shell_run.h"
#include "util/log.h"
#include "util/tool_errno.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define SHELL_TIMEOUT_S 120.0
#define ERR_OUT_MAX 2048

int shell_status_to_errno(int code)
{
	switch (code) {
	case 0: return 0;
	case 100: return -ENOENT;
	case 101: return -EINVAL;
	case 102: return -EISDIR;
	case 103: return -ENOTDIR;
	case 104: return -EEXIST;
	case 105: return -ENOTEMPTY;
	case 106: return -EACCES;
	case 107: return -EAGAIN;
	case 108: return -EPERM;
	case 126: case 127: return -ENOTSUP;
	default: return -EPROTO;
	}
}

/* exec has one cb_arg for both streams; this routes them. */
struct route {
	sb_output_fn out_fn;
	void *out_arg;
	struct output_capture err;
};

static int route_out(void *arg, const char *d, size_t n)
{
	struct route *r = arg;
	return r->out_fn ? r->out_fn(r->out_arg, d, n) : 0;
}

static int route_err(void *arg, const char *d, size_t n)
{
	struct route *r = arg;
	return output_capture_cb(&r->err, d, n);
}

int shell_run(struct sb_backend *b, const char *what,
		      const char *script, const char *const *args,
		      int stdin_fd, sb_output_fn on_out, void *out_arg)
{
	const char *argv[16];
	size_t n = 0;
	argv[n++] = "sh";
	argv[n++] = "-c";
	argv[n++] = script;
	argv[n++] = "sh";
	for (size_t i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return shell_run_argv(b, what, argv, stdin_fd, on_out, out_arg);
}

/* shell_run with the whole argv given (sh -c script sh args...). */
int shell_run_argv(struct sb_backend *b, const char *what,
			   const char *const *argv, int stdin_fd,
			   sb_output_fn on_out, void *out_arg)
{
	static const char *const env[] = {"LC_ALL=C", NULL};
	struct route r = {
		.out_fn = on_out, .out_arg = out_arg,
		.err = {.limit = ERR_OUT_MAX, .keep_head = true},
	};
	struct sb_exec_req req = {
		.argv = argv,
		.cwd = "/",
		.env = env,
		.stdin_fd = stdin_fd,
		.timeout_s = SHELL_TIMEOUT_S,
		.on_stdout = route_out,
		.on_stderr = route_err,
		.cb_arg = &r,
		.cancel_fd = -1,
	};
	struct sb_exec_result res;
	memset(&res, 0, sizeof(res));
	int rc = b->ops->exec(b, &req, &res);
	if (rc == 0) {
		if (res.sandbox_terminated)
			rc = -EIO;
		else if (res.timed_out)
			rc = -ETIMEDOUT;
		else if (res.term_signal)
			rc = -EPROTO;
		else
			rc = shell_status_to_errno(res.exit_code);
		/* "The tool refused": its own words say why (a full disk
		 * is ENOSPC, not EACCES). */
		if (res.exit_code == 106 && rc == -EACCES)
			rc = -sb_tool_errno(r.err.data, EACCES);
	}
	if (rc == -ENOTSUP || rc == -EPROTO || rc == -ETIMEDOUT)
		sb_warn("%s: shell %s failed (exit %d%s%s): %.*s", b->ops->name,
			what, res.exit_code, res.timed_out ? ", timed out" : "",
			res.term_signal ? ", signalled" : "",
			(int)strcspn(r.err.data ? r.err.data : "", "\n"),
			r.err.data ? r.err.data : "");
	output_capture_free(&r.err);
	return rc;
}

int shell_capture(struct sb_backend *b, const char *what,
		       const char *script, const char *const *args,
		       struct output_capture *out)
{
	return shell_run(b, what, script, args, -1, output_capture_cb, out);
}

bool shell_path_ok(const char *p)
{
	return p && p[0] == '/';
}
