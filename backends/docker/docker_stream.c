/* Docker attached-stream demultiplexer; see docker_stream.h. */
#include "docker_stream.h"

#include <errno.h>
#include <string.h>

void dk_demux_init(struct dk_demux *d)
{
	memset(d, 0, sizeof(*d));
}

/* Stream ids: 0 is stdin (the engine's stdcopy routes it to stdout), 3 is
 * the engine's own error channel (systemErr) and goes to stderr. */
static int route(unsigned char id)
{
	switch (id) {
	case 0: case 1: return DK_STREAM_STDOUT;
	case 2: case 3: return DK_STREAM_STDERR;
	default: return -1;
	}
}

int dk_demux_feed(struct dk_demux *d, const char *buf, size_t len,
		  dk_payload_fn fn, void *arg)
{
	if (d->stream < 0)
		return -EPROTO;
	while (len) {
		if (d->left == 0) {
			size_t take = sizeof(d->hdr) - d->hdr_len;
			if (take > len)
				take = len;
			memcpy(d->hdr + d->hdr_len, buf, take);
			d->hdr_len += take;
			buf += take;
			len -= take;
			if (d->hdr_len < sizeof(d->hdr))
				return 0;
			d->hdr_len = 0;
			uint32_t n = (uint32_t)d->hdr[4] << 24 |
				     (uint32_t)d->hdr[5] << 16 |
				     (uint32_t)d->hdr[6] << 8 | d->hdr[7];
			int s = route(d->hdr[0]);
			if (s < 0 || d->hdr[1] || d->hdr[2] || d->hdr[3] ||
			    n > DK_FRAME_MAX) {
				d->stream = -1;
				return -EPROTO;
			}
			d->stream = s;
			d->left = n; /* a zero-length frame is simply skipped */
			continue;
		}
		size_t take = len < d->left ? len : d->left;
		if (fn) {
			int rc = fn(arg, d->stream, buf, take);
			if (rc < 0)
				return rc;
		}
		d->left -= (uint32_t)take;
		buf += take;
		len -= take;
	}
	return 0;
}

int dk_demux_finish(const struct dk_demux *d)
{
	return d->stream < 0 || d->hdr_len || d->left ? -EPROTO : 0;
}
