/* The docker attached-stream demultiplexer on adversarial input: frames
 * split at every byte and in odd pieces, zero-length frames, huge declared
 * lengths (refused, never allocated), unknown stream ids, bad padding,
 * streams cut mid-frame, and a callback that aborts. */
#include "backends/docker/docker_stream.h"
#include "unit.h"

#include <errno.h>
#include <stdlib.h>

struct sink {
	char out[1 << 16], err[1 << 16];
	size_t out_len, err_len;
	int calls;
	int abort_after; /* abort on this call number; 0 = never */
};

static int collect(void *arg, int stream, const char *d, size_t n)
{
	struct sink *s = arg;
	s->calls++;
	if (s->abort_after && s->calls == s->abort_after)
		return -ECANCELED;
	if (n == 0)
		return 0;
	if (stream == DK_STREAM_STDOUT) {
		memcpy(s->out + s->out_len, d, n);
		s->out_len += n;
	} else {
		memcpy(s->err + s->err_len, d, n);
		s->err_len += n;
	}
	return 0;
}

static size_t frame(char *buf, int stream, const char *data, size_t len)
{
	buf[0] = (char)stream;
	buf[1] = buf[2] = buf[3] = 0;
	buf[4] = (char)(len >> 24);
	buf[5] = (char)(len >> 16);
	buf[6] = (char)(len >> 8);
	buf[7] = (char)len;
	memcpy(buf + 8, data, len);
	return 8 + len;
}

/* A stream of mixed frames, incl. zero-length ones and stream ids 0/3. */
static size_t sample(char *buf)
{
	size_t n = 0;
	n += frame(buf + n, 1, "hello ", 6);
	n += frame(buf + n, 2, "", 0);
	n += frame(buf + n, 2, "warn\n", 5);
	n += frame(buf + n, 1, "", 0);
	n += frame(buf + n, 1, "world\n", 6);
	n += frame(buf + n, 0, "in", 2);   /* stdin id: routed to stdout */
	n += frame(buf + n, 3, "sys\n", 4); /* engine error channel: stderr */
	char big[3000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7);
	n += frame(buf + n, 2, big, sizeof(big));
	return n;
}

static void check_sample(const struct sink *s)
{
	char want_err[4000];
	size_t we = 0;
	memcpy(want_err, "warn\nsys\n", 9);
	we = 9;
	for (size_t i = 0; i < 3000; i++)
		want_err[we++] = (char)(i * 7);
	CHECK_MEM(s->out, s->out_len, "hello world\nin", 14);
	CHECK_MEM(s->err, s->err_len, want_err, we);
}

static void test_splits(void)
{
	static char buf[1 << 14];
	size_t n = sample(buf);
	/* every chunk size from 1 byte up, incl. ones that split headers */
	for (size_t chunk = 1; chunk <= 37; chunk++) {
		struct dk_demux d;
		static struct sink s;
		memset(&s, 0, sizeof(s));
		dk_demux_init(&d);
		int rc = 0;
		for (size_t off = 0; off < n && rc == 0; off += chunk) {
			size_t len = n - off < chunk ? n - off : chunk;
			rc = dk_demux_feed(&d, buf + off, len, collect, &s);
		}
		CHECK_INT(rc, 0);
		CHECK_INT(dk_demux_finish(&d), 0);
		check_sample(&s);
	}
	/* irregular splits: 3, 5, 11, 1, 13, ... */
	static const size_t pieces[] = {3, 5, 11, 1, 13, 2, 8, 7, 64, 1, 9};
	struct dk_demux d;
	static struct sink s;
	memset(&s, 0, sizeof(s));
	dk_demux_init(&d);
	size_t off = 0;
	for (size_t i = 0; off < n; i = (i + 1) % (sizeof(pieces) / sizeof(pieces[0]))) {
		size_t len = n - off < pieces[i] ? n - off : pieces[i];
		CHECK_INT(dk_demux_feed(&d, buf + off, len, collect, &s), 0);
		off += len;
	}
	CHECK_INT(dk_demux_finish(&d), 0);
	check_sample(&s);
	/* the whole stream at once */
	memset(&s, 0, sizeof(s));
	dk_demux_init(&d);
	CHECK_INT(dk_demux_feed(&d, buf, n, collect, &s), 0);
	check_sample(&s);
}

