#include "file_state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct file_state *file_state_new(const char *spool_dir, off_t size,
				  mode_t mode, bool remote_exists)
{
	struct file_state *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->fd = open(spool_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (f->fd < 0) {
		int e = errno;
		free(f);
		errno = e;
		return NULL;
	}
	pthread_mutex_init(&f->lock, NULL);
	f->size = size;
	f->mode = mode & 07777;
	f->remote_exists = remote_exists;
	f->window = FILE_WINDOW_MIN;
	f->seq_next = -1;
	f->identity_known = remote_exists;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	return f;
}

void file_state_free(struct file_state *f)
{
	if (!f)
		return;
	close(f->fd);
	range_set_free(&f->present);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static int pwrite_all(int fd, const char *buf, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, buf, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* Fetches the aligned window covering [start, end) from the sandbox and
 * stores the parts the spool does not have yet: bytes written locally are
 * newer than the sandbox's and must not be overwritten. */
static int fetch_window(struct file_state *f, struct sb_backend *b,
			const char *guest_path, off_t start, off_t end)
{
	off_t wstart = start - start % FILE_WINDOW_ALIGN;
	off_t wend = end + (FILE_WINDOW_ALIGN - end % FILE_WINDOW_ALIGN) %
				   FILE_WINDOW_ALIGN;
	size_t len = (size_t)(wend - wstart);
	char *buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	size_t got = 0;
	int r = sb_read(b, guest_path, wstart, len, buf, &got);
	if (r < 0) {
		free(buf);
		return r;
	}
	/* The sandbox's copy may be shorter than what we believed (it changed
	 * under us); what it lacks reads as zeroes, as after a truncate. */
	if (got < len)
		memset(buf + got, 0, len - got);
	off_t limit = wend < f->size ? wend : f->size;
	off_t gs, ge, pos = wstart;
	while (pos < limit && range_set_first_gap(&f->present, pos, limit, &gs, &ge)) {
		r = pwrite_all(f->fd, buf + (gs - wstart), (size_t)(ge - gs), gs);
		if (r < 0)
			break;
		r = range_set_add(&f->present, gs, ge);
		if (r < 0)
			break;
		pos = ge;
	}
	free(buf);
	return r < 0 ? r : 0;
}

static size_t next_window(struct file_state *f, off_t off)
{
	if (off == f->seq_next) {
		if (f->window < FILE_WINDOW_MAX)
			f->window *= 2;
	} else {
		f->window = FILE_WINDOW_MIN;
	}
	return f->window;
}

ssize_t file_state_read(struct file_state *f, struct sb_backend *b,
			const char *guest_path, char *buf, size_t len,
			off_t off)
{
	if (off >= f->size)
		return 0;
	if ((off_t)len > f->size - off)
		len = (size_t)(f->size - off);
	off_t end = off + (off_t)len;
	off_t gs, ge;
	if (range_set_first_gap(&f->present, off, end, &gs, &ge)) {
		/* One fetch fills every gap of its window. */
		off_t wend = gs + (off_t)next_window(f, off);
		if (wend < end)
			wend = end;
		if (wend > f->size)
			wend = f->size;
		int r = fetch_window(f, b, guest_path, gs, wend);
		if (r < 0)
			return r;
	}
	f->seq_next = end;
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(f->fd, buf + done, len - done, off + (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) {
			/* The spool is sparse up to size: beyond its end reads
			 * as zeroes. */
			memset(buf + done, 0, len - done);
			done = len;
			break;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t file_state_write(struct file_state *f, const char *buf, size_t len,
			 off_t off)
{
	int r = pwrite_all(f->fd, buf, len, off);
	if (r < 0)
		return r;
	off_t end = off + (off_t)len;
	/* A write past the end leaves a hole that reads as zeroes: the spool
	 * has it, nothing to fetch. */
	off_t from = off > f->size ? f->size : off;
	r = range_set_add(&f->present, from, end);
	if (r < 0)
		return r;
	if (end > f->size)
		f->size = end;
	f->dirty = f->written = true;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	return (ssize_t)len;
}

int file_state_truncate(struct file_state *f, off_t size)
{
	if (ftruncate(f->fd, size) < 0)
		return -errno;
	range_set_clip(&f->present, size);
	if (size > f->size) {
		int r = range_set_add(&f->present, f->size, size);
		if (r < 0)
			return r;
	}
	f->size = size;
	f->dirty = f->written = true;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	return 0;
}

int file_state_upload_prepare(struct file_state *f, struct sb_backend *b,
			      const char *guest_path)
{
	off_t gs, ge;
	while (f->remote_exists &&
	       range_set_first_gap(&f->present, 0, f->size, &gs, &ge)) {
		off_t wend = gs + FILE_WINDOW_MAX;
		if (wend > ge)
			wend = ge;
		int r = fetch_window(f, b, guest_path, gs, wend);
		if (r < 0)
			return f->upload_error = r;
	}
	/* A new file the sandbox never had: its gaps are holes. */
	if (ftruncate(f->fd, f->size) < 0)
		return f->upload_error = -errno;
	return 0;
}

void file_state_upload_done(struct file_state *f, int r)
{
	if (r < 0) {
		f->upload_error = r;
		return;
	}
	f->remote_exists = true;
	f->identity_known = false;
	f->adoptable = true;
	f->upload_error = 0;
}

bool file_state_complete(const struct file_state *f)
{
	off_t gs, ge;
	return !f->remote_exists ||
	       !range_set_first_gap(&f->present, 0, f->size, &gs, &ge);
}

int file_state_upload(struct file_state *f, struct sb_backend *b,
		      const char *guest_path)
{
	if (!f->dirty || f->unlinked)
		return 0;
	int r = file_state_upload_prepare(f, b, guest_path);
	if (r < 0)
		return r;
	r = sb_write_file(b, guest_path, f->fd, f->size, f->mode);
	file_state_upload_done(f, r);
	return r;
}

void file_state_revalidate(struct file_state *f, off_t size,
			   const struct timespec *mtime, bool from_sandbox)
{
	if (f->dirty)
		return;
	bool same_mtime = mtime->tv_sec == f->remote_mtime.tv_sec &&
			  mtime->tv_nsec == f->remote_mtime.tv_nsec;
	if (f->invalidated) {
		f->invalidated = false;
	} else if (!f->identity_known) {
		if (!from_sandbox)
			return; /* still what we uploaded, as far as we know */
		if (f->adoptable && size == f->size) {
			f->remote_mtime = *mtime;
			f->identity_known = true;
			return;
		}
	} else if (size == f->size && same_mtime) {
		return;
	}
	range_set_clear(&f->present);
	if (ftruncate(f->fd, 0) < 0) {
		/* the ranges are what count; the bytes are rewritten */
	}
	f->size = size;
	f->remote_mtime = *mtime;
	f->identity_known = from_sandbox;
	f->adoptable = false;
	f->seq_next = -1;
	f->window = FILE_WINDOW_MIN;
}
