/* The control protocol's wire codec.
 *
 * A frame is a 4-byte big-endian length N, then one type byte, then N-1
 * payload bytes. N covers the type byte, so N >= 1; a payload is at most
 * FRAME_MAX_PAYLOAD bytes and anything larger is a protocol error (the
 * reader refuses it before allocating anything).
 *
 * One request per connection. The client sends a header, argument frames,
 * then G; the server answers with J (status/sync/refresh) or streams O/R
 * and ends with X (exec).
 *
 * client -> server
 *   H  header JSON: {"op":"exec"|"status"|"sync"|"refresh",
 *                    "timeout":seconds (number, 0 = none), "stdin":bool}
 *   A  one argv element, raw bytes (argv may be non-UTF-8, so never JSON)
 *   V  one environment entry "K=V", raw bytes
 *   C  exec: the cwd relative to the mount root (empty = root);
 *      refresh: the mount-relative path to invalidate (empty = everything)
 *   W  exec -w: the guest directory (absolute, or relative to the mapped cwd)
 *   G  go: the request is complete
 *   I  (during exec) stdin bytes
 *   E  (during exec) stdin EOF
 *   K  (during exec) kill the remote command (Ctrl-C). Closing or
 *      half-closing the connection during an exec also kills it.
 *
 * server -> client
 *   O  stdout bytes
 *   R  stderr bytes
 *   X  exit JSON: {"exit_code":n, "signal":n, "timed_out":b,
 *                  "cancelled":b, "sandbox_terminated":b,
 *                  "error":"one line" (only when the command could not run
 *                  or the sandbox failed)}
 *   J  the JSON reply to status/sync/refresh, or {"error":"..."} when any
 *      request (exec included) was refused before it started
 */
#ifndef SBFS_CONTROL_FRAME_H
#define SBFS_CONTROL_FRAME_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FRAME_MAX_PAYLOAD (1u << 20)
/* Chunk size for streamed stdin/stdout/stderr, well under the maximum so
 * a kill frame never waits behind a megabyte of output. */
#define FRAME_CHUNK (64u * 1024)

enum frame_type {
	FRAME_HEADER = 'H',
	FRAME_ARG = 'A',
	FRAME_ENV = 'V',
	FRAME_CWD = 'C',
	FRAME_WORKDIR = 'W',
	FRAME_GO = 'G',
	FRAME_STDIN = 'I',
	FRAME_STDIN_EOF = 'E',
	FRAME_KILL = 'K',
	FRAME_SIGNAL = 'S', /* one byte: a signal for the command (sbexec's Ctrl-C) */
	FRAME_RESIZE = 'Z', /* rows, cols: uint16 each, big-endian (sbexec -t) */
	FRAME_STDOUT = 'O',
	FRAME_STDERR = 'R',
	FRAME_EXIT = 'X',
	FRAME_JSON = 'J',
};

struct frame {
	uint8_t type;
	size_t len;
	char *data; /* len bytes plus a NUL the sender did not send; NULL if len 0 */
};

/* Reads one frame. Returns 1 with *f filled (free with frame_free), 0 at a
 * clean end of stream before the first byte, -EPROTO for a truncated or
 * oversized frame, or another -errno. */
int frame_read(int fd, struct frame *f);
void frame_free(struct frame *f);

/* Serialises whole frames from several threads onto one fd. */
struct frame_writer {
	int fd;
	pthread_mutex_t mu;
};

void frame_writer_init(struct frame_writer *w, int fd);
void frame_writer_destroy(struct frame_writer *w);
/* Writes one frame, blocking until it is all out. 0 or -errno (-EPIPE when
 * the peer is gone; never raises SIGPIPE on a socket). Payloads larger
 * than FRAME_MAX_PAYLOAD give -EMSGSIZE. */
int frame_write(struct frame_writer *w, uint8_t type, const void *data,
		size_t len);
/* Splits data into FRAME_CHUNK-sized frames of one type. */
int frame_write_chunked(struct frame_writer *w, uint8_t type,
			const void *data, size_t len);
int frame_write_str(struct frame_writer *w, uint8_t type, const char *s);
/* Writes obj compactly; does not take the reference. */
int frame_write_json(struct frame_writer *w, uint8_t type, const json_t *obj);

/* Blocking full read/write that retry on EINTR and short transfers.
 * read_full returns the bytes read (short only at end of stream) or
 * -errno; write_full returns 0 or -errno. */
ssize_t read_full(int fd, void *buf, size_t len);
int write_full(int fd, const void *buf, size_t len);

#endif