static void test_huge_length(void)
{
	/* 0xffffffff declared: refused at the header, nothing delivered */
	const char hdr[8] = {1, 0, 0, 0, (char)0xff, (char)0xff, (char)0xff, (char)0xff};
	struct dk_demux d;
	static struct sink s;
	memset(&s, 0, sizeof(s));
	dk_demux_init(&d);
	int rc = 0;
	for (size_t i = 0; i < sizeof(hdr) && rc == 0; i++)
		rc = dk_demux_feed(&d, hdr + i, 1, collect, &s);
	CHECK_INT(rc, -EPROTO);
	CHECK_INT(s.calls, 0);
	/* and stays refused */
	CHECK_INT(dk_demux_feed(&d, "x", 1, collect, &s), -EPROTO);
	CHECK_INT(dk_demux_finish(&d), -EPROTO);
	/* exactly the limit is fine; one more is not */
	char ok[8] = {1, 0, 0, 0, 0, 0, 0, 0};
	uint32_t max = DK_FRAME_MAX;
	ok[4] = (char)(max >> 24); ok[5] = (char)(max >> 16);
	ok[6] = (char)(max >> 8); ok[7] = (char)max;
	dk_demux_init(&d);
	CHECK_INT(dk_demux_feed(&d, ok, 8, NULL, NULL), 0);
	CHECK_INT(dk_demux_finish(&d), -EPROTO); /* payload still due */
	max++;
	ok[4] = (char)(max >> 24); ok[5] = (char)(max >> 16);
	ok[6] = (char)(max >> 8); ok[7] = (char)max;
	dk_demux_init(&d);
	CHECK_INT(dk_demux_feed(&d, ok, 8, NULL, NULL), -EPROTO);
}

static void test_bad_headers(void)
{
	struct dk_demux d;
	static struct sink s;
	const char unknown[8] = {4, 0, 0, 0, 0, 0, 0, 1};
	dk_demux_init(&d);
	CHECK_INT(dk_demux_feed(&d, unknown, 8, collect, &s), -EPROTO);
	const char pad[8] = {1, 0, 1, 0, 0, 0, 0, 1};
	dk_demux_init(&d);
	CHECK_INT(dk_demux_feed(&d, pad, 8, collect, &s), -EPROTO);
	const char text[] = "HTTP/1.1 200 OK\r\n"; /* not framed at all */
	dk_demux_init(&d);
	CHECK_INT(dk_demux_feed(&d, text, sizeof(text) - 1, collect, &s), -EPROTO);
	const char ff[8] = {(char)0xff, 0, 0, 0, 0, 0, 0, 0};
	dk_demux_init(&d);
	CHECK_INT(dk_demux_feed(&d, ff, 8, collect, &s), -EPROTO);
}

static void test_truncated(void)
{
	char buf[64];
	size_t n = frame(buf, 1, "abcdef", 6);
	for (size_t cut = 1; cut < n; cut++) {
		struct dk_demux d;
		static struct sink s;
		memset(&s, 0, sizeof(s));
		dk_demux_init(&d);
		CHECK_INT(dk_demux_feed(&d, buf, cut, collect, &s), 0);
		CHECK_INT(dk_demux_finish(&d), -EPROTO);
		/* a cut payload still delivered what arrived, in order */
		size_t want = cut > 8 ? cut - 8 : 0;
		CHECK_MEM(s.out, s.out_len, "abcdef", want);
	}
	struct dk_demux d;
	dk_demux_init(&d);
	CHECK_INT(dk_demux_finish(&d), 0); /* empty stream is fine */
}

static void test_abort(void)
{
	char buf[256];
	size_t n = 0;
	n += frame(buf + n, 1, "one", 3);
	n += frame(buf + n, 2, "two", 3);
	n += frame(buf + n, 1, "three", 5);
	struct dk_demux d;
	static struct sink s;
	memset(&s, 0, sizeof(s));
	s.abort_after = 2;
	dk_demux_init(&d);
	CHECK_INT(dk_demux_feed(&d, buf, n, collect, &s), -ECANCELED);
	CHECK_MEM(s.out, s.out_len, "one", 3);
	CHECK_INT(s.err_len, 0);
}

int main(void)
{
	test_splits();
	test_huge_length();
	test_bad_headers();
	test_truncated();
	test_abort();
	return unit_done("docker_stream");
}
