/* exec = process.Process/Start, a Connect server stream (notes 1.5): one
 * request envelope, then start / data / end events and an end-stream
 * envelope. What goes to the running process (stdin, typed input, its
 * terminal's size, signals) is in e2b_proc.c. With sbexec -t the command
 * runs on envd's own PTY: its output is one stream, `pty` data, shown as
 * stdout. A user's command carries a marker in its environment, so that
 * sbexec's signals and a kill on timeout or cancel reach everything it
 * started (envd signals only the process, and only TERM or KILL).
 * A stream cut after the start event is picked up again with
 * Process/Connect by pid (envd keeps the end of an exited process); a cut
 * before it is not retried, as the command may have started. */
#include "e2b.h"
#include "backends/exec_marker.h"
#include "backends/exec_pump.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define KEEPALIVE_S 20          /* asked of envd, to beat idle proxies */
#define IDLE_LIMIT_S 65.0       /* no byte for this long: the stream is dead */
#define DEADLINE_GRACE_S 5.0    /* envd's own timeout normally ends it first */
#define REATTACH_MAX 3
#define END_WAIT_S 2.0        /* for the end-stream envelope after the end event */
#define STDIN_CHUNK 49152
/* typed input: envd's write to the PTY blocks while the terminal's
 * 4 KiB input queue is full */
#define PTY_INPUT_CHUNK 4096

struct xs {
	struct sb_backend *b;
	const struct e2b_run *r;
	struct connect_reader rd;
	CURL *h;
	long status;             /* HTTP status of the current stream */
	char *errbody;           /* a non-200 answer's body */
	size_t errlen;
	bool started, ended, stream_end;
	int64_t pid;
	struct e2b_event end;
	char end_code[64], end_msg[300];
	int cb_rc, proto_rc;
	double last_byte;
};

static int on_msg(void *arg, unsigned flags, const char *p, size_t len)
{
	struct xs *x = arg;
	if (flags & CONNECT_FLAG_END) {
		x->stream_end = true;
		return e2b_parse_end_stream(p, len, x->end_code, sizeof(x->end_code),
					    x->end_msg, sizeof(x->end_msg));
	}
	struct e2b_event ev;
	int rc = e2b_parse_event(p, len, &ev);
	if (rc < 0)
		return rc;
	switch (ev.kind) {
	case EV_START:
		x->started = true;
		x->pid = ev.pid;
		break;
	case EV_STDOUT: /* and a PTY's output */
	case EV_STDERR: {
		sb_output_fn fn = ev.kind == EV_STDOUT ? x->r->on_stdout : x->r->on_stderr;
		if (fn && ev.len && !x->cb_rc) {
			int c = fn(x->r->cb_arg, ev.data, ev.len);
			if (c < 0)
				x->cb_rc = c;
		}
		break;
	}
	case EV_END:
		x->ended = true;
		x->end = ev;
		ev.data = NULL;
		break;
	default:
		break;
	}
	e2b_event_free(&ev);
	return 0;
}

static size_t on_write(char *data, size_t sz, size_t n, void *u)
{
	struct xs *x = u;
	size_t len = sz * n;
	x->last_byte = call_deadline_now();
	if (x->status == 0)
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
	if (x->status != 200) {
		if (x->errlen + len > 65536)
			return len;
		char *p = realloc(x->errbody, x->errlen + len + 1);
		if (!p)
			return 0;
		memcpy(p + x->errlen, data, len);
		x->errbody = p;
		x->errlen += len;
		p[x->errlen] = '\0';
		return len;
	}
	int rc = connect_reader_feed(&x->rd, data, len, on_msg, x);
	if (rc < 0) {
		x->proto_rc = rc;
		return 0;
	}
	return len;
}

static int add_env(json_t *envs, const char *const *kv)
{
	for (size_t i = 0; kv && kv[i]; i++) {
		const char *eq = strchr(kv[i], '=');
		if (!eq || eq == kv[i])
			continue;
		char *k = strndup(kv[i], (size_t)(eq - kv[i]));
		if (!k)
			return -ENOMEM;
		if (exec_utf8_valid(k) && exec_utf8_valid(eq + 1))
			json_object_set_new(envs, k, json_string(eq + 1));
		free(k);
	}
	return 0;
}

