#include "exec_pump.h"
#include "util/call_deadline.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int exec_begin(const struct sb_exec_req *req, struct sb_exec_req *bounded,
	       struct sb_exec_result *res)
{
	*bounded = *req;
	bounded->timeout_s = call_deadline_clamp(req->timeout_s);
	memset(res, 0, sizeof(*res));
	res->timeout_applied_s = bounded->timeout_s > 0 ? bounded->timeout_s : 0;
	return req->argv && req->argv[0] ? 0 : -EINVAL;
}

void stdin_pump_init(struct stdin_pump *p, int src, bool open)
{
	p->src = src;
	p->open = open;
	p->off = p->len = 0;
}

bool stdin_pump_wants_src(const struct stdin_pump *p)
{
	return p->open && p->len == 0 && p->src >= 0;
}

bool stdin_pump_wants_dst(const struct stdin_pump *p)
{
	return p->open && p->len > 0;
}

void stdin_pump_step(struct stdin_pump *p, bool src_ready, bool dst_ready,
		     const struct stdin_sink *to)
{
	if (!p->open)
		return;
	if (p->len == 0 && src_ready && p->src >= 0) {
		ssize_t n = read(p->src, p->buf, sizeof(p->buf));
		if (n > 0) {
			p->off = 0;
			p->len = (size_t)n;
		} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			p->src = -1;
		}
	}
	if (p->len && dst_ready) {
		ssize_t n = to->send(to->arg, p->buf + p->off, p->len);
		if (n >= 0) {
			p->off += (size_t)n;
			p->len -= (size_t)n;
		} else if (n != -EAGAIN) {
			p->len = 0; /* the command stopped reading */
			p->src = -1;
		}
	}
	if (p->src < 0 && p->len == 0) {
		to->close(to->arg);
		p->open = false;
	}
}

int exec_pump_fd(int *fd, sb_output_fn fn, void *arg)
{
	char buf[EXEC_IO_CHUNK];
	for (;;) {
		ssize_t n = read(*fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EIO)
			return errno == EAGAIN ? 0 : -errno;
		if (n <= 0) {
			close(*fd);
			*fd = -1;
			return 1;
		}
		if (fn) {
			int rc = fn(arg, buf, (size_t)n);
			if (rc < 0)
				return rc;
		}
	}
}

int exec_signal_fd(const struct sb_exec_req *req)
{
	return req->signal_fd ? *req->signal_fd : -1;
}

int exec_forwarded_signal(int signal_fd)
{
	unsigned char sig;
	if (signal_fd < 0 || read(signal_fd, &sig, 1) != 1)
		return 0;
	switch (sig) {
	case SIGINT:
	case SIGTERM:
	case SIGHUP:
	case SIGQUIT:
		return sig;
	default:
		return 0;
	}
}

bool exec_tty_resize(const struct sb_exec_tty *tty, unsigned short *rows,
		     unsigned short *cols)
{
	unsigned short size[2];
	bool got = false;
	while (read(tty->resize_fd, size, sizeof size) == (ssize_t)sizeof size) {
		*rows = size[0];
		*cols = size[1];
		got = true;
	}
	return got;
}

bool exec_needs_escape(const char *const *argv, const char *cwd)
{
	if (!exec_utf8_valid(cwd))
		return true;
	for (size_t i = 0; argv[i]; i++)
		if (!exec_utf8_valid(argv[i]))
			return true;
	return false;
}

char *exec_octal_escape(const char *s)
{
	char *out = malloc(strlen(s) * 5 + 1), *w = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p >= 0x20 && *p < 0x7f && *p != '\\')
			*w++ = (char)*p;
		else
			w += sprintf(w, "\\0%03o", *p);
	}
	*w = '\0';
	return out;
}

const char exec_decode_script[] =
	"d=$(printf '%bx' \"$1\"); shift; cd -- \"${d%x}\" || exit 125\n"
	"n=$#; i=0\n"
	"while [ \"$i\" -lt \"$n\" ]; do a=$(printf '%bx' \"$1\"); shift; "
	"set -- \"$@\" \"${a%x}\"; i=$((i + 1)); done\n"
	"exec \"$@\"";

bool exec_utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2
			: (*p & 0xf8) == 0xf0 ? 3 : -1;
		if (n < 0 || (n == 1 && *p < 0xc2))
			return false;
		unsigned cp = n == 0 ? *p : n == 1 ? *p & 0x1fu : n == 2 ? *p & 0x0fu : *p & 0x07u;
		for (int i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i] & 0x3fu);
		}
		if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		p += n + 1;
	}
	return true;
}
