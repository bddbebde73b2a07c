/* exec through the task command router (notes 2.6(d)-(g)): TaskExecStart
 * with a client-chosen exec id (retrying it is idempotent), then in one
 * curl_multi: a TaskExecStdioRead stream per fd that resumes at its offset
 * after a dropped stream, TaskExecWait long-polls (60 s each, retried
 * until the deadline), and unary TaskExecStdinWrite calls with offsets.
 *
 * The router has no kill or signal call. A command that may have to be
 * stopped early (cancel, deadline, output callback abort) or signalled
 * (sbexec's Ctrl-C, SIGTERM, SIGHUP) carries a marker in its environment
 * (backends/exec_marker.h), and a second exec kills or signals every guest
 * process whose environment holds it.
 *
 * With a terminal (sbexec -t) the command runs on Modal's own pty
 * (modal_pty.c): its output and errors come as the stdout stream, what is
 * typed goes in through the stdin writes (Ctrl-C is the byte 0x03, which
 * the pty turns into SIGINT), and the end of a piped stdin is typed as ^D.
 * Modal cannot resize a running command's terminal: size changes are read
 * and dropped. */
#include "modal.h"
#include "backends/exec_marker.h"
#include "backends/exec_pump.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_ATTEMPT_S 60.0
#define WAIT_RETRY_S 1.0
#define DEADLINE_GRACE_S 5.0   /* server kills at the deadline; we give up later */
#define DRAIN_QUIET_S 2.0      /* after exit: a stream silent this long is done */
#define DRAIN_MAX_S 30.0       /* after exit: never wait longer for output */
#define STDIN_CHUNK (1 << 20)
#define STREAM_RETRIES 10

struct xc;

struct out_stream {
	struct xc *x;
	int fd;               /* TaskExecStdioFileDescriptor: 0 stdout, 1 stderr */
	uint64_t offset;
	struct grpc_call *call;
	unsigned gen;
	bool done;
	int retries;
	double retry_at;
	double last_data;
	sb_output_fn fn;
};

struct xc {
	struct sb_backend *b;
	struct modal *m;
	const struct modal_run *r;
	char exec_id[37];
	char marker[EXEC_MARKER_SIZE]; /* in the command's environment if killable */
	CURLM *multi;
	struct out_stream out[2];
	int cb_rc;            /* an output callback asked to stop */

	struct grpc_call *wait;
	unsigned wait_gen;
	struct pb_buf wait_resp;
	double wait_at;       /* when to (re)issue the wait */
	bool wait_refreshed;
	bool exited;
	int code, sig;

	bool in_active;       /* stdin still being fed */
	struct grpc_call *in_call;
	unsigned in_gen;
	char *in_buf;
	size_t in_len;        /* bytes in in_buf, sent as the next write */
	bool in_eof;          /* source exhausted: the next write is the last */
	bool in_refreshed;
	int in_retries;
	double in_at;
	uint64_t in_offset;   /* bytes the router has acknowledged */
	off_t src_off;        /* pread position */

	int fatal_code;       /* a router error that ends the exec */
	char fatal_msg[300];
};

/* ---- request builders ---- */

static void ids(struct pb_buf *req, struct xc *x)
{
	pb_string(req, 1, x->m->task_id);
	pb_string(req, 2, x->exec_id);
}

static int add_env(struct pb_buf *req, const char *const *env)
{
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq)
			continue;
		char key[256];
		size_t k = (size_t)(eq - env[i]);
		if (k == 0 || k >= sizeof(key))
			continue;
		memcpy(key, env[i], k);
		key[k] = '\0';
		pb_map_entry(req, 12, key, eq + 1);
	}
	return req->oom ? -ENOMEM : 0;
}

/* ---- calls ---- */

static int on_output(void *arg, const uint8_t *msg, size_t len)
{
	struct out_stream *s = arg;
	struct pb_reader r = pb_reader(msg, len);
	struct pb_field f;
	while (pb_next(&r, &f) == 1) {
		if (f.num != 1 || f.wt != PB_LEN || !f.len)
			continue;
		s->offset += f.len;
		s->retries = 0; /* progress resets the backoff */
		s->last_data = call_deadline_now();
		if (s->fn) {
			int rc = s->fn(s->x->r->cb_arg, (const char *)f.data, f.len);
			if (rc < 0) {
				s->x->cb_rc = rc;
				return 1;
			}
		}
	}
	return 0;
}

