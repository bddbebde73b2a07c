/* Demultiplexer for the Docker Engine's attached-stream framing (exec and
 * attach without a TTY): frames of [stream, 0, 0, 0, len32be] + payload.
 * Incremental and allocation-free: bytes may arrive split anywhere, and a
 * payload is handed on in the pieces it arrives in, as it streams. */
#ifndef SBFS_BACKENDS_DOCKER_STREAM_H
#define SBFS_BACKENDS_DOCKER_STREAM_H

#include <stddef.h>
#include <stdint.h>

#define DK_STREAM_STDOUT 1
#define DK_STREAM_STDERR 2
/* Frames declaring more than this are refused as corrupt: the engine
 * writes at most its copy buffer (32 KiB) per frame. */
#define DK_FRAME_MAX (16u * 1024 * 1024)

/* Payload bytes of one frame, stream DK_STREAM_STDOUT or _STDERR; return
 * 0 to go on, negative to stop (dk_demux_feed returns that). */
typedef int (*dk_payload_fn)(void *arg, int stream, const char *data,
			     size_t len);

struct dk_demux {
	unsigned char hdr[8];
	size_t hdr_len;   /* header bytes collected for the next frame */
	uint32_t left;    /* payload bytes still due for the current frame */
	int stream;       /* the current frame's stream */
};

void dk_demux_init(struct dk_demux *d);
/* 0, the callback's negative value, or -EPROTO for a corrupt stream (bad
 * padding bytes, unknown stream id, oversized frame); the demuxer is then
 * unusable. */
int dk_demux_feed(struct dk_demux *d, const char *buf, size_t len,
		  dk_payload_fn fn, void *arg);
/* At end of stream: 0 on a frame boundary, -EPROTO if cut mid-frame. */
int dk_demux_finish(const struct dk_demux *d);

#endif
