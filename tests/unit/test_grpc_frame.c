/* gRPC length-prefixed framing: messages reassembled however the bytes are
 * split across write callbacks, several per chunk, bad frames refused; and
 * the status helpers (percent-decoding, throttle details). */
#include "transport/grpc.h"
#include "unit.h"

#include <stdlib.h>

struct got {
	char msgs[16][64];
	size_t lens[16];
	int n;
};

static int on_msg(void *arg, const uint8_t *m, size_t len)
{
	struct got *g = arg;
	if (g->n < 16 && len < 64) {
		memcpy(g->msgs[g->n], m, len);
		g->lens[g->n] = len;
	}
	g->n++;
	return 0;
}

static void build_stream(struct pb_buf *out)
{
	grpc_frame_encode(out, "hello", 5);
	grpc_frame_encode(out, "", 0);
	grpc_frame_encode(out, "a longer message here", 21);
}

static void check_three(const struct got *g)
{
	CHECK_INT(g->n, 3);
	CHECK_MEM(g->msgs[0], g->lens[0], "hello", 5);
	CHECK_INT(g->lens[1], 0);
	CHECK_MEM(g->msgs[2], g->lens[2], "a longer message here", 21);
}

static void test_encode(void)
{
	struct pb_buf b = {0};
	grpc_frame_encode(&b, "\x08\x01", 2);
	CHECK_MEM(b.data, b.len, "\x00\x00\x00\x00\x02\x08\x01", 7);
	pb_buf_free(&b);
}

static void test_all_splits(void)
{
	struct pb_buf s = {0};
	build_stream(&s);
	/* every single split point, and every pair of split points */
	for (size_t i = 0; i <= s.len; i++) {
		for (size_t j = i; j <= s.len; j++) {
			struct got g = {0};
			struct grpc_frame_reader r;
			grpc_frame_init(&r, 1024, on_msg, &g);
			CHECK_INT(grpc_frame_feed(&r, s.data, i), 0);
			CHECK_INT(grpc_frame_feed(&r, s.data + i, j - i), 0);
			CHECK_INT(grpc_frame_feed(&r, s.data + j, s.len - j), 0);
			check_three(&g);
			CHECK(grpc_frame_idle(&r));
			grpc_frame_free(&r);
		}
	}
	/* byte by byte */
	struct got g = {0};
	struct grpc_frame_reader r;
	grpc_frame_init(&r, 1024, on_msg, &g);
	for (size_t i = 0; i < s.len; i++) {
		CHECK_INT(grpc_frame_feed(&r, s.data + i, 1), 0);
		if (i + 1 < s.len && i > 0)
			CHECK(g.n == 3 || !grpc_frame_idle(&r) || g.n >= 1);
	}
	check_three(&g);
	grpc_frame_free(&r);
	/* all in one chunk */
	memset(&g, 0, sizeof(g));
	grpc_frame_init(&r, 1024, on_msg, &g);
	CHECK_INT(grpc_frame_feed(&r, s.data, s.len), 0);
	check_three(&g);
	grpc_frame_free(&r);
	pb_buf_free(&s);
}

static void test_partial_is_not_idle(void)
{
	struct got g = {0};
	struct grpc_frame_reader r;
	grpc_frame_init(&r, 1024, on_msg, &g);
	CHECK_INT(grpc_frame_feed(&r, "\x00\x00\x00\x00\x05he", 7), 0);
	CHECK(!grpc_frame_idle(&r));
	CHECK_INT(g.n, 0);
	grpc_frame_free(&r);
}

static void test_rejects(void)
{
	struct got g = {0};
	struct grpc_frame_reader r;
	grpc_frame_init(&r, 1024, on_msg, &g);
	CHECK_INT(grpc_frame_feed(&r, "\x01\x00\x00\x00\x01x", 6), -1);
	CHECK(r.failed);
	CHECK(strstr(r.why, "compressed") != NULL);
	CHECK_INT(g.n, 0);
	grpc_frame_free(&r);

	grpc_frame_init(&r, 1024, on_msg, &g);
	/* 1025 bytes announced, limit 1024: refused before any allocation */
	CHECK_INT(grpc_frame_feed(&r, "\x00\x00\x00\x04\x01", 5), -1);
	CHECK(r.failed);
	CHECK(strstr(r.why, "larger") != NULL);
	grpc_frame_free(&r);

	grpc_frame_init(&r, GRPC_MAX_MESSAGE, on_msg, &g);
	CHECK_INT(grpc_frame_feed(&r, "\x00\xff\xff\xff\xff", 5), -1);
	grpc_frame_free(&r);
}

