/* The control server: one thread accepts, one thread per connection serves
 * exactly one request (status, sync and refresh here; exec in
 * exec_session.c). */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/log.h"
#include "frame.h"

#include "server_internal.h"

/* ---- socket folder ---- */

static int ensure_private_dir(const char *dir)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int e = errno;
		sb_err("cannot create the control socket folder %s: %s", dir,
		       strerror(e));
		return -e;
	}
	struct stat st;
	if (lstat(dir, &st) < 0) {
		int e = errno;
		sb_err("cannot inspect the control socket folder %s: %s", dir,
		       strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		sb_err("refusing control socket folder %s: it is not a directory (remove it)",
		       dir);
		return -ENOTDIR;
	}
	/* Someone else's folder (e.g. pre-created in /tmp) could let them
	 * swap our socket for theirs and see every command we run. */
	if (st.st_uid != geteuid()) {
		sb_err("refusing control socket folder %s: it belongs to uid %u, not you (remove it or set XDG_RUNTIME_DIR)",
		       dir, (unsigned)st.st_uid);
		return -EPERM;
	}
	if (st.st_mode & 022) {
		sb_err("refusing control socket folder %s: others can write to it (chmod 700 it)",
		       dir);
		return -EPERM;
	}
	return 0;
}

int control_socket_path(const char *name, char *buf, size_t len)
{
	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	char dir[PATH_MAX];
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && xdg[0] == '/')
		snprintf(dir, sizeof dir, "%s/sbfs", xdg);
	else if (geteuid() == 0)
		snprintf(dir, sizeof dir, "/run/sbfs");
	else
		snprintf(dir, sizeof dir, "/tmp/sbfs-%u", (unsigned)geteuid());
	int rc = ensure_private_dir(dir);
	if (rc < 0)
		return rc;
	struct sockaddr_un sa;
	int n = snprintf(buf, len, "%s/%s.sock", dir, name);
	if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	return 0;
}

/* ---- request parsing ---- */

static void request_free(struct request *rq)
{
	for (size_t i = 0; i < rq->argc; i++)
		free(rq->argv[i]);
	free(rq->argv);
	for (size_t i = 0; i < rq->envc; i++)
		free(rq->env[i]);
	free(rq->env);
	free(rq->cwd);
	free(rq->workdir);
}

/* Doubles as it grows: a long command line is tens of thousands of
 * frames. */
static int push(char ***v, size_t *n, size_t *cap, char *s)
{
	if (*n + 2 > *cap) {
		size_t want = *cap ? *cap * 2 : 16;
		char **nv = realloc(*v, want * sizeof **v);
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = want;
	}
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
	return 0;
}

static int parse_header(struct request *rq, const struct frame *f, char *msg,
			size_t msglen)
{
	json_error_t jerr;
	json_t *h = json_loadb(f->data ? f->data : "", f->len, 0, &jerr);
	if (!json_is_object(h)) {
		snprintf(msg, msglen, "protocol error: the request header is not a JSON object");
		json_decref(h);
		return -1;
	}
	const char *op = json_string_value(json_object_get(h, "op"));
	json_t *t = json_object_get(h, "timeout");
	json_t *in = json_object_get(h, "stdin");
	json_t *tty = json_object_get(h, "tty");
	json_int_t rows = json_integer_value(json_object_get(tty, "rows"));
	json_int_t cols = json_integer_value(json_object_get(tty, "cols"));
	int rc = -1;
	if (!op || strlen(op) >= sizeof rq->op)
		snprintf(msg, msglen, "protocol error: the request has no valid \"op\"");
	else if (t && (!json_is_number(t) || !isfinite(json_number_value(t)) ||
		       json_number_value(t) < 0))
		snprintf(msg, msglen, "the timeout must be a number of seconds, 0 or more");
	else if (in && !json_is_boolean(in))
		snprintf(msg, msglen, "protocol error: \"stdin\" must be true or false");
	else if (tty && (!json_is_object(tty) || rows < 0 || rows > 65535 || cols < 0 ||
			 cols > 65535))
		snprintf(msg, msglen, "protocol error: \"tty\" must be {rows, cols}");
	else {
		rq->tty = tty != NULL;
		rq->tty_rows = (unsigned short)rows;
		rq->tty_cols = (unsigned short)cols;
		snprintf(rq->op, sizeof rq->op, "%s", op);
		rq->timeout = t ? json_number_value(t) : 0;
		rq->want_stdin = in ? json_is_true(in) : false;
		rc = 0;
	}
	json_decref(h);
	return rc;
}

