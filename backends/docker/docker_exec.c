/* exec for the docker backend: an attached exec, its output demultiplexed
 * into the callbacks as it streams, stdin forwarded, the exit code read
 * from GET /exec/{id}/json right after the stream ends.
 *
 * Transport: POST /exec/{id}/start makes the engine take the connection
 * over ("hijack"): after the response headers the same connection carries
 * stdin to the engine and the framed output back, and a half-close is
 * stdin's EOF. libcurl's normal transfer cannot do that (its request body
 * is fixed, and with the Upgrade headers it stops at 101), so we let curl
 * open the connection (CONNECT_ONLY: unix socket, TCP or TLS alike) and
 * speak HTTP/1.1 ourselves on it with curl_easy_send/curl_easy_recv. The
 * half-close is shutdown(SHUT_WR) on the socket: for TLS this skips
 * close_notify, which the engine reads as EOF all the same.
 *
 * Killing: closing the stream does not kill the command in the engine,
 * and there is no kill for an exec. Each exec therefore carries a random
 * marker in its environment (backends/exec_marker.h), which its children inherit;
 * on timeout or cancel a second exec, as root, finds the processes whose
 * environment holds the marker and kills each one's process group (an
 * exec is its own session, so the group is the whole command) and the
 * process itself. Only POSIX sh, grep and kill are needed in the image. */
#include "docker.h"
#include "docker_stream.h"
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEADER_MAX 16384
#define START_TIMEOUT_S 30.0
#define KILL_GRACE_S 3.0   /* after a kill: how long the stream may take to end */
#define HOLD_MAX 4096
#define OCI_PREFIX "OCI runtime exec failed"

static int ms_until(double deadline)
{
	double left = deadline - call_deadline_now();
	return left <= 0 ? 0 : left > 3600 ? 3600000 : (int)(left * 1000) + 1;
}

/* ---- output routing ---- */

struct out {
	const struct sb_exec_req *req;
	int cb_rc;        /* a callback's abort value; output is dropped after */
	/* dockerd reports a command it could not start (not found, bad cwd)
	 * as text on stdout and exit 126; the first stdout bytes are held
	 * while they could be that text, so it can go to stderr instead. */
	char hold[HOLD_MAX];
	size_t hold_len;
	bool holding;
};

static int deliver(struct out *o, int stream, const char *data, size_t len)
{
	if (o->cb_rc || !len)
		return 0;
	sb_output_fn fn = stream == DK_STREAM_STDOUT ? o->req->on_stdout
						     : o->req->on_stderr;
	int rc = fn ? fn(o->req->cb_arg, data, len) : 0;
	if (rc < 0)
		o->cb_rc = rc;
	return 0;
}

static void release_hold(struct out *o, int stream)
{
	o->holding = false;
	deliver(o, stream, o->hold, o->hold_len);
	o->hold_len = 0;
}

static int on_payload(void *arg, int stream, const char *data, size_t len)
{
	struct out *o = arg;
	if (stream == DK_STREAM_STDOUT && o->holding) {
		if (o->hold_len + len > sizeof(o->hold)) {
			release_hold(o, DK_STREAM_STDOUT);
		} else {
			memcpy(o->hold + o->hold_len, data, len);
			o->hold_len += len;
			size_t cmp = o->hold_len < sizeof(OCI_PREFIX) - 1
					     ? o->hold_len
					     : sizeof(OCI_PREFIX) - 1;
			if (memcmp(o->hold, OCI_PREFIX, cmp) != 0)
				release_hold(o, DK_STREAM_STDOUT);
			return 0;
		}
	}
	return deliver(o, stream, data, len);
}

/* ---- the raw connection ---- */

struct conn {
	CURL *h;
	curl_socket_t sock;
};

static int conn_send_all(struct conn *c, const char *buf, size_t len,
			 double deadline)
{
	while (len) {
		size_t n = 0;
		CURLcode rc = curl_easy_send(c->h, buf, len, &n);
		if (rc == CURLE_AGAIN) {
			struct pollfd p = {.fd = c->sock, .events = POLLOUT};
			int w = ms_until(deadline);
			if (w == 0 || (poll(&p, 1, w) == 0))
				return -ETIMEDOUT;
			continue;
		}
		if (rc != CURLE_OK)
			return -EIO;
		buf += n;
		len -= n;
	}
	return 0;
}