static int stop_cb(void *arg, const uint8_t *m, size_t len)
{
	(void)arg; (void)m; (void)len;
	return 1;
}

static void test_abort(void)
{
	struct grpc_frame_reader r;
	grpc_frame_init(&r, 1024, stop_cb, NULL);
	CHECK_INT(grpc_frame_feed(&r, "\x00\x00\x00\x00\x01x\x00\x00\x00\x00\x01y", 12), -1);
	CHECK(r.aborted);
	grpc_frame_free(&r);
}

static void test_status_helpers(void)
{
	char m[] = "bad%20thing%3A%20%E2%9C%93 100%";
	grpc_percent_decode(m);
	CHECK(!strcmp(m, "bad thing: \xe2\x9c\x93 100%"));
	/* Status{code=14, details=[Any{type_url=".../modal.client.RPCRetryPolicy",
	 * value=RPCRetryPolicy{retry_after_secs=2.5}}]} */
	struct pb_buf pol = {0}, any = {0}, st = {0};
	pb_float(&pol, 1, 2.5f);
	pb_string(&any, 1, "type.modal.com/modal.client.RPCRetryPolicy");
	pb_msg(&any, 2, &pol);
	pb_uint(&st, 1, 14);
	pb_msg(&st, 3, &any);
	static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char b64[512];
	size_t o = 0;
	for (size_t i = 0; i < st.len; i += 3) {
		uint32_t v = (uint32_t)st.data[i] << 16;
		if (i + 1 < st.len) v |= (uint32_t)st.data[i + 1] << 8;
		if (i + 2 < st.len) v |= st.data[i + 2];
		b64[o++] = tbl[v >> 18 & 63];
		b64[o++] = tbl[v >> 12 & 63];
		b64[o++] = i + 1 < st.len ? tbl[v >> 6 & 63] : '=';
		b64[o++] = i + 2 < st.len ? tbl[v & 63] : '=';
	}
	b64[o] = '\0';
	double after = grpc_details_retry_after(b64);
	CHECK(after > 2.49 && after < 2.51);
	CHECK(grpc_details_retry_after("") < 0);
	pb_buf_free(&pol);
	pb_buf_free(&any);
	pb_buf_free(&st);

	CHECK(grpc_code_retryable(GRPC_UNAVAILABLE));
	CHECK(grpc_code_retryable(GRPC_INTERNAL));
	CHECK(!grpc_code_retryable(GRPC_NOT_FOUND));
	CHECK(!grpc_code_retryable(GRPC_UNAUTHENTICATED));
	CHECK(grpc_url_is_loopback("http://127.0.0.1:5000"));
	CHECK(grpc_url_is_loopback("http://[::1]:80/x"));
	CHECK(!grpc_url_is_loopback("http://example.com"));
	char err[200];
	CHECK(grpc_channel_new("http://example.com:80", true, NULL, err, sizeof(err)) == NULL);
	CHECK(grpc_channel_new("ftp://x", true, NULL, err, sizeof(err)) == NULL);
	struct grpc_channel *ch = grpc_channel_new("https://api.modal.com:443/some/path", false, NULL, err, sizeof(err));
	CHECK(ch != NULL);
	if (ch) {
		CHECK(!strcmp(grpc_channel_url(ch), "https://api.modal.com:443"));
		grpc_channel_free(ch);
	}
	CHECK(grpc_retry_delay(&grpc_retry_control, 1) == 0.1);
	CHECK(grpc_retry_delay(&grpc_retry_control, 5) == 1.0);
	char u[37];
	grpc_uuid4(u);
	CHECK_INT(strlen(u), 36);
	CHECK(u[14] == '4');
}

int main(void)
{
	test_encode();
	test_all_splits();
	test_partial_is_not_idle();
	test_rejects();
	test_abort();
	test_status_helpers();
	return unit_done("grpc_frame");
}
