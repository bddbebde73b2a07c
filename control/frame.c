#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

ssize_t read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Writes the iovecs completely. Sockets go through sendmsg with
 * MSG_NOSIGNAL so a vanished peer is -EPIPE, not a process-killing
 * SIGPIPE; anything else (pipes, files, ttys) through writev. */
static int writev_full(int fd, struct iovec *iov, int iovcnt)
{
	bool use_send = true;
	while (iovcnt > 0) {
		ssize_t n;
		if (use_send) {
			struct msghdr msg = {.msg_iov = iov,
					     .msg_iovlen = (size_t)iovcnt};
			n = sendmsg(fd, &msg, MSG_NOSIGNAL);
			if (n < 0 && errno == ENOTSOCK) {
				use_send = false;
				continue;
			}
		} else {
			n = writev(fd, iov, iovcnt);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		size_t done = (size_t)n;
		while (iovcnt > 0 && done >= iov->iov_len) {
			done -= iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + done;
			iov->iov_len -= done;
		}
	}
	return 0;
}

int write_full(int fd, const void *buf, size_t len)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	return len ? writev_full(fd, &iov, 1) : 0;
}

int frame_read(int fd, struct frame *f)
{
	memset(f, 0, sizeof *f);
	unsigned char hdr[5];
	ssize_t n = read_full(fd, hdr, sizeof hdr);
	if (n < 0)
		return (int)n;
	if (n == 0)
		return 0;
	if ((size_t)n < sizeof hdr)
		return -EPROTO;
	uint32_t total = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
			 (uint32_t)hdr[2] << 8 | (uint32_t)hdr[3];
	/* Checked before allocating: a hostile length must not make us
	 * reserve gigabytes. */
	if (total < 1 || total - 1 > FRAME_MAX_PAYLOAD)
		return -EPROTO;
	f->type = hdr[4];
	f->len = total - 1;
	if (f->len == 0)
		return 1;
	f->data = malloc(f->len + 1);
	if (!f->data)
		return -ENOMEM;
	n = read_full(fd, f->data, f->len);
	if (n < 0 || (size_t)n < f->len) {
		frame_free(f);
		return n < 0 ? (int)n : -EPROTO;
	}
	f->data[f->len] = '\0';
	return 1;
}

void frame_free(struct frame *f)
{
	free(f->data);
	f->data = NULL;
	f->len = 0;
}

void frame_writer_init(struct frame_writer *w, int fd)
{
	w->fd = fd;
	pthread_mutex_init(&w->mu, NULL);
}

void frame_writer_destroy(struct frame_writer *w)
{
	pthread_mutex_destroy(&w->mu);
}

int frame_write(struct frame_writer *w, uint8_t type, const void *data,
		size_t len)
{
	if (len > FRAME_MAX_PAYLOAD)
		return -EMSGSIZE;
	uint32_t total = (uint32_t)len + 1;
	unsigned char hdr[5] = {(unsigned char)(total >> 24),
				(unsigned char)(total >> 16),
				(unsigned char)(total >> 8), (unsigned char)total,
				type};
	struct iovec iov[2] = {{.iov_base = hdr, .iov_len = sizeof hdr},
			       {.iov_base = (void *)data, .iov_len = len}};
	pthread_mutex_lock(&w->mu);
	int rc = writev_full(w->fd, iov, len ? 2 : 1);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

int frame_write_chunked(struct frame_writer *w, uint8_t type,
			const void *data, size_t len)
{
	const char *p = data;
	do {
		size_t n = len < FRAME_CHUNK ? len : FRAME_CHUNK;
		int rc = frame_write(w, type, p, n);
		if (rc < 0)
			return rc;
		p += n;
		len -= n;
	} while (len > 0);
	return 0;
}

int frame_write_str(struct frame_writer *w, uint8_t type, const char *s)
{
	return frame_write(w, type, s, s ? strlen(s) : 0);
}

int frame_write_json(struct frame_writer *w, uint8_t type, const json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT);
	if (!s)
		return -ENOMEM;
	int rc = frame_write_str(w, type, s);
	free(s);
	return rc;
}
