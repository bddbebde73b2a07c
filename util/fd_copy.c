#include "fd_copy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define COPY_CHUNK (1 << 20)

int sb_fd_copy(int dst, int src, off_t size)
{
	off_t in = 0;
	bool use_cfr = true;
	char *buf = NULL;
	while (in < size) {
		size_t want = (size_t)(size - in) < COPY_CHUNK ? (size_t)(size - in) : COPY_CHUNK;
		ssize_t n;
		if (use_cfr) {
			off_t out = in;
			n = copy_file_range(src, &in, dst, &out, want, 0);
			if (n < 0 && (errno == EXDEV || errno == EINVAL ||
				      errno == ENOSYS || errno == EOPNOTSUPP)) {
				use_cfr = false;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				free(buf);
				return -errno;
			}
			if (n == 0)
				break;
			continue;
		}
		if (!buf && !(buf = malloc(COPY_CHUNK)))
			return -ENOMEM;
		n = pread(src, buf, want, in);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			return n < 0 ? -errno : -EIO;
		}
		for (ssize_t done = 0; done < n;) {
			ssize_t w = pwrite(dst, buf + done, (size_t)(n - done), in + done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				free(buf);
				return -errno;
			}
			done += w;
		}
		in += n;
	}
	free(buf);
	return in == size ? 0 : -EIO; /* the source shrank under us */
}