static int add_call(struct xc *x, struct grpc_call *c)
{
	if (!c)
		return -ENOMEM;
	if (curl_multi_add_handle(x->multi, grpc_call_easy(c)) != CURLM_OK) {
		grpc_call_free(c);
		return -ENOMEM;
	}
	return 0;
}

static void drop_call(struct xc *x, struct grpc_call **c)
{
	if (!*c)
		return;
	curl_multi_remove_handle(x->multi, grpc_call_easy(*c));
	grpc_call_free(*c);
	*c = NULL;
}

static double time_left(struct xc *x, double deadline)
{
	(void)x;
	return deadline > 0 ? deadline - call_deadline_now() : 0;
}

static int start_stream(struct xc *x, struct out_stream *s, double deadline)
{
	struct pb_buf req = {0};
	ids(&req, x);
	pb_uint(&req, 3, s->offset);
	pb_uint(&req, 4, (uint64_t)s->fd);
	double t = deadline > 0 ? time_left(x, deadline) + DRAIN_MAX_S : 0;
	struct grpc_call *c = modal_router_call(x->m, "TaskExecStdioRead", &req,
						t, on_output, s, &s->gen);
	pb_buf_free(&req);
	s->retry_at = 0;
	int rc = add_call(x, c);
	if (rc == 0)
		s->call = c;
	return rc;
}

static int collect(void *arg, const uint8_t *msg, size_t len)
{
	struct pb_buf *resp = arg;
	resp->len = 0;
	pb_raw(resp, msg, len);
	return resp->oom ? -1 : 0;
}

static int start_wait(struct xc *x, double deadline)
{
	struct pb_buf req = {0};
	ids(&req, x);
	double t = WAIT_ATTEMPT_S;
	if (deadline > 0 && time_left(x, deadline) + 1 < t)
		t = time_left(x, deadline) + 1;
	if (t < 1)
		t = 1;
	x->wait_resp.len = 0;
	struct grpc_call *c = modal_router_call(x->m, "TaskExecWait", &req, t,
						collect, &x->wait_resp, &x->wait_gen);
	pb_buf_free(&req);
	x->wait_at = 0;
	int rc = add_call(x, c);
	if (rc == 0)
		x->wait = c;
	return rc;
}

/* Fills in_buf from the caller's stdin; false if it would block. */
static bool fill_stdin(struct xc *x, bool readable)
{
	const struct modal_run *r = x->r;
	if (x->in_len || x->in_eof)
		return true;
	ssize_t n;
	if (r->stdin_size >= 0) {
		size_t want = STDIN_CHUNK;
		if ((off_t)want > r->stdin_size - x->src_off)
			want = (size_t)(r->stdin_size - x->src_off);
		n = want ? pread(r->stdin_fd, x->in_buf, want, x->src_off) : 0;
		if (n > 0)
			x->src_off += n;
	} else {
		if (!readable)
			return false;
		n = read(r->stdin_fd, x->in_buf, STDIN_CHUNK);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return false;
	}
	if (n > 0) {
		x->in_len = (size_t)n;
	} else {
		/* end, or an unreadable source: close stdin. A terminal's end
		 * of input is its EOF character, typed: closing its input is
		 * nothing a terminal does (as docker_exec.c). */
		x->in_eof = true;
		if (r->tty) {
			x->in_buf[0] = 0x04;
			x->in_len = 1;
		}
	}
	return true;
}

static int start_stdin(struct xc *x)
{
	struct pb_buf req = {0};
	ids(&req, x);
	pb_uint(&req, 3, x->in_offset);
	if (x->in_len)
		pb_bytes(&req, 4, x->in_buf, x->in_len);
	pb_bool(&req, 5, x->in_eof && !x->r->tty);
	struct grpc_call *c = modal_router_call(x->m, "TaskExecStdinWrite", &req,
						60, NULL, NULL, &x->in_gen);
	pb_buf_free(&req);
	x->in_at = 0;
	int rc = add_call(x, c);
	if (rc == 0)
		x->in_call = c;
	return rc;
}

