/* The exec side of the control server: maps the cwd, uploads pending
 * files, runs the command through the backend while a reader thread
 * forwards stdin and notices kills and disconnects, streams the output
 * back, then invalidates the caches. */
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
#include <unistd.h>

#include "util/log.h"
#include "server_internal.h"

/* workdir + the normalised mount-relative cwd, then -w on top. NULL with
 * a message if rel climbs out of the mount root. */
static char *map_cwd(const char *workdir, const char *rel, const char *w,
		     char *msg, size_t msglen)
{
	size_t cap = strlen(workdir) + (rel ? strlen(rel) : 0) +
		     (w ? strlen(w) : 0) + 4;
	char *out = malloc(cap);
	if (!out) {
		snprintf(msg, msglen, "out of memory");
		return NULL;
	}
	size_t base = (size_t)snprintf(out, cap, "%s", workdir);
	while (base > 1 && out[base - 1] == '/')
		out[--base] = '\0';
	size_t n = base;
	for (const char *p = rel ? rel : ""; *p;) {
		while (*p == '/')
			p++;
		size_t clen = strcspn(p, "/");
		if (clen == 0 || (clen == 1 && p[0] == '.')) {
			p += clen;
			continue;
		}
		if (clen == 2 && p[0] == '.' && p[1] == '.') {
			if (n == base) {
				snprintf(msg, msglen, "the directory is outside the mount root");
				free(out);
				return NULL;
			}
			while (n > base && out[n - 1] != '/')
				n--;
			n--; /* the slash itself */
			out[n] = '\0';
			p += clen;
			continue;
		}
		if (n > 1 || out[0] != '/')
			out[n++] = '/';
		memcpy(out + n, p, clen);
		n += clen;
		out[n] = '\0';
		p += clen;
	}
	if (w) {
		if (!*w) {
			snprintf(msg, msglen, "-w needs a directory");
			free(out);
			return NULL;
		}
		if (w[0] == '/') {
			snprintf(out, cap, "%s", w);
		} else {
			if (n > 1 || out[0] != '/')
				out[n++] = '/';
			snprintf(out + n, cap - n, "%s", w);
		}
	}
	return out;
}

struct exec_io {
	struct conn *c;
	int stdin_w;  /* -1 once closed or when stdin is not forwarded */
	int done[2];  /* written once the command has ended */
	int sig[2];   /* signals for the command: the backend reads sig[0] */
	int resize[2]; /* terminal sizes (sbexec -t): the backend reads resize[0] */
	atomic_bool client_gone;
};

static void close_stdin(struct exec_io *io)
{
	if (io->stdin_w >= 0) {
		close(io->stdin_w);
		io->stdin_w = -1;
	}
}

/* Writes stdin bytes without ever blocking blind: while the command is not
 * reading, a half-close from the client (its Ctrl-C) or the command's end
 * must still be noticed. 0 = written or dropped, 1 = the command ended,
 * -1 = the client is gone. */
static int feed_stdin(struct exec_io *io, const char *p, size_t len)
{
	while (len > 0 && io->stdin_w >= 0) {
		ssize_t n = write(io->stdin_w, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			/* The command closed its stdin: the rest is dropped,
			 * as a local pipe would. */
			close_stdin(io);
			return 0;
		}
		struct pollfd pf[3] = {{.fd = io->stdin_w, .events = POLLOUT},
				       {.fd = io->c->fd, .events = POLLRDHUP},
				       {.fd = io->done[0], .events = POLLIN}};
		if (poll(pf, 3, -1) < 0 && errno != EINTR)
			return -1;
		if (pf[2].revents)
			return 1;
		if (pf[1].revents)
			return -1;
	}
	return 0;
}