static json_t *start_request(struct sb_backend *b, const struct e2b_run *r)
{
	const char *cwd = r->cwd ? r->cwd : b->spec.workdir;
	bool escape = exec_needs_escape(r->argv, cwd);
	json_t *args = json_array(), *envs = json_object(), *proc = json_object();
	if (escape) {
		json_object_set_new(proc, "cmd", json_string("/bin/sh"));
		json_array_append_new(args, json_string("-c"));
		json_array_append_new(args, json_string(exec_decode_script));
		json_array_append_new(args, json_string("sh"));
		char *c = exec_octal_escape(cwd);
		json_array_append_new(args, json_string(c ? c : "/"));
		free(c);
		for (size_t i = 0; r->argv[i]; i++) {
			char *a = exec_octal_escape(r->argv[i]);
			json_array_append_new(args, json_string(a ? a : ""));
			free(a);
		}
		cwd = "/";
	} else {
		json_object_set_new(proc, "cmd", json_string(r->argv[0]));
		for (size_t i = 1; r->argv[i]; i++)
			json_array_append_new(args, json_string(r->argv[i]));
	}
	add_env(envs, (const char *const *)b->spec.env);
	add_env(envs, r->env);
	if (r->marker)
		json_object_set_new(envs, EXEC_MARKER_VAR, json_string(r->marker));
	json_object_set_new(proc, "args", args);
	json_object_set_new(proc, "envs", envs);
	json_object_set_new(proc, "cwd", json_string(cwd));
	json_t *req = json_object();
	json_object_set_new(req, "process", proc);
	if (r->tty) {
		/* the PTY is the command's stdin, stdout and stderr: envd
		 * ignores "stdin" for it */
		json_object_set_new(req, "pty", json_pack("{s:{s:i,s:i}}", "size",
							  "cols", (int)r->tty->cols,
							  "rows", (int)r->tty->rows));
		return req;
	}
	/* absent means true for old clients: say it, so readers get EOF */
	json_object_set_new(req, "stdin", json_boolean(r->stdin_fd >= 0));
	return req;
}

static CURL *stream_handle(struct sb_backend *b, struct xs *x, const char *proc,
			   const char *body, size_t len, struct curl_slist **hl,
			   double timeout_s, char *url, size_t urln)
{
	struct e2b *e = b->priv;
	CURL *h = curl_easy_init();
	if (!h)
		return NULL;
	snprintf(url, urln, "%s/%s", e->envd.base_url, proc);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (e->envd.ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, e->envd.ca_file);
	if (e->envd.ca_dir)
		curl_easy_setopt(h, CURLOPT_CAPATH, e->envd.ca_dir);
	struct curl_slist *l = NULL;
	for (size_t i = 0; e->envd_hdrs[i]; i++)
		if (!x->r->as_root || strncmp(e->envd_hdrs[i], "Authorization:", 14) != 0)
			l = curl_slist_append(l, e->envd_hdrs[i]);
	if (x->r->as_root)
		l = curl_slist_append(l, "Authorization: Basic cm9vdDo="); /* "root:" */
	l = curl_slist_append(l, "Content-Type: application/connect+json");
	l = curl_slist_append(l, "Connect-Protocol-Version: 1");
	l = curl_slist_append(l, "Expect:");
	char hv[96];
	snprintf(hv, sizeof(hv), "Keepalive-Ping-Interval: %d", KEEPALIVE_S);
	l = curl_slist_append(l, hv);
	if (timeout_s > 0) {
		/* envd makes this the process's lifetime, and kills it then */
		snprintf(hv, sizeof(hv), "Connect-Timeout-Ms: %lld",
			 (long long)(timeout_s * 1000.0 + 0.5));
		l = curl_slist_append(l, hv);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	*hl = l;
	return h;
}

/* Feeds one chunk of stdin, or ends the command's input at EOF. false
 * once stdin is done. */
static bool feed_stdin(struct sb_backend *b, struct xs *x)
{
	char buf[STDIN_CHUNK];
	bool pty = x->r->tty != NULL;
	ssize_t n = read(x->r->stdin_fd, buf, pty ? PTY_INPUT_CHUNK : sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0) {
		e2b_proc_end_input(b, x->pid, pty);
		return false;
	}
	/* a command that exited or closed its stdin takes no more */
	return e2b_proc_input(b, x->pid, pty, buf, (size_t)n) == 0;
}

static int signal_number(const char *status)
{
	static const struct { const char *name; int sig; } t[] = {
		{"killed", 9}, {"terminated", 15}, {"interrupt", 2}, {"hangup", 1},
		{"aborted", 6}, {"segmentation fault", 11}, {"broken pipe", 13},
		{"quit", 3}, {"alarm clock", 14}, {"user defined signal 1", 10},
		{"user defined signal 2", 12}, {"bus error", 7},
		{"floating point exception", 8}, {"illegal instruction", 4},
		{"trace/breakpoint trap", 5},
	};
	const char *p = strstr(status, "signal: ");
	if (!p)
		return 0;
	p += 8;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strncmp(p, t[i].name, strlen(t[i].name)))
			return t[i].sig;
	return 9;
}