/* Non-blocking read: bytes read, 0 at EOF, -EAGAIN, or -EIO. */
static ssize_t conn_recv(struct conn *c, char *buf, size_t len)
{
	size_t n = 0;
	CURLcode rc = curl_easy_recv(c->h, buf, len, &n);
	if (rc == CURLE_AGAIN)
		return -EAGAIN;
	if (rc != CURLE_OK)
		return -EIO;
	return (ssize_t)n;
}

/* Reads the response head; what came after it is left in buf[*body_off,
 * *got). Returns the status, or a negative errno. */
static int read_head(struct conn *c, char *buf, size_t cap, size_t *got,
		     size_t *body_off, double deadline)
{
	*got = 0;
	for (;;) {
		char *end = *got >= 4 ? memmem(buf, *got, "\r\n\r\n", 4) : NULL;
		if (end) {
			*body_off = (size_t)(end + 4 - buf);
			int status = 0;
			if (sscanf(buf, "HTTP/%*d.%*d %d", &status) != 1)
				return -EPROTO;
			return status;
		}
		if (*got == cap)
			return -EPROTO;
		ssize_t n = conn_recv(c, buf + *got, cap - *got);
		if (n == -EAGAIN) {
			struct pollfd p = {.fd = c->sock, .events = POLLIN};
			int w = ms_until(deadline);
			if (w == 0 || poll(&p, 1, w) == 0)
				return -ETIMEDOUT;
			continue;
		}
		if (n <= 0)
			return n == 0 ? -ECONNRESET : (int)n;
		*got += (size_t)n;
	}
}

/* ---- exec create / inspect ---- */