/* Takes ownership of f->data on success. */
static int add_arg_frame(struct request *rq, const struct sb_backend *b,
			 struct frame *f, char *msg, size_t msglen)
{
	rq->bytes += f->len + 1;
	if (rq->bytes > MAX_REQUEST_BYTES) {
		snprintf(msg, msglen, "the command line and environment are larger than %u bytes",
			 MAX_REQUEST_BYTES);
		return -1;
	}
	if (f->type == FRAME_ARG || f->type == FRAME_ENV) {
		rq->arg_bytes += sb_exec_arg_cost(b, f->len);
		if (rq->arg_bytes > sb_exec_arg_room(b)) {
			sb_exec_arg_refusal(b, msg, msglen);
			return -1;
		}
	}
	/* Frames carry raw bytes; an embedded NUL would silently truncate. */
	if (f->len && memchr(f->data, '\0', f->len)) {
		snprintf(msg, msglen, "an argument, variable or path contains a NUL byte");
		return -1;
	}
	char *s = f->data ? f->data : strdup("");
	if (!s) {
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	f->data = NULL;
	int rc = 0;
	switch (f->type) {
	case FRAME_ARG:
		rc = push(&rq->argv, &rq->argc, &rq->arg_cap, s);
		break;
	case FRAME_ENV:
		if (!strchr(s, '=') || s[0] == '=') {
			snprintf(msg, msglen, "environment entries must look like K=V");
			rc = -1;
		} else {
			rc = push(&rq->env, &rq->envc, &rq->env_cap, s);
		}
		break;
	case FRAME_CWD:
	case FRAME_WORKDIR: {
		char **slot = f->type == FRAME_CWD ? &rq->cwd : &rq->workdir;
		if (*slot) {
			snprintf(msg, msglen, "protocol error: frame '%c' sent twice", f->type);
			rc = -1;
		} else {
			*slot = s;
			s = NULL;
		}
		break;
	}
	default:
		snprintf(msg, msglen, "protocol error: unexpected frame type 0x%02x before the request started",
			 f->type);
		rc = -1;
	}
	if (rc < 0) {
		if (rc == -ENOMEM)
			snprintf(msg, msglen, "out of memory");
		free(s);
		return -1;
	}
	return 0;
}

/* Reads H, the argument frames and G. 0, or -1 with a message; *gone
 * when the client vanished (nobody to answer). */
static int read_request(struct conn *c, struct request *rq, char *msg,
			size_t msglen, bool *gone)
{
	struct frame f;
	bool have_header = false;
	for (;;) {
		int rc = frame_read(c->fd, &f);
		if (rc <= 0) {
			bool stalled = rc == -EAGAIN || rc == -EWOULDBLOCK;
			*gone = !stalled && (rc == 0 || rc != -EPROTO);
			if (stalled)
				snprintf(msg, msglen, "protocol error: the request was still incomplete after %d s",
					 REQUEST_TIMEOUT_S);
			else
				snprintf(msg, msglen, "protocol error: %s",
					 rc == -EPROTO ? "malformed or oversized frame"
						       : "the request ended early");
			return -1;
		}
		if (!have_header) {
			if (f.type != FRAME_HEADER) {
				snprintf(msg, msglen, "protocol error: the request must start with a header frame");
				frame_free(&f);
				return -1;
			}
			rc = parse_header(rq, &f, msg, msglen);
			frame_free(&f);
			if (rc < 0)
				return -1;
			have_header = true;
			continue;
		}
		if (f.type == FRAME_GO) {
			frame_free(&f);
			return 0;
		}
		rc = add_arg_frame(rq, c->s->b, &f, msg, msglen);
		frame_free(&f);
		if (rc < 0)
			return -1;
	}
}

/* ---- replies ---- */

static void reply_json(struct conn *c, json_t *obj)
{
	if (frame_write_json(&c->w, FRAME_JSON, obj) < 0)
		sb_debug("control: a client left before its reply");
	json_decref(obj);
}

void control_reply_error(struct conn *c, char frame_type, const char *msg)
{
	json_t *o = frame_type == FRAME_EXIT
			    ? json_pack("{s:i,s:i,s:b,s:b,s:b,s:s}", "exit_code", 125,
					"signal", 0, "timed_out", 0, "cancelled", 0,
					"sandbox_terminated", 0, "error", msg)
			    : json_pack("{s:s}", "error", msg);
	if (!o)
		return;
	if (frame_write_json(&c->w, (uint8_t)frame_type, o) < 0)
		sb_debug("control: a client left before its error reply");
	json_decref(o);
}

void control_cancel_conn(struct conn *c)
{
	char x = 'k';
	/* Non-blocking and never read: once written, it stays readable. */
	if (write(c->cancel[1], &x, 1) < 0 && errno != EAGAIN)
		sb_debug("control: cancel pipe: %s", strerror(errno));
}

/* ---- status / sync / refresh ---- */

static void do_status(struct conn *c)
{
	struct control_server *s = c->s;
	struct sb_backend *b = s->b;
	bool dead = sb_backend_is_dead(b);
	json_t *o = json_object();
	json_object_set_new(o, "mount", json_string(s->mount ? s->mount : ""));
	json_object_set_new(o, "backend",
			    json_string(b->ops && b->ops->name ? b->ops->name : "?"));
	json_object_set_new(o, "sandbox", json_string(b->id));
	if (b->endpoint[0])
		json_object_set_new(o, "endpoint", json_string(b->endpoint));
	/* The mount's name: what its unsaved/ folder is called. */
	json_object_set_new(o, "name", json_string(b->spec.name));
	json_object_set_new(o, "workdir",
			    json_string(b->spec.workdir ? b->spec.workdir
							: SB_DEFAULT_WORKDIR));
	json_object_set_new(o, "state", json_string(dead ? "dead" : "running"));
	json_object_set_new(o, "started", json_integer((json_int_t)s->started));
	if (dead)
		json_object_set_new(o, "reason", json_string(b->dead_reason));
	json_t *calls = json_object(), *errors = json_object();
	for (int k = 0; k < SB_CALL_COUNT; k++) {
		const char *name = sb_call_name((enum sb_call)k);
		json_object_set_new(calls, name,
				    json_integer((json_int_t)atomic_load(&b->counters.calls[k])));
		json_object_set_new(errors, name,
				    json_integer((json_int_t)atomic_load(&b->counters.errors[k])));
	}
	json_object_set_new(o, "calls", calls);
	json_object_set_new(o, "errors", errors);
	json_object_set_new(o, "shell_fallbacks",
			    json_integer((json_int_t)atomic_load(&b->counters.shell_fallbacks)));
	json_object_set_new(o, "bytes_up",
			    json_integer((json_int_t)atomic_load(&b->counters.bytes_up)));
	json_object_set_new(o, "bytes_down",
			    json_integer((json_int_t)atomic_load(&b->counters.bytes_down)));
	if (s->hooks.status)
		s->hooks.status(s->hooks.arg, o);
	reply_json(c, o);
}

int control_flush_all(struct control_server *s, char *msg, size_t msglen)
{
	msg[0] = '\0';
	if (!s->hooks.flush_all)
		return 0;
	int rc = s->hooks.flush_all(s->hooks.arg, msg, msglen);
	if (rc < 0 && !msg[0])
		snprintf(msg, msglen, "%s", strerror(-rc));
	return rc;
}

void control_invalidate(struct control_server *s, const char *relpath)
{
	if (s->hooks.invalidate)
		s->hooks.invalidate(s->hooks.arg, relpath);
}

void control_command_ended(struct control_server *s)
{
	if (s->hooks.command_ended)
		s->hooks.command_ended(s->hooks.arg);
	else
		control_invalidate(s, "");
}

static void do_sync(struct conn *c)
{
	char msg[SB_REASON_MAX];
	if (control_flush_all(c->s, msg, sizeof msg) < 0) {
		char full[SB_REASON_MAX + 64];
		snprintf(full, sizeof full, "could not upload pending files: %s", msg);
		control_reply_error(c, FRAME_JSON, full);
		return;
	}
	reply_json(c, json_pack("{s:b}", "ok", 1));
}

/* `sbfs umount`: the client unmounts next, then waits on this connection
 * for the teardown report (control_server_take_unmount_fd). A later
 * umount replaces an earlier one, whose client then reads end of stream. */
static void do_unmount(struct conn *c)
{
	/* The connection's own descriptor is handed off, not a dup: with
	 * every descriptor taken (EMFILE) the report must not be lost. The
	 * reply goes under the lock: once the client has it, the teardown
	 * finds the descriptor (it looked too early 1 run in 3 of
	 * test_frame), and cannot write the report into the reply. The
	 * reply is a few bytes into an empty socket: it does not block. */
	pthread_mutex_lock(&c->s->mu);
	reply_json(c, json_pack("{s:b,s:i}", "ok", 1, "pid", (int)getpid()));
	c->handed_off = true;
	if (c->s->unmount_fd >= 0)
		close(c->s->unmount_fd);
	c->s->unmount_fd = c->fd;
	pthread_mutex_unlock(&c->s->mu);
}

int control_server_take_unmount_fd(struct control_server *s)
{
	if (!s)
		return -1;
	pthread_mutex_lock(&s->mu);
	int fd = s->unmount_fd;
	s->unmount_fd = -1;
	pthread_mutex_unlock(&s->mu);
	return fd;
}

static void do_refresh(struct conn *c, const struct request *rq)
{
	control_invalidate(c->s, rq->cwd ? rq->cwd : "");
	reply_json(c, json_pack("{s:b}", "ok", 1));
}

/* Receive timeout on the connection; 0 = none. */
static void set_recv_timeout(int fd, int seconds)
{
	struct timeval tv = {.tv_sec = seconds};
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
		sb_debug("control: SO_RCVTIMEO: %s", strerror(errno));
}

static void serve(struct conn *c)
{
	struct request rq = {0};
	char msg[SB_REASON_MAX];
	bool gone = false;
	/* A client sends its whole request at once; one that stops halfway
	 * is dropped instead of holding a thread forever. Once the request
	 * is in, an exec's stdin may stay quiet as long as it likes. */
	set_recv_timeout(c->fd, REQUEST_TIMEOUT_S);
	int rrc = read_request(c, &rq, msg, sizeof msg, &gone);
	set_recv_timeout(c->fd, 0);
	if (rrc < 0) {
		if (!gone) {
			sb_warn("control: %s", msg);
			control_reply_error(c, FRAME_JSON, msg);
		}
		request_free(&rq);
		return;
	}
	if (!strcmp(rq.op, "exec"))
		control_do_exec(c, &rq);
	else if (!strcmp(rq.op, "status"))
		do_status(c);
	else if (!strcmp(rq.op, "sync"))
		do_sync(c);
	else if (!strcmp(rq.op, "refresh"))
		do_refresh(c, &rq);
	else if (!strcmp(rq.op, "unmount"))
		do_unmount(c);
	else {
		snprintf(msg, sizeof msg,
			 "unknown request \"%s\" (is sbexec newer than the sbfs daemon?)",
			 rq.op);
		control_reply_error(c, FRAME_JSON, msg);
	}
	request_free(&rq);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	serve(c);
	/* The fd itself is closed by whoever joins us, so a concurrent stop
	 * never shuts down a recycled descriptor. */
	pthread_mutex_lock(&c->s->mu);
	if (!c->handed_off)
		shutdown(c->fd, SHUT_RDWR);
	c->finished = true;
	pthread_mutex_unlock(&c->s->mu);
	return NULL;
}

static void conn_free(struct conn *c)
{
	if (!c->handed_off) /* else the unmount report's, closed by its writer */
		close(c->fd);
	close(c->cancel[0]);
	close(c->cancel[1]);
	frame_writer_destroy(&c->w);
	free(c);
}

/* Joins connections that have ended. */
static void reap(struct control_server *s)
{
	struct conn *done = NULL;
	pthread_mutex_lock(&s->mu);
	for (struct conn **pp = &s->conns; *pp;) {
		struct conn *c = *pp;
		if (c->finished) {
			*pp = c->next;
			c->next = done;
			done = c;
		} else {
			pp = &c->next;
		}
	}
	pthread_mutex_unlock(&s->mu);
	while (done) {
		struct conn *next = done->next;
		pthread_join(done->thread, NULL);
		conn_free(done);
		done = next;
	}
}

static bool peer_allowed(int fd, uid_t *uid)
{
	struct ucred cred;
	socklen_t len = sizeof cred;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return false;
	*uid = cred.uid;
	return cred.uid == geteuid() || cred.uid == 0;
}

static void accept_one(struct control_server *s, int fd)
{
	uid_t uid = (uid_t)-1;
	if (!peer_allowed(fd, &uid)) {
		sb_warn("control: refused a connection from uid %d", (int)uid);
		struct frame_writer w;
		frame_writer_init(&w, fd);
		char msg[128];
		snprintf(msg, sizeof msg,
			 "permission denied: this sbfs daemon belongs to uid %u",
			 (unsigned)geteuid());
		json_t *o = json_pack("{s:s}", "error", msg);
		if (o)
			(void)frame_write_json(&w, FRAME_JSON, o); /* fd is non-blocking */
		json_decref(o);
		frame_writer_destroy(&w);
		close(fd);
		return;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	struct conn *c = calloc(1, sizeof *c);
	if (!c || pipe2(c->cancel, O_CLOEXEC | O_NONBLOCK) < 0) {
		sb_err("control: cannot serve a connection: %s", strerror(errno));
		free(c);
		close(fd);
		return;
	}
	c->s = s;
	c->fd = fd;
	frame_writer_init(&c->w, fd);
	pthread_mutex_lock(&s->mu);
	int rc = pthread_create(&c->thread, NULL, conn_main, c);
	if (rc == 0) {
		c->next = s->conns;
		s->conns = c;
	}
	pthread_mutex_unlock(&s->mu);
	if (rc != 0) {
		sb_err("control: cannot start a connection thread: %s", strerror(rc));
		conn_free(c);
	}
}

static void take_spares(struct control_server *s)
{
	for (int i = 0; i < CONTROL_SPARE_FDS; i++)
		if (s->spare[i] < 0)
			s->spare[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static bool release_spares(struct control_server *s)
{
	bool released = false;
	for (int i = 0; i < CONTROL_SPARE_FDS; i++)
		if (s->spare[i] >= 0) {
			close(s->spare[i]);
			s->spare[i] = -1;
			released = true;
		}
	return released;
}

static void *accept_main(void *arg)
{
	struct control_server *s = arg;
	for (;;) {
		take_spares(s);
		struct pollfd pf[2] = {{.fd = s->lfd, .events = POLLIN},
				       {.fd = s->wake[0], .events = POLLIN}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			sb_err("control: poll: %s", strerror(errno));
			break;
		}
		if (pf[1].revents)
			break;
		reap(s);
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE) &&
		    release_spares(s))
			fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM ||
			    errno == ENOBUFS) {
				/* Out of descriptors: back off instead of spinning
				 * on a listening socket that stays readable. */
				sb_warn("control: cannot accept a connection: %s", strerror(errno));
				poll(&pf[1], 1, 200);
			}
			continue;
		}
		accept_one(s, fd);
	}
	return NULL;
}