static void *exec_reader(void *arg)
{
	struct exec_io *io = arg;
	struct conn *c = io->c;
	/* Writing to a stdin pipe the command closed must be EPIPE here, not
	 * a SIGPIPE for the daemon. This thread never forks, so the mask
	 * cannot leak into a command. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	for (;;) {
		struct pollfd pf[2] = {{.fd = c->fd, .events = POLLIN},
				       {.fd = io->done[0], .events = POLLIN}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents)
			break;
		struct frame f;
		int rc = frame_read(c->fd, &f);
		if (rc <= 0) {
			atomic_store(&io->client_gone, true);
			control_cancel_conn(c);
			break;
		}
		int fed = 0;
		switch (f.type) {
		case FRAME_STDIN:
			fed = feed_stdin(io, f.data, f.len);
			break;
		case FRAME_STDIN_EOF:
			close_stdin(io);
			break;
		case FRAME_KILL:
			control_cancel_conn(c);
			break;
		case FRAME_RESIZE:
			if (f.len == 4 && io->resize[1] >= 0) {
				const unsigned char *d = (const unsigned char *)f.data;
				unsigned short size[2] = {(unsigned short)(d[0] << 8 | d[1]),
							  (unsigned short)(d[2] << 8 | d[3])};
				if (write(io->resize[1], size, sizeof size) < 0)
					sb_debug("control: resize pipe: %s", strerror(errno));
			}
			break;
		case FRAME_SIGNAL:
			/* A backend that cannot deliver it kills instead, as a
			 * Ctrl-C did before signals were forwarded. */
			if (f.len != 1 || !c->s->b->ops->exec_signals ||
			    write(io->sig[1], f.data, 1) != 1)
				control_cancel_conn(c);
			break;
		default:
			sb_warn("control: unexpected frame 0x%02x during a command; killing it",
				f.type);
			control_cancel_conn(c);
			fed = -1;
		}
		frame_free(&f);
		if (fed < 0) {
			/* A half-closed client still reads our output. */
			control_cancel_conn(c);
			break;
		}
		if (fed > 0)
			break;
	}
	close_stdin(io);
	return NULL;
}

static int send_output(struct exec_io *io, uint8_t type, const char *data,
		       size_t len)
{
	if (len == 0)
		return 0;
	int rc = frame_write_chunked(&io->c->w, type, data, len);
	if (rc < 0) {
		/* Nobody is listening any more: have the command killed. */
		atomic_store(&io->client_gone, true);
		return rc;
	}
	return 0;
}

static int on_stdout(void *arg, const char *data, size_t len)
{
	return send_output(arg, FRAME_STDOUT, data, len);
}

static int on_stderr(void *arg, const char *data, size_t len)
{
	return send_output(arg, FRAME_STDERR, data, len);
}

static void send_exit(struct conn *c, const struct sb_exec_result *res,
		      const char *error)
{
	json_t *o = json_pack("{s:i,s:i,s:b,s:b,s:b,s:f}", "exit_code", res->exit_code,
			      "signal", res->term_signal, "timed_out", res->timed_out,
			      "cancelled", res->cancelled, "sandbox_terminated",
			      res->sandbox_terminated, "timeout_applied",
			      res->timeout_applied_s);
	if (!o)
		return;
	if (error)
		json_object_set_new(o, "error", json_string(error));
	if (frame_write_json(&c->w, FRAME_EXIT, o) < 0)
		sb_debug("control: a client left before its exit status");
	json_decref(o);
}