static json_t *strv_json(const char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; a && v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

/* The container cannot run commands: decide whether it is gone. */
static int container_gone(struct sb_backend *b, struct sb_exec_result *res,
			  const char *what)
{
	struct docker *d = b->priv;
	char why[300];
	int running = dk_container_running(d, why, sizeof(why));
	if (running == 0) {
		res->sandbox_terminated = true;
		return dk_fail(b, "container %s %s", b->id, why);
	}
	dk_error(b, "%s", what);
	return -EIO;
}

/* ---- argv that JSON cannot carry ----
 * The API is JSON, whose strings are UTF-8: the engine turns any other
 * byte into U+FFFD. A command whose argv, cwd or env is not valid UTF-8
 * (a hostile file name, say) therefore runs under a small sh decoder:
 * each item is passed as "<kind><enc><text>", kind c (cd), e (export) or
 * a (argument), enc r (as is) or x (every byte as a printf \ooo escape),
 * and the decoder rebuilds the exact bytes in the guest. */

static const char decoder[] =
	"for a do shift\n"
	"  case $a in ?r*) v=${a#??} ;; *) v=$(printf \"${a#??}x\"); v=${v%x} ;; esac\n"
	"  case $a in c*) cd -- \"$v\" || exit 126 ;; e*) export \"$v\" ;;"
	" *) set -- \"$@\" \"$v\" ;; esac\n"
	"done\n"
	"exec \"$@\"\n";

static json_t *encoded(char kind, const char *s)
{
	bool raw = exec_utf8_valid(s);
	size_t n = strlen(s);
	char *out = malloc(raw ? n + 3 : 4 * n + 3);
	if (!out)
		return NULL;
	out[0] = kind;
	out[1] = raw ? 'r' : 'x';
	if (raw) {
		memcpy(out + 2, s, n + 1);
	} else {
		char *o = out + 2;
		for (const unsigned char *p = (const unsigned char *)s; *p; p++)
			o += sprintf(o, "\\%03o", *p);
	}
	json_t *j = json_string(out);
	free(out);
	return j;
}

static bool needs_decoder(const struct sb_exec_req *req)
{
	if (req->cwd && !exec_utf8_valid(req->cwd))
		return true;
	for (size_t i = 0; req->argv[i]; i++)
		if (!exec_utf8_valid(req->argv[i]))
			return true;
	for (size_t i = 0; req->env && req->env[i]; i++)
		if (!exec_utf8_valid(req->env[i]))
			return true;
	return false;
}

static int create_exec(struct sb_backend *b, const struct sb_exec_req *req,
		       const char *user, const char *marker, char *exec_id,
		       size_t idlen, struct sb_exec_result *res)
{
	struct docker *d = b->priv;
	bool wrap = needs_decoder(req);
	const char *cwd = req->cwd ? req->cwd : b->spec.workdir;
	json_t *env = strv_json(NULL), *cmd;
	if (wrap) {
		cmd = json_pack("[s,s,s,s]", "sh", "-c", decoder, "sbfs-argv");
		json_array_append_new(cmd, encoded('c', cwd));
		for (size_t i = 0; req->env && req->env[i]; i++)
			if (strchr(req->env[i], '='))
				json_array_append_new(cmd, encoded('e', req->env[i]));
		for (size_t i = 0; req->argv[i]; i++)
			json_array_append_new(cmd, encoded('a', req->argv[i]));
		cwd = "/";
	} else {
		cmd = strv_json(req->argv);
		for (size_t i = 0; req->env && req->env[i]; i++)
			if (strchr(req->env[i], '='))
				json_array_append_new(env, json_string(req->env[i]));
	}
	char mk[64];
	snprintf(mk, sizeof(mk), EXEC_MARKER_VAR "=%s", marker);
	json_array_append_new(env, json_string(mk));
	json_t *body = json_pack("{s:b,s:b,s:b,s:b,s:o,s:o,s:s}",
				 "AttachStdin", req->stdin_fd >= 0,
				 "AttachStdout", 1, "AttachStderr", 1, "Tty", req->tty != NULL,
				 "Cmd", cmd, "Env", env, "WorkingDir", cwd);
	if (!body)
		return -ENOMEM;
	/* From the start (API 1.42; older engines ignore it, and the resize
	 * after the start sets it there) */
	if (req->tty && req->tty->rows && req->tty->cols)
		json_object_set_new(body, "ConsoleSize",
				    json_pack("[i,i]", req->tty->rows, req->tty->cols));
	if (user)
		json_object_set_new(body, "User", json_string(user));
	struct dk_result r;
	int rc = dk_call(d, "POST", body, DK_CALL_TIMEOUT_MS, &r,
			 "/containers/%s/exec", d->cid);
	json_decref(body);
	if (rc < 0) {
		dk_error(b, "%s", r.msg);
		return -EIO;
	}
	const char *id = json_string_value(json_object_get(r.json, "Id"));
	if (r.status == 201 && id) {
		snprintf(exec_id, idlen, "%s", id);
		dk_result_free(&r);
		return 0;
	}
	char what[400];
	dk_fmt(what, sizeof(what), "the engine refused the command: %s", r.msg);
	long status = r.status;
	dk_result_free(&r);
	if (status == 404 || status == 409)
		return container_gone(b, res, what);
	dk_error(b, "%s", what);
	return -EIO;
}

/* Exit code of a finished exec; -EAGAIN while it still runs. */
static int inspect_exec(struct docker *d, const char *exec_id, int *code)
{
	struct dk_result r;
	int rc = dk_call(d, "GET", NULL, 15000, &r, "/exec/%s/json", exec_id);
	if (rc < 0)
		return rc;
	if (r.status != 200 || !r.json) {
		dk_result_free(&r);
		return r.status == 404 ? -ENOENT : -EPROTO;
	}
	rc = json_is_true(json_object_get(r.json, "Running")) ? -EAGAIN : 0;
	*code = (int)json_integer_value(json_object_get(r.json, "ExitCode"));
	dk_result_free(&r);
	return rc;
}


/* ---- the exec ---- */

struct pump {
	struct conn c;
	struct dk_demux dm;
	struct out o;
	struct stdin_pump stdin;
	bool eof;              /* the engine closed the stream */
	bool raw;              /* a terminal's stream: one stream, no frames */
	int proto_err;
};

/* A terminal's stream is the terminal's bytes; the others carry frames. */
static int feed_output(struct pump *p, const char *buf, size_t n)
{
	if (p->raw)
		return on_payload(&p->o, DK_STREAM_STDOUT, buf, n);
	return dk_demux_feed(&p->dm, buf, n, on_payload, &p->o);
}

/* Reads everything available; sets eof at the end of the stream. */
static int pump_output(struct pump *p, char *buf)
{
	for (;;) {
		ssize_t n = conn_recv(&p->c, buf, EXEC_IO_CHUNK);
		if (n == -EAGAIN)
			return 0;
		if (n <= 0) {
			p->eof = true;
			return n < 0 ? (int)n : 0;
		}
		int rc = feed_output(p, buf, (size_t)n);
		if (rc < 0) {
			p->proto_err = rc;
			p->eof = true;
			return rc;
		}
	}
}

static ssize_t send_stdin(void *arg, const char *buf, size_t len)
{
	struct pump *p = arg;
	size_t n = 0;
	CURLcode rc = curl_easy_send(p->c.h, buf, len, &n);
	if (rc == CURLE_AGAIN)
		return -EAGAIN;
	return rc == CURLE_OK ? (ssize_t)n : -EPIPE; /* the engine stopped reading */
}

static void close_stdin(void *arg)
{
	struct pump *p = arg;
	/* A terminal's end of input is its EOF character, typed: closing
	 * the stream would end the exec while the command runs on. */
	if (p->raw) {
		size_t n;
		(void)curl_easy_send(p->c.h, "\x04", 1, &n);
		return;
	}
	shutdown(p->c.sock, SHUT_WR); /* the command's stdin EOF */
}

static int start_stream(struct sb_backend *b, struct pump *p,
			const char *exec_id, char *buf,
			struct sb_exec_result *res)
{
	struct docker *d = b->priv;
	char err[CURL_ERROR_SIZE + 64];
	p->c.h = http_connect_raw(&d->ep, 10000, &p->c.sock, err, sizeof(err));
	if (!p->c.h) {
		dk_error(b, "cannot reach the Docker engine at %s: %s",
			 d->where, err);
		return -EIO;
	}
	const char *body = p->raw ? "{\"Detach\":false,\"Tty\":true}"
				  : "{\"Detach\":false,\"Tty\":false}";
	char head[512];
	int n = snprintf(head, sizeof(head),
			 "POST /%s/exec/%s/start HTTP/1.1\r\nHost: docker\r\n"
			 "User-Agent: sbfs\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n%s",
			 d->api, exec_id, strlen(body), body);
	double deadline = call_deadline_now() + call_deadline_clamp(START_TIMEOUT_S);
	int rc = conn_send_all(&p->c, head, (size_t)n, deadline);
	size_t got = 0, off = 0;
	if (rc == 0)
		rc = read_head(&p->c, buf, HEADER_MAX, &got, &off, deadline);
	if (rc < 0) {
		dk_error(b, "the Docker engine at %s did not start the command: %s",
			 d->where, strerror(-rc));
		return -EIO;
	}
	if (rc != 200 && rc != 101) {
		char what[400];
		dk_fmt(what, sizeof(what), "the engine could not start the command (HTTP %d: %.*s)",
			 rc, (int)strcspn(buf + off, "\r\n"), got > off ? buf + off : "");
		return rc == 404 || rc == 409 ? container_gone(b, res, what)
					       : (dk_error(b, "%s", what), -EIO);
	}
	/* output that arrived together with the head */
	if (got > off && (rc = feed_output(p, buf + off, got - off)) < 0) {
		p->proto_err = rc;
		p->eof = true;
	}
	return 0;
}

static void kill_exec(struct sb_backend *b, const char *marker);
static void signal_exec(struct sb_backend *b, const char *marker, int sig);

/* The command's terminal takes a size (sbexec -t); a failure only leaves
 * the old size. */
static void resize_exec(struct sb_backend *b, const char *exec_id,
			unsigned short rows, unsigned short cols)
{
	struct docker *d = b->priv;
	struct dk_result r;
	if (!rows || !cols)
		return;
	if (dk_call(d, "POST", NULL, DK_CALL_TIMEOUT_MS, &r, "/exec/%s/resize?h=%u&w=%u",
		    exec_id, rows, cols) < 0 || (r.status != 200 && r.status != 201))
		sb_debug("docker: resizing the terminal of a command in %s: %s", b->id,
			 r.msg[0] ? r.msg : "refused");
	dk_result_free(&r);
}

/* may_kill: false for the kill command itself, which is never killed in
 * turn (its timeout just stops waiting for it). */
static int exec_run(struct sb_backend *b, const struct sb_exec_req *req,
		    struct sb_exec_result *res, const char *user, bool may_kill)
{
	struct docker *d = b->priv;
	struct sb_exec_req bounded;
	int rc = exec_begin(req, &bounded, res);
	if (rc < 0)
		return rc;
	req = &bounded;
	char marker[EXEC_MARKER_SIZE];
	exec_marker_new(marker);
	char exec_id[128];
	rc = create_exec(b, req, user, marker, exec_id, sizeof(exec_id), res);
	if (rc < 0)
		return rc;
	struct pump *p = calloc(1, sizeof(*p));
	char *buf = malloc(EXEC_IO_CHUNK > HEADER_MAX ? EXEC_IO_CHUNK : HEADER_MAX);
	if (!p || !buf) {
		free(p);
		free(buf);
		return -ENOMEM;
	}
	dk_demux_init(&p->dm);
	p->o.req = req;
	p->o.holding = true;
	p->raw = req->tty != NULL;
	stdin_pump_init(&p->stdin, req->stdin_fd, req->stdin_fd >= 0);
	const struct stdin_sink to_stdin = {send_stdin, close_stdin, p};
	rc = start_stream(b, p, exec_id, buf, res);
	if (rc < 0)
		goto out;
	if (req->tty)
		resize_exec(b, exec_id, req->tty->rows, req->tty->cols);

	double deadline = req->timeout_s > 0 ? call_deadline_now() + req->timeout_s : 0;
	double grace_end = 0;   /* set once we killed the command */
	bool killed = false, gone = false;
	while (!p->eof) {
		if (!killed && p->o.cb_rc) {
			kill_exec(b, marker); /* nobody wants the output */
			killed = true;
			grace_end = call_deadline_now() + KILL_GRACE_S;
		}
		struct pollfd f[7];
		int nf = 0, i_sock, i_src = -1, i_cancel = -1, i_sig = -1, i_size = -1, i_dead;
		i_sock = nf;
		f[nf++] = (struct pollfd){p->c.sock,
			POLLIN | (stdin_pump_wants_dst(&p->stdin) ? POLLOUT : 0), 0};
		if (!killed && stdin_pump_wants_src(&p->stdin)) {
			i_src = nf;
			f[nf++] = (struct pollfd){p->stdin.src, POLLIN, 0};
		}
		if (!killed && req->cancel_fd >= 0) {
			i_cancel = nf;
			f[nf++] = (struct pollfd){req->cancel_fd, POLLIN, 0};
		}
		if (!killed && exec_signal_fd(req) >= 0) {
			i_sig = nf;
			f[nf++] = (struct pollfd){exec_signal_fd(req), POLLIN, 0};
		}
		if (!killed && req->tty) {
			i_size = nf;
			f[nf++] = (struct pollfd){req->tty->resize_fd, POLLIN, 0};
		}
		i_dead = nf;
		f[nf++] = (struct pollfd){d->dead_pipe[0], POLLIN, 0};
		int wait_ms = -1;
		if (killed)
			wait_ms = ms_until(grace_end);
		else if (deadline > 0)
			wait_ms = ms_until(deadline);
		int n = poll(f, (nfds_t)nf, wait_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (f[i_dead].revents) {
			gone = true;
			break;
		}
		if (killed && call_deadline_now() >= grace_end)
			break; /* something survived holding the stream open */
		if (!killed && deadline > 0 && call_deadline_now() >= deadline) {
			res->timed_out = true;
			if (!may_kill)
				break;
			kill_exec(b, marker);
			killed = true;
			grace_end = call_deadline_now() + KILL_GRACE_S;
			continue;
		}
		if (i_cancel >= 0 && f[i_cancel].revents) {
			res->cancelled = true;
			kill_exec(b, marker);
			killed = true;
			grace_end = call_deadline_now() + KILL_GRACE_S;
			continue;
		}
		unsigned short rows, cols;
		if (i_size >= 0 && f[i_size].revents && exec_tty_resize(req->tty, &rows, &cols))
			resize_exec(b, exec_id, rows, cols);
		if (i_sig >= 0 && f[i_sig].revents) {
			int sig = exec_forwarded_signal(exec_signal_fd(req));
			if (sig)
				signal_exec(b, marker, sig);
		}
		if (f[i_sock].revents & (POLLIN | POLLHUP | POLLERR))
			pump_output(p, buf);
		if (!killed)
			stdin_pump_step(&p->stdin, i_src >= 0 && f[i_src].revents,
					(f[i_sock].revents & POLLOUT) != 0, &to_stdin);
	}
	if (rc < 0)
		goto out;
	if (gone || sb_backend_is_dead(b)) {
		res->sandbox_terminated = true;
		rc = -EIO;
		goto out;
	}
	if (p->o.cb_rc) {
		rc = p->o.cb_rc;
		goto out;
	}
	if (res->timed_out || res->cancelled) {
		if (p->o.holding)
			release_hold(&p->o, DK_STREAM_STDOUT);
		goto out;
	}
	if (p->proto_err || dk_demux_finish(&p->dm) < 0)
		sb_warn("docker: the output stream of a command in %s was corrupt or cut short",
			b->id);
	/* The stream ends when the command's output closes; the engine may
	 * record the exit a moment later. */
	int code = -1;
	for (int i = 0; i < 200; i++) {
		rc = inspect_exec(d, exec_id, &code);
		if (rc != -EAGAIN)
			break;
		usleep(i < 20 ? 5000 : 25000);
	}
	if (rc < 0 || code >= 128) {
		/* 137 and friends: the command, or the whole container, was
		 * killed. Only the container's state tells which, and the
		 * engine records a killed container a moment after its
		 * processes die: give the watcher that moment first. */
		struct pollfd pf = {.fd = d->dead_pipe[0], .events = POLLIN};
		if (rc == 0)
			poll(&pf, 1, 400);
		if (sb_backend_is_dead(b)) {
			res->sandbox_terminated = true;
			rc = -EIO;
			goto out;
		}
		char why[300];
		int running = dk_container_running(d, why, sizeof(why));
		if (running == 0) {
			res->sandbox_terminated = true;
			rc = dk_fail(b, "container %s %s", b->id, why);
			goto out;
		}
		if (rc < 0) {
			dk_error(b,
				 "the engine lost the exit status of the command (%s)",
				 strerror(-rc));
			rc = -EIO;
			goto out;
		}
	}
	rc = 0;
	res->exit_code = code;
	if (p->o.holding && p->o.hold_len) {
		/* the engine's own "cannot start" text: stderr, and 127 for a
		 * command that is not there, as a shell would say */
		bool is_oci = (code == 126 || code == 127) &&
			      p->o.hold_len >= sizeof(OCI_PREFIX) - 1;
		if (is_oci && (memmem(p->o.hold, p->o.hold_len, "not found", 9) ||
			       memmem(p->o.hold, p->o.hold_len, "no such file", 12)) &&
		    !memmem(p->o.hold, p->o.hold_len, "chdir", 5))
			res->exit_code = 127;
		release_hold(&p->o, is_oci ? DK_STREAM_STDERR : DK_STREAM_STDOUT);
		if (p->o.cb_rc)
			rc = p->o.cb_rc;
	}
out:
	if (p->c.h)
		curl_easy_cleanup(p->c.h);
	free(p);
	free(buf);
	return rc;
}

/* One of our scripts beside the user's command (kill, signal): as root,
 * so that it can read every environ and signal anything; also after the
 * call's deadline, which is often why it runs. */
static void run_helper(struct sb_backend *b, const char *const *argv, const char *what)
{
	struct sb_exec_req k = {
		.argv = argv, .cwd = "/", .stdin_fd = -1, .timeout_s = 15,
		.cancel_fd = -1,
	};
	struct sb_exec_result kr;
	double held = call_deadline_suspend();
	int rc = exec_run(b, &k, &kr, "0", false);
	call_deadline_restore(held);
	if (rc < 0 || kr.timed_out || kr.exit_code != 0)
		sb_warn("docker: %s a command in %s failed (%s)", what, b->id,
			rc < 0 ? strerror(-rc) : kr.timed_out ? "timed out" : "its script failed");
}

static void kill_exec(struct sb_backend *b, const char *marker)
{
	const char *argv[6];
	exec_marker_kill_argv(argv, marker);
	run_helper(b, argv, "killing");
}

static void signal_exec(struct sb_backend *b, const char *marker, int sig)
{
	const char *argv[7];
	exec_marker_signal_argv(argv, marker, sig);
	run_helper(b, argv, "signalling");
}

int dk_exec_as(struct sb_backend *b, const struct sb_exec_req *req,
	       struct sb_exec_result *res, const char *user)
{
	return exec_run(b, req, res, user, true);
}

int docker_exec(struct sb_backend *b, const struct sb_exec_req *req,
		struct sb_exec_result *res)
{
	return dk_exec_as(b, req, res, NULL);
}