static void set_fatal(struct xc *x, const char *what, const struct grpc_status *st)
{
	if (x->fatal_code)
		return;
	x->fatal_code = st->code;
	snprintf(x->fatal_msg, sizeof(x->fatal_msg), "%s: %s: %.200s", what,
		 grpc_code_name(st->code), st->message);
}

/* A router call failed with UNAUTHENTICATED: refresh the JWT unless that
 * was already tried for this call. true = retry now. */
static bool auth_retry(struct xc *x, unsigned gen, bool *refreshed,
		       const struct grpc_status *st, const char *what)
{
	if (st->code != GRPC_UNAUTHENTICATED)
		return false;
	struct grpc_status rs;
	if (*refreshed || modal_router_refresh_if(x->m, gen, &rs) < 0) {
		set_fatal(x, what, *refreshed ? st : &rs);
		return false;
	}
	*refreshed = true;
	return true;
}

static void stream_done(struct xc *x, struct out_stream *s, const struct grpc_status *st)
{
	drop_call(x, &s->call);
	if (st->code == GRPC_OK) {
		s->done = true;
		return;
	}
	if (x->cb_rc) {
		s->done = true;
		return;
	}
	bool refreshed = false;
	if (auth_retry(x, s->gen, &refreshed, st, "output stream")) {
		s->retry_at = call_deadline_now();
		return;
	}
	if (grpc_code_retryable(st->code) && s->retries < STREAM_RETRIES) {
		s->retries++;
		s->retry_at = call_deadline_now() + grpc_retry_delay(&grpc_retry_router, s->retries);
		sb_debug("modal: %s stream of %s dropped (%s), resuming at %llu",
			 s->fd ? "stderr" : "stdout", x->exec_id,
			 grpc_code_name(st->code), (unsigned long long)s->offset);
		return;
	}
	s->done = true;
	if (st->code != GRPC_NOT_FOUND) /* NOT_FOUND: the wait says why */
		sb_warn("modal: %s of %s lost: %s %s", s->fd ? "stderr" : "stdout",
			x->exec_id, grpc_code_name(st->code), st->message);
}

static void wait_done(struct xc *x, const struct grpc_status *st)
{
	drop_call(x, &x->wait);
	if (st->code == GRPC_OK) {
		/* oneof exit_status { int32 code = 1; int32 signal = 2; } */
		struct pb_reader r = pb_reader(x->wait_resp.data, x->wait_resp.len);
		struct pb_field f;
		while (pb_next(&r, &f) == 1) {
			if (f.num == 1 && f.wt == PB_VARINT) {
				x->exited = true;
				x->code = pb_as_int32(&f);
			} else if (f.num == 2 && f.wt == PB_VARINT) {
				x->exited = true;
				x->sig = pb_as_int32(&f);
			}
		}
		if (!x->exited)
			x->wait_at = call_deadline_now(); /* no status yet: ask again */
		return;
	}
	if (auth_retry(x, x->wait_gen, &x->wait_refreshed, st, "wait")) {
		x->wait_at = call_deadline_now();
		return;
	}
	if (st->code == GRPC_DEADLINE_EXCEEDED) {
		x->wait_at = call_deadline_now(); /* our 60 s long-poll attempt ran out */
		return;
	}
	if (grpc_code_retryable(st->code)) {
		x->wait_at = call_deadline_now() + WAIT_RETRY_S;
		return;
	}
	set_fatal(x, "wait", st);
}

static void stdin_done(struct xc *x, const struct grpc_status *st)
{
	drop_call(x, &x->in_call);
	if (st->code == GRPC_OK) {
		x->in_offset += x->in_len;
		x->in_len = 0;
		x->in_retries = 0;
		x->in_refreshed = false;
		if (x->in_eof)
			x->in_active = false;
		return;
	}
	if (st->code == GRPC_FAILED_PRECONDITION || st->code == GRPC_ABORTED) {
		x->in_active = false; /* the command exited before reading it all */
		return;
	}
	if (auth_retry(x, x->in_gen, &x->in_refreshed, st, "stdin")) {
		x->in_at = call_deadline_now();
		return;
	}
	if (grpc_code_retryable(st->code) && x->in_retries < grpc_retry_router.max_retries) {
		x->in_retries++;
		x->in_at = call_deadline_now() + grpc_retry_delay(&grpc_retry_router, x->in_retries);
		return;
	}
	x->in_active = false;
	if (st->code != GRPC_NOT_FOUND)
		sb_warn("modal: stdin of %s lost: %s %s", x->exec_id,
			grpc_code_name(st->code), st->message);
}