void control_do_exec(struct conn *c, const struct request *rq)
{
	struct control_server *s = c->s;
	struct sb_backend *b = s->b;
	char msg[SB_REASON_MAX], err[SB_REASON_MAX + 96];

	if (rq->argc == 0) {
		control_reply_error(c, FRAME_EXIT, "no command given");
		return;
	}
	char *cwd = map_cwd(b->spec.workdir ? b->spec.workdir : SB_DEFAULT_WORKDIR,
			    rq->cwd, rq->workdir, msg, sizeof msg);
	if (!cwd) {
		control_reply_error(c, FRAME_EXIT, msg);
		return;
	}
	if (rq->tty && !b->ops->exec_tty) {
		snprintf(err, sizeof err,
			 "the %s backend cannot give a command a terminal; run sbexec without -t",
			 b->ops->name);
		control_reply_error(c, FRAME_EXIT, err);
		free(cwd);
		return;
	}
	if (sb_backend_is_dead(b)) {
		snprintf(err, sizeof err, "sandbox is unusable: %s", b->dead_reason);
		control_reply_error(c, FRAME_EXIT, err);
		free(cwd);
		return;
	}
	if (control_flush_all(s, msg, sizeof msg) < 0) {
		snprintf(err, sizeof err,
			 "could not upload pending files before the command: %s", msg);
		control_invalidate(s, "");
		control_reply_error(c, FRAME_EXIT, err);
		free(cwd);
		return;
	}

	struct exec_io io = {.c = c, .stdin_w = -1, .done = {-1, -1}, .sig = {-1, -1},
			     .resize = {-1, -1}};
	int stdin_pipe[2] = {-1, -1};
	pthread_t reader;
	int rc;
	/* CLOEXEC: a command that inherited our write end would never see
	 * stdin EOF. */
	if (pipe2(io.done, O_CLOEXEC) < 0 || pipe2(io.sig, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    (rq->tty && pipe2(io.resize, O_CLOEXEC | O_NONBLOCK) < 0) ||
	    (rq->want_stdin && pipe2(stdin_pipe, O_CLOEXEC) < 0)) {
		snprintf(err, sizeof err, "could not run the command: %s", strerror(errno));
		goto setup_failed;
	}
	if (rq->want_stdin) {
		io.stdin_w = stdin_pipe[1];
		stdin_pipe[1] = -1;
		fcntl(io.stdin_w, F_SETFL, O_NONBLOCK);
	}
	if ((rc = pthread_create(&reader, NULL, exec_reader, &io)) != 0) {
		snprintf(err, sizeof err, "could not run the command: %s", strerror(rc));
		goto setup_failed;
	}

	struct sb_exec_req req = {
		.argv = (const char *const *)rq->argv,
		.cwd = cwd,
		.env = (const char *const *)rq->env,
		.stdin_fd = stdin_pipe[0],
		.timeout_s = rq->timeout,
		.on_stdout = on_stdout,
		.on_stderr = on_stderr,
		.cb_arg = &io,
		.cancel_fd = c->cancel[0],
		.signal_fd = &io.sig[0],
	};
	struct sb_exec_tty tty = {rq->tty_rows, rq->tty_cols, io.resize[0]};
	if (rq->tty)
		req.tty = &tty;
	struct sb_exec_result res = {0};
	pthread_mutex_lock(&s->mu);
	bool stopping = s->stopping;
	pthread_mutex_unlock(&s->mu);
	rc = stopping ? -ECANCELED : sb_exec(b, &req, &res);

	char x = 'd';
	if (write(io.done[1], &x, 1) < 0)
		sb_debug("control: done pipe: %s", strerror(errno));
	control_command_ended(s);
	if (rc < 0 && atomic_load(&io.client_gone)) {
		/* aborted because nobody is listening: nobody to tell */
	} else if (rc < 0 && sb_backend_is_dead(b)) {
		snprintf(err, sizeof err, "sandbox is unusable: %s", b->dead_reason);
		control_reply_error(c, FRAME_EXIT, err);
	} else if (rc < 0) {
		snprintf(err, sizeof err, "could not run the command: %s",
			 rc == -ECANCELED ? "the sbfs daemon is shutting down"
			 : b->error[0]    ? b->error
					  : strerror(-rc));
		control_reply_error(c, FRAME_EXIT, err);
	} else if (res.sandbox_terminated) {
		snprintf(err, sizeof err, "the sandbox terminated during the command%s%s",
			 b->dead_reason[0] ? ": " : "", b->dead_reason);
		send_exit(c, &res, err);
	} else {
		send_exit(c, &res, NULL);
	}
	/* done wakes the reader's polls; this wakes a read blocked in the
	 * middle of a frame. */
	shutdown(c->fd, SHUT_RD);
	pthread_join(reader, NULL);
	goto cleanup;

setup_failed:
	control_invalidate(s, "");
	control_reply_error(c, FRAME_EXIT, err);
cleanup:
	close_stdin(&io);
	for (int i = 0; i < 2; i++) {
		if (io.done[i] >= 0)
			close(io.done[i]);
		if (io.sig[i] >= 0)
			close(io.sig[i]);
		if (io.resize[i] >= 0)
			close(io.resize[i]);
		if (stdin_pipe[i] >= 0)
			close(stdin_pipe[i]);
	}
	free(cwd);
}

/* ---- connections ---- */