/* ---- start / stop ---- */

/* A leftover socket from a daemon that died is removed; a live one means
 * another daemon serves this name. */
static int clear_stale_socket(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket; remove it and retry", path);
		return -EEXIST;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	close(fd);
	if (rc == 0) {
		snprintf(err, errlen, "another sbfs daemon is already listening on %s", path);
		return -EADDRINUSE;
	}
	unlink(path);
	return 0;
}

struct control_server *control_server_start(const char *socket_path,
					    const char *mount,
					    struct sb_backend *b,
					    const struct control_hooks *hooks,
					    char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(socket_path) >= sizeof sa.sun_path) {
		snprintf(err, errlen, "the control socket path %s is too long (%zu bytes at most)",
			 socket_path, sizeof sa.sun_path - 1);
		return NULL;
	}
	memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
	err[0] = '\0';
	int rc = clear_stale_socket(socket_path, err, errlen);
	if (rc < 0) {
		if (!err[0])
			snprintf(err, errlen, "cannot use the control socket %s: %s",
				 socket_path, strerror(-rc));
		return NULL;
	}

	struct control_server *s = calloc(1, sizeof *s);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->lfd = -1;
	s->unmount_fd = -1;
	s->started = time(NULL);
	s->wake[0] = s->wake[1] = -1;
	for (int i = 0; i < CONTROL_SPARE_FDS; i++)
		s->spare[i] = -1;
	s->b = b;
	if (hooks)
		s->hooks = *hooks;
	pthread_mutex_init(&s->mu, NULL);
	s->path = strdup(socket_path);
	s->mount = strdup(mount ? mount : "");
	if (!s->path || !s->mount)
		goto fail_errno;
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) < 0)
		goto fail_errno;
	/* The folder is already 0700 and peers are uid-checked; this is the
	 * third lock on the door. */
	if (chmod(socket_path, 0600) < 0 || listen(s->lfd, 64) < 0 ||
	    pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0)
		goto fail_unlink;
	rc = pthread_create(&s->accept_thread, NULL, accept_main, s);
	if (rc != 0) {
		errno = rc;
		goto fail_unlink;
	}
	return s;