/* ---- argv that protobuf strings cannot carry ---- */

/* ---- the run ---- */

static int start_exec(struct xc *x, double timeout, struct grpc_status *st)
{
	const struct modal_run *r = x->r;
	const struct sb_spec *spec = &x->b->spec;
	struct pb_buf req = {0}, resp = {0};
	ids(&req, x);
	const char *cwd = r->cwd ? r->cwd : spec->workdir;
	bool escape = exec_needs_escape(r->argv, cwd);
	if (escape) {
		pb_string_always(&req, 3, "sh");
		pb_string_always(&req, 3, "-c");
		pb_string_always(&req, 3, exec_decode_script);
		pb_string_always(&req, 3, "sh");
		char *e = exec_octal_escape(cwd);
		pb_string_always(&req, 3, e ? e : "/");
		free(e);
		for (size_t i = 0; r->argv[i]; i++) {
			e = exec_octal_escape(r->argv[i]);
			if (!e)
				req.oom = true;
			else
				pb_string_always(&req, 3, e);
			free(e);
		}
		cwd = "/";
	} else {
		for (size_t i = 0; r->argv[i]; i++)
			pb_string_always(&req, 3, r->argv[i]);
	}
	pb_uint(&req, 4, 1); /* PIPE: 0 would be DEVNULL (notes 5.11) */
	pb_uint(&req, 5, 1); /* with a pty it stays empty, as the SDKs read it */
	if (timeout > 0) {
		unsigned secs = (unsigned)timeout;
		if ((double)secs < timeout)
			secs++;
		pb_uint_always(&req, 6, secs ? secs : 1);
	}
	pb_string_always(&req, 7, cwd);
	/* spec env on every exec: V1 create takes env only as a Secret,
	 * and exec env reaches the same processes without one */
	add_env(&req, (const char *const *)spec->env);
	add_env(&req, r->env);
	if (r->killable)
		pb_map_entry(&req, 12, EXEC_MARKER_VAR, x->marker);
	if (r->tty) {
		struct pb_buf pty = {0};
		modal_pty_info(&pty, r->tty->rows, r->tty->cols,
			       (const char *const *)spec->env, r->env);
		pb_msg(&req, 9, &pty);
		req.oom |= pty.oom;
		pb_buf_free(&pty);
	}
	if (req.oom) {
		pb_buf_free(&req);
		return -ENOMEM;
	}
	int code = modal_router(x->m, "TaskExecStart", &req, &resp, 60,
				&grpc_retry_router, st);
	pb_buf_free(&req);
	pb_buf_free(&resp);
	return code == GRPC_OK ? 0 : -EIO;
}

/* One of the marker scripts beside the command (kill, signal); also after
 * the call's deadline, which is often why it runs. */
static void run_helper(struct sb_backend *b, const char *const *argv,
		       const char *what, const char *exec_id)
{
	struct modal_run r = {
		.argv = argv, .cwd = "/", .timeout_s = 20, .stdin_fd = -1,
		.stdin_size = -1, .cancel_fd = -1,
	};
	struct sb_exec_result res;
	double held = call_deadline_suspend();
	int rc = modal_run(b, &r, &res);
	call_deadline_restore(held);
	if (rc < 0 || res.timed_out || res.exit_code != 0)
		sb_warn("modal: %s exec %s in the sandbox failed (%s)", what, exec_id,
			rc < 0 ? "could not run the script" : res.timed_out ? "timed out"
			: "its script failed");
}

static void kill_exec(struct sb_backend *b, const char *marker, const char *exec_id)
{
	const char *argv[6];
	exec_marker_kill_argv(argv, marker);
	run_helper(b, argv, "killing", exec_id);
}

