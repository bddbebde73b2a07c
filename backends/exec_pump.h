/* What the backends' exec loops share, whatever carries the command's
 * streams: the start of every exec, the check for argv a transport cannot
 * carry, and feeding the caller's stdin to the command as fast as its
 * transport takes it. */
#ifndef SBFS_EXEC_PUMP_H
#define SBFS_EXEC_PUMP_H

#include "backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define EXEC_IO_CHUNK 65536

/* The start of every exec: *bounded is req with its timeout shortened to
 * what is left of the call's deadline (a file call's deadline bounds the
 * commands it runs), res is cleared and says which timeout applies.
 * -EINVAL when there is no command to run. */
int exec_begin(const struct sb_exec_req *req, struct sb_exec_req *bounded,
	       struct sb_exec_result *res);

/* The fd to poll for req's signals, or -1 when it has none. */
int exec_signal_fd(const struct sb_exec_req *req);
/* The signal waiting on signal_fd (read, so the fd goes quiet), or 0 when
 * there is none or it is not one sbexec forwards (SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT). */
int exec_forwarded_signal(int signal_fd);

/* A new terminal size from tty->resize_fd: true with *rows and *cols set
 * when one was waiting (the last of those waiting wins). */
bool exec_tty_resize(const struct sb_exec_tty *tty, unsigned short *rows,
		     unsigned short *cols);

/* Reads what *fd (non-blocking: a pipe, or a pty's master) has into fn:
 * 0 = go on, 1 = its end (*fd closed and set to -1; for a pty master, EIO
 * once the command's side is closed), < 0 = fn's abort or a read error. */
int exec_pump_fd(int *fd, sb_output_fn fn, void *arg);

/* Whether s is valid UTF-8 (no overlong forms, no surrogates): what a
 * JSON or protobuf string can carry as is. An argv, cwd or env item that
 * is not travels encoded, and a guest shell decodes it. */
bool exec_utf8_valid(const char *s);
/* Whether the cwd or an argv item is not (the command must travel
 * encoded). */
bool exec_needs_escape(const char *const *argv, const char *cwd);
/* s as printf %b reads it: printable ASCII but backslash as is, the rest
 * \0ooo. malloc'd, or NULL. */
char *exec_octal_escape(const char *s);
/* The script of `sh -c SCRIPT sh CWD ARGV...`, each octal-escaped: it
 * decodes them (a sentinel keeps trailing newlines), changes to the cwd
 * and execs the argv. */
extern const char exec_decode_script[];

/* Where stdin goes. send: bytes taken (>= 0), -EAGAIN when the transport
 * would block, any other negative errno when the command stopped reading.
 * close: the command's stdin EOF. */
struct stdin_sink {
	ssize_t (*send)(void *arg, const char *buf, size_t len);
	void (*close)(void *arg);
	void *arg;
};

struct stdin_pump {
	int src;                   /* the caller's stdin_fd, -1 once at EOF */
	bool open;                 /* the command's stdin is not closed yet */
	char buf[EXEC_IO_CHUNK];   /* read from src, not yet sent */
	size_t off, len;
};

/* open: whether the command has a stdin to feed (and later close). */
void stdin_pump_init(struct stdin_pump *p, int src, bool open);
/* Whether to poll src for reading / the transport for writing. */
bool stdin_pump_wants_src(const struct stdin_pump *p);
bool stdin_pump_wants_dst(const struct stdin_pump *p);
/* One step after a poll: reads src if it is ready and the buffer empty,
 * sends what is buffered if the transport is ready, and closes the
 * command's stdin once src is done and everything was sent (or the
 * command stopped reading). Never blocks. */
void stdin_pump_step(struct stdin_pump *p, bool src_ready, bool dst_ready,
		     const struct stdin_sink *to);

#endif