int e2b_run(struct sb_backend *b, const struct e2b_run *r,
	    struct sb_exec_result *res)
{
	struct e2b *e = b->priv;
	memset(res, 0, sizeof(*res));
	if (!r->argv || !r->argv[0])
		return -EINVAL;
	double start = call_deadline_now();
	double timeout = call_deadline_clamp(r->timeout_s > 0 ? r->timeout_s : 0);
	res->timeout_applied_s = timeout;
	struct xs x = {.b = b, .r = r, .last_byte = start};
	json_t *sreq = start_request(b, r);
	char *text = sreq ? json_dumps(sreq, JSON_COMPACT) : NULL;
	json_decref(sreq);
	size_t blen = 0;
	char *body = text ? connect_envelope(text, strlen(text), &blen) : NULL;
	free(text);
	if (!body)
		return -ENOMEM;
	CURLM *multi = curl_multi_init();
	if (!multi) {
		free(body);
		return -ENOMEM;
	}
	const char *proc = "process.Process/Start";
	int reattach = 0, rc = 0;
	bool stdin_open = r->stdin_fd >= 0, killed = false;
	/* signals go by the marker: without one there is no way to send them */
	int sig_fd = r->marker && r->signal_fd ? *r->signal_fd : -1;
	double deadline = timeout > 0 ? start + timeout + DEADLINE_GRACE_S : 0;
	for (;;) {
		char url[1024];
		struct curl_slist *hl = NULL;
		x.status = 0;
		connect_reader_free(&x.rd);
		CURL *h = stream_handle(b, &x, proc, body, blen, &hl,
					timeout > 0 ? timeout - (call_deadline_now() - start) : 0,
					url, sizeof(url));
		if (!h) {
			rc = -ENOMEM;
			break;
		}
		x.h = h;
		curl_multi_add_handle(multi, h);
		CURLcode result = CURLE_OK;
		bool done = false;
		double ended_at = 0;
		x.last_byte = call_deadline_now();
		while (!done) {
			int running = 0;
			curl_multi_perform(multi, &running);
			if (x.status == 0)
				curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x.status);
			CURLMsg *m;
			int left;
			while ((m = curl_multi_info_read(multi, &left)))
				if (m->msg == CURLMSG_DONE) {
					result = m->data.result;
					done = true;
				}
			if (done || x.cb_rc || x.stream_end)
				break;
			double now = call_deadline_now();
			/* the end event came: its end-stream envelope follows at once */
			if (x.ended && !ended_at)
				ended_at = now;
			if (ended_at && now - ended_at > END_WAIT_S)
				break;
			if (deadline > 0 && now >= deadline) {
				res->timed_out = true;
				break;
			}
			if (now - x.last_byte > IDLE_LIMIT_S) {
				sb_warn("e2b: exec stream silent for %.0f s: treating it as cut", IDLE_LIMIT_S);
				result = CURLE_OPERATION_TIMEDOUT;
				done = true;
				break;
			}
			struct curl_waitfd extra[4];
			unsigned ne = 0;
			int icancel = -1, iin = -1, isig = -1, isize = -1;
			if (r->cancel_fd >= 0) {
				icancel = (int)ne;
				extra[ne++] = (struct curl_waitfd){r->cancel_fd, CURL_WAIT_POLLIN, 0};
			}
			if (stdin_open && x.started) {
				iin = (int)ne;
				extra[ne++] = (struct curl_waitfd){r->stdin_fd, CURL_WAIT_POLLIN, 0};
			}
			if (sig_fd >= 0 && x.started && !x.ended) {
				isig = (int)ne;
				extra[ne++] = (struct curl_waitfd){sig_fd, CURL_WAIT_POLLIN, 0};
			}
			if (r->tty && x.started && !x.ended) {
				isize = (int)ne;
				extra[ne++] = (struct curl_waitfd){r->tty->resize_fd, CURL_WAIT_POLLIN, 0};
			}
			int wait_ms = x.ended ? 50 : 500;
			if (deadline > 0 && (deadline - now) * 1000 < wait_ms)
				wait_ms = (int)((deadline - now) * 1000) + 1;
			curl_multi_poll(multi, extra, ne, wait_ms, NULL);
			if (icancel >= 0 && extra[icancel].revents) {
				res->cancelled = true;
				break;
			}
			unsigned short rows, cols;
			if (isize >= 0 && extra[isize].revents &&
			    exec_tty_resize(r->tty, &rows, &cols))
				e2b_proc_resize(b, x.pid, rows, cols);
			if (iin >= 0 && extra[iin].revents)
				stdin_open = feed_stdin(b, &x);
			if (isig >= 0 && extra[isig].revents) {
				int sig = exec_forwarded_signal(sig_fd);
				if (sig)
					e2b_marker_signal(b, r->marker, sig);
			}
		}
		curl_multi_remove_handle(multi, h);
		curl_easy_cleanup(h);
		curl_slist_free_all(hl);
		if (x.cb_rc || res->cancelled || res->timed_out) {
			killed = true;
			break;
		}
		if (x.ended)
			break;
		if (x.status && x.status != 200) {
			rc = e2b_envd_status(b, x.status, x.errbody, x.errlen, "exec");
			if (rc == -EIO && sb_backend_is_dead(b))
				res->sandbox_terminated = x.status == 502;
			if (rc == -EAGAIN && !x.started && reattach++ < REATTACH_MAX) {
				/* the proxy answered instead of envd: nothing ran */
				free(x.errbody);
				x.errbody = NULL;
				x.errlen = 0;
				usleep(300000);
				rc = 0;
				continue;
			}
			if (rc == -EAGAIN)
				rc = -EIO;
			break;
		}
		if (x.stream_end && x.end_code[0]) {
			if (!strcmp(x.end_code, "deadline_exceeded")) {
				res->timed_out = true;
				break;
			}
			if (!strcmp(x.end_code, "not_found") && x.started) {
				snprintf(b->error, sizeof(b->error), "E2B lost the end of process %lld", (long long)x.pid);
				rc = -EIO;
				break;
			}
			if (!strcmp(x.end_code, "unauthenticated")) {
				rc = sb_backend_fail(b, "envd of E2B sandbox %s refused the command (%s): remount",
						     e->sandbox_id, x.end_msg);
				break;
			}
			snprintf(b->error, sizeof(b->error), "E2B could not run '%.100s': %s: %.200s",
				 r->argv[0], x.end_code, x.end_msg);
			sb_warn("%s", b->error);
			rc = x.started ? -EIO : -ENOENT;
			if (!strcmp(x.end_code, "invalid_argument") && strstr(x.end_msg, "cwd"))
				rc = -ENOENT;
			break;
		}
		if (x.proto_rc) {
			snprintf(b->error, sizeof(b->error), "envd sent a malformed exec stream (%s)",
				 strerror(-x.proto_rc));
			rc = -EPROTO;
			break;
		}
		/* cut before the end event */
		if (!x.started) {
			snprintf(b->error, sizeof(b->error), "the E2B exec stream was cut before the command started (%s): not retried, it may have run",
				 curl_easy_strerror(result));
			sb_warn("%s", b->error);
			rc = -EIO;
			break;
		}
		if (reattach++ >= REATTACH_MAX) {
			snprintf(b->error, sizeof(b->error), "the E2B exec stream of process %lld was cut %d times",
				 (long long)x.pid, REATTACH_MAX);
			rc = -EIO;
			break;
		}
		sb_info("e2b: exec stream of process %lld cut (%s): reattaching",
			(long long)x.pid, curl_easy_strerror(result));
		free(body);
		char conn[96];
		snprintf(conn, sizeof(conn), "{\"process\":{\"pid\":%lld}}", (long long)x.pid);
		body = connect_envelope(conn, strlen(conn), &blen);
		if (!body) {
			rc = -ENOMEM;
			break;
		}
		proc = "process.Process/Connect";
		x.stream_end = false;
		usleep(100000);
	}
	curl_multi_cleanup(multi);
	free(body);
	free(x.errbody);
	connect_reader_free(&x.rd);
	if (killed && x.started && !x.ended && !sb_backend_is_dead(b))
		e2b_proc_kill(b, x.pid);
	if (rc == 0 && x.cb_rc)
		rc = x.cb_rc;
	if (rc == 0 && x.ended && !res->timed_out && !res->cancelled) {
		if (x.end.exited) {
			res->exit_code = x.end.exit_code;
		} else {
			int sig = signal_number(x.end.status);
			double took = call_deadline_now() - start;
			/* envd's deadline kills with SIGKILL: told by the time it took */
			if (sig == 9 && timeout > 0 && took >= timeout - 0.5)
				res->timed_out = true;
			else if (sig)
				res->term_signal = sig;
			else
				res->exit_code = x.end.exit_code;
		}
	}
	/* envd's deadline or our kill took the process itself: what it
	 * started is found by its marker */
	if (r->marker && x.started && (killed || res->timed_out) && !sb_backend_is_dead(b))
		e2b_marker_kill(b, r->marker);
	e2b_event_free(&x.end);
	return rc;
}

int e2b_exec(struct sb_backend *b, const struct sb_exec_req *req,
	     struct sb_exec_result *res)
{
	char marker[EXEC_MARKER_SIZE];
	exec_marker_new(marker);
	int sig_fd = exec_signal_fd(req);
	struct e2b_run r = {
		.argv = req->argv, .cwd = req->cwd, .env = req->env,
		.timeout_s = req->timeout_s, .stdin_fd = req->stdin_fd,
		.on_stdout = req->on_stdout, .on_stderr = req->on_stderr,
		.cb_arg = req->cb_arg, .cancel_fd = req->cancel_fd,
		.tty = req->tty, .marker = marker, .signal_fd = &sig_fd,
	};
	return e2b_run(b, &r, res);
}