fail_unlink:
	rc = errno;
	unlink(socket_path);
	errno = rc;
fail_errno:
	snprintf(err, errlen, "cannot create the control socket %s: %s", socket_path,
		 strerror(errno));
	if (s->lfd >= 0)
		close(s->lfd);
	for (int i = 0; i < 2; i++)
		if (s->wake[i] >= 0)
			close(s->wake[i]);
	pthread_mutex_destroy(&s->mu);
	free(s->path);
	free(s->mount);
	free(s);
	return NULL;
}

void control_server_stop(struct control_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_mutex_unlock(&s->mu);
	/* close() on a listening socket does not wake a blocked accept on
	 * Linux; the accept thread polls this pipe too. */
	char x = 's';
	if (write(s->wake[1], &x, 1) < 0)
		sb_err("control: cannot wake the accept thread: %s", strerror(errno));
	pthread_join(s->accept_thread, NULL);

	pthread_mutex_lock(&s->mu);
	for (struct conn *c = s->conns; c; c = c->next) {
		control_cancel_conn(c);
		if (!c->handed_off)
			shutdown(c->fd, SHUT_RDWR);
	}
	struct conn *list = s->conns;
	s->conns = NULL;
	pthread_mutex_unlock(&s->mu);
	while (list) {
		struct conn *next = list->next;
		pthread_join(list->thread, NULL);
		conn_free(list);
		list = next;
	}
	unlink(s->path);
	if (s->unmount_fd >= 0)
		close(s->unmount_fd);
	close(s->lfd);
	close(s->wake[0]);
	close(s->wake[1]);
	release_spares(s);
	pthread_mutex_destroy(&s->mu);
	free(s->path);
	free(s->mount);
	free(s);
}