static void signal_exec(struct sb_backend *b, const char *marker, int sig,
			const char *exec_id)
{
	const char *argv[7];
	exec_marker_signal_argv(argv, marker, sig);
	run_helper(b, argv, "signalling", exec_id);
}

static bool is_gone_code(int code)
{
	return code == GRPC_NOT_FOUND;
}

int modal_run(struct sb_backend *b, const struct modal_run *r,
	      struct sb_exec_result *res)
{
	struct modal *m = b->priv;
	memset(res, 0, sizeof(*res));
	if (!r->argv || !r->argv[0])
		return -EINVAL;
	double start = call_deadline_now();
	/* a file call's deadline bounds the commands it runs */
	double timeout = call_deadline_clamp(r->timeout_s > 0 ? r->timeout_s : 0);
	bool clamped = false;
	if (m->life_end > 0) {
		double left = m->life_end - start;
		if (left <= 0) {
			res->sandbox_terminated = true;
			return sb_backend_fail(b, "the Modal sandbox %s reached its lifetime (%u s)",
					       m->sandbox_id, m->lifetime_s);
		}
		if (timeout == 0 || timeout > left) {
			timeout = left;
			clamped = true;
		}
	}
	res->timeout_applied_s = timeout;

	bool stop_it = false;
	struct xc *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->b = b;
	x->m = m;
	x->r = r;
	grpc_uuid4(x->exec_id);
	exec_marker_new(x->marker);
	struct grpc_status st;
	int rc = start_exec(x, timeout, &st);
	if (rc < 0) {
		if (st.code == GRPC_NOT_FOUND || modal_is_auth_error(st.code)) {
			res->sandbox_terminated = st.code == GRPC_NOT_FOUND;
			char msg[SB_REASON_MAX];
			modal_describe(msg, sizeof(msg), "exec", &st);
			rc = st.code == GRPC_NOT_FOUND
				? sb_backend_fail(b, "the Modal sandbox %s is gone (terminated or past its lifetime)", m->sandbox_id)
				: sb_backend_fail(b, "%s", msg);
		} else {
			modal_describe(b->error, sizeof(b->error), "exec start", &st);
			sb_warn("%s", b->error);
		}
		free(x);
		return rc;
	}
	double deadline = timeout > 0 ? start + timeout + DEADLINE_GRACE_S : 0;
	x->multi = curl_multi_init();
	x->in_buf = malloc(STDIN_CHUNK);
	if (!x->multi || !x->in_buf) {
		rc = -ENOMEM;
		goto out;
	}
	/* One connection per stream: libcurl 7.88 stalls streams that wait to
	 * multiplex onto a prior-knowledge h2c connection, and a connection
	 * per call is also what the shared pool gives unary calls. */
	curl_multi_setopt(x->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
	for (int i = 0; i < 2; i++) {
		x->out[i].x = x;
		x->out[i].fd = i;
		/* a terminal is one stream (Modal's stderr stays empty) */
		x->out[i].fn = i && !r->tty ? r->on_stderr : r->on_stdout;
	}
	x->in_active = true;
	if (r->stdin_fd < 0 && r->tty)
		x->in_active = false; /* nothing will be typed: leave it open */
	else if (r->stdin_fd < 0)
		x->in_eof = true; /* close the command's stdin at once */
	/* forwarded signals find the command by its marker */
	int sig_fd = r->killable && r->signal_fd ? *r->signal_fd : -1;
	for (int i = 0; i < 2 && rc == 0; i++)
		rc = start_stream(x, &x->out[i], deadline);
	if (rc == 0)
		rc = start_wait(x, deadline);

	double exit_at = 0;
	int poll_ms = 5;
	while (rc == 0) {
		double now = call_deadline_now();
		/* (re)start what is due */
		for (int i = 0; i < 2 && rc == 0; i++) {
			struct out_stream *s = &x->out[i];
			if (!s->done && !s->call && s->retry_at > 0 && s->retry_at <= now)
				rc = start_stream(x, s, deadline);
		}
		if (rc == 0 && !x->exited && !x->wait && x->wait_at > 0 && x->wait_at <= now)
			rc = start_wait(x, deadline);
		bool want_stdin_fd = false;
		if (rc == 0 && x->in_active && !x->exited && !x->in_call &&
		    (x->in_at == 0 || x->in_at <= now)) {
			if (fill_stdin(x, false))
				rc = start_stdin(x);
			else
				want_stdin_fd = true;
		}
		if (rc < 0 || x->fatal_code || x->cb_rc)
			break;
		if (x->exited) {
			if (!exit_at)
				exit_at = now;
			bool all = true;
			for (int i = 0; i < 2; i++) {
				struct out_stream *s = &x->out[i];
				double quiet = now - (s->last_data > exit_at ? s->last_data : exit_at);
				if (!s->done && quiet < DRAIN_QUIET_S && now - exit_at < DRAIN_MAX_S)
					all = false;
			}
			if (all)
				break;
		}
		if (deadline > 0 && now >= deadline && !x->exited) {
			res->timed_out = true;
			break;
		}
		struct curl_waitfd extra[4];
		unsigned nextra = 0;
		int i_cancel = -1, i_in = -1, i_sig = -1, i_size = -1;
		if (r->cancel_fd >= 0) {
			i_cancel = (int)nextra;
			extra[nextra++] = (struct curl_waitfd){r->cancel_fd, CURL_WAIT_POLLIN, 0};
		}
		if (sig_fd >= 0 && !x->exited) {
			i_sig = (int)nextra;
			extra[nextra++] = (struct curl_waitfd){sig_fd, CURL_WAIT_POLLIN, 0};
		}
		if (r->tty && r->tty->resize_fd >= 0) {
			i_size = (int)nextra;
			extra[nextra++] = (struct curl_waitfd){r->tty->resize_fd, CURL_WAIT_POLLIN, 0};
		}
		if (want_stdin_fd) {
			i_in = (int)nextra;
			extra[nextra++] = (struct curl_waitfd){r->stdin_fd, CURL_WAIT_POLLIN, 0};
		}
		int running = 0;
		curl_multi_perform(x->multi, &running);
		/* libcurl 7.88 may notice an ended HTTP/2 stream only on a later
		 * wakeup: poll briefly after activity, backing off when idle */
		int wait_ms = poll_ms;
		int cap = x->in_call ? 20 : 250; /* a stdin write gates the next */
		poll_ms = poll_ms * 2 > cap ? cap : poll_ms * 2;
		if (deadline > 0 && (deadline - now) * 1000 < wait_ms)
			wait_ms = (int)((deadline - now) * 1000) + 1;
		curl_multi_poll(x->multi, extra, nextra, wait_ms, NULL);
		curl_multi_perform(x->multi, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(x->multi, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct grpc_call *c = NULL;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
			CURLcode cc = msg->data.result;
			struct grpc_status cs;
			grpc_call_finish(c, cc, &cs);
			sb_debug("modal: exec %.8s: %s call done after %.3f s: %s",
				 x->exec_id,
				 c == x->wait ? "wait" : c == x->in_call ? "stdin" : "output",
				 call_deadline_now() - start, grpc_code_name(cs.code));
			poll_ms = 5;
			if (c == x->out[0].call)
				stream_done(x, &x->out[0], &cs);
			else if (c == x->out[1].call)
				stream_done(x, &x->out[1], &cs);
			else if (c == x->wait)
				wait_done(x, &cs);
			else if (c == x->in_call)
				stdin_done(x, &cs);
		}
		if (i_cancel >= 0 && extra[i_cancel].revents) {
			res->cancelled = true;
			break;
		}
		if (i_in >= 0 && extra[i_in].revents && x->in_active && !x->in_call) {
			fill_stdin(x, true);
		}
		if (i_sig >= 0 && extra[i_sig].revents) {
			int sig = exec_forwarded_signal(sig_fd);
			if (sig)
				signal_exec(b, x->marker, sig, x->exec_id);
		}
		unsigned short rows, cols;
		if (i_size >= 0 && extra[i_size].revents &&
		    exec_tty_resize(r->tty, &rows, &cols))
			sb_debug("modal: exec %.8s: the terminal keeps its size (%ux%u asked): "
				 "Modal cannot resize a running command's terminal",
				 x->exec_id, rows, cols);
	}
	stop_it = !x->exited && (res->cancelled || res->timed_out || x->cb_rc);
	if (rc == 0 && x->cb_rc)
		rc = x->cb_rc;
	if (rc == 0 && x->fatal_code) {
		if (is_gone_code(x->fatal_code)) {
			res->sandbox_terminated = true;
			rc = sb_backend_fail(b, "the Modal sandbox %s is gone (terminated or past its lifetime)",
					     m->sandbox_id);
		} else if (modal_is_auth_error(x->fatal_code)) {
			rc = sb_backend_fail(b, "Modal rejected the credentials during exec (%s): check MODAL_TOKEN_ID/MODAL_TOKEN_SECRET or run `modal token new`",
					     x->fatal_msg);
		} else {
			snprintf(b->error, sizeof(b->error), "Modal exec failed: %s", x->fatal_msg);
			sb_warn("%s", b->error);
			rc = -EIO;
		}
	}
	if (rc == 0 && x->exited) {
		double elapsed = call_deadline_now() - start;
		if (x->sig) {
			/* a server-side deadline kills with SIGKILL: tell it
			 * from a guest SIGKILL by the time it took */
			if (x->sig == 9 && timeout > 0 && elapsed >= timeout - 0.5)
				res->timed_out = true;
			else
				res->term_signal = x->sig;
		} else if (x->code == -1) {
			res->timed_out = true;
		} else {
			res->exit_code = x->code;
		}
		/* The server's deadline kills the command; what it started
		 * (in the background, on its terminal) may live on. */
		stop_it = res->timed_out;
	}
	if (res->timed_out && clamped) {
		/* the deadline was the sandbox's own end: it is gone */
		res->sandbox_terminated = true;
		rc = sb_backend_fail(b, "the Modal sandbox %s reached its lifetime (%u s)",
				     m->sandbox_id, m->lifetime_s);
		stop_it = false;
	}
out:
	drop_call(x, &x->out[0].call);
	drop_call(x, &x->out[1].call);
	drop_call(x, &x->wait);
	drop_call(x, &x->in_call);
	if (x->multi)
		curl_multi_cleanup(x->multi);
	pb_buf_free(&x->wait_resp);
	free(x->in_buf);
	if (stop_it && r->killable && !sb_backend_is_dead(b))
		kill_exec(b, x->marker, x->exec_id);
	free(x);
	return rc;
}

/* Is the sandbox still there? A trivial exec, as the Python backend does
 * (SandboxWait polling lags by about 35 s). */
static bool still_alive(struct sb_backend *b)
{
	const char *argv[] = {"true", NULL};
	struct modal_run r = {
		.argv = argv, .timeout_s = 10, .stdin_fd = -1, .stdin_size = -1,
		.cancel_fd = -1,
	};
	struct sb_exec_result res;
	/* a spent call deadline must not read as a dead sandbox */
	double held = call_deadline_suspend();
	int rc = modal_run(b, &r, &res);
	call_deadline_restore(held);
	return rc == 0 && !res.sandbox_terminated;
}

int modal_exec(struct sb_backend *b, const struct sb_exec_req *req,
	       struct sb_exec_result *res)
{
	struct modal_run r = {
		.argv = req->argv,
		.cwd = req->cwd,
		.env = req->env,
		.timeout_s = req->timeout_s,
		.stdin_fd = req->stdin_fd,
		.stdin_size = -1,
		.on_stdout = req->on_stdout,
		.on_stderr = req->on_stderr,
		.cb_arg = req->cb_arg,
		.cancel_fd = req->cancel_fd,
		.killable = true,
		.signal_fd = req->signal_fd,
		.tty = req->tty,
	};
	int rc = modal_run(b, &r, res);
	if (rc == 0 && res->term_signal && !sb_backend_is_dead(b) && !still_alive(b)) {
		res->sandbox_terminated = true;
		res->term_signal = 0;
		if (!sb_backend_is_dead(b))
			rc = sb_backend_fail(b, "the Modal sandbox %s is gone (terminated or past its lifetime)",
					     ((struct modal *)b->priv)->sandbox_id);
		else
			rc = -EIO;
	}
	return rc;
}
