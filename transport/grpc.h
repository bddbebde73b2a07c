/* gRPC over HTTP/2 with libcurl: length-prefixed framing, status from
 * trailers or trailers-only responses, deadlines, server streaming, and the
 * retry policy for transient codes. One grpc_channel per endpoint (it
 * shares connections, DNS and TLS sessions between calls); a grpc_call is
 * one RPC, which a caller may drive itself in a curl_multi (to run several
 * streams at once) or run to completion with grpc_call_run. */
#ifndef SBFS_TRANSPORT_GRPC_H
#define SBFS_TRANSPORT_GRPC_H

#include "protobuf.h"
#include "tls_trust.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum grpc_code {
	GRPC_OK = 0,
	GRPC_CANCELLED = 1,
	GRPC_UNKNOWN = 2,
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_NOT_FOUND = 5,
	GRPC_ALREADY_EXISTS = 6,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_RESOURCE_EXHAUSTED = 8,
	GRPC_FAILED_PRECONDITION = 9,
	GRPC_ABORTED = 10,
	GRPC_OUT_OF_RANGE = 11,
	GRPC_UNIMPLEMENTED = 12,
	GRPC_INTERNAL = 13,
	GRPC_UNAVAILABLE = 14,
	GRPC_DATA_LOSS = 15,
	GRPC_UNAUTHENTICATED = 16,
};

#define GRPC_MAX_MESSAGE (100u * 1024 * 1024) /* what Modal's SDKs allow */

struct grpc_status {
	int code;
	char message[512];     /* grpc-message, percent-decoded, or our reason */
	double retry_after_s;  /* server throttle hint (RPCRetryPolicy); <0 none */
	bool cert_untrusted;   /* TLS: the server's certificate failed verification */
};

const char *grpc_code_name(int code);
/* DEADLINE_EXCEEDED, UNAVAILABLE, CANCELLED, INTERNAL, UNKNOWN */
bool grpc_code_retryable(int code);

/* ---- framing: [flag u8][len u32 BE][message] ---- */

/* Return 0 to go on; non-zero aborts the call (the call ends CANCELLED
 * unless the callback set another status through its own means). */
typedef int (*grpc_msg_fn)(void *arg, const uint8_t *msg, size_t len);

struct grpc_frame_reader {
	uint8_t hdr[5];
	size_t hdr_got;
	uint8_t *msg;
	size_t msg_len, msg_got;
	size_t max;            /* largest message accepted */
	bool failed;
	bool aborted;          /* the callback asked to stop */
	char why[128];
	grpc_msg_fn fn;
	void *arg;
};

void grpc_frame_init(struct grpc_frame_reader *r, size_t max, grpc_msg_fn fn,
		     void *arg);
/* Feeds bytes as they arrive, split or merged anywhere; calls fn once per
 * complete message. 0 = go on, -1 = stop (r->failed/r->aborted say why). */
int grpc_frame_feed(struct grpc_frame_reader *r, const void *data, size_t n);
/* True when no message is partially received. */
bool grpc_frame_idle(const struct grpc_frame_reader *r);
void grpc_frame_free(struct grpc_frame_reader *r);
/* Appends msg as one uncompressed frame. */
void grpc_frame_encode(struct pb_buf *out, const void *msg, size_t len);

/* ---- channels and calls ---- */

struct grpc_channel;

/* url: scheme://host[:port][/ignored]. https uses TLS with ALPN h2,
 * always verified, against trust's CAs (NULL: libcurl's defaults); http
 * (prior-knowledge h2c) is accepted only when allow_plaintext and the host
 * is a loopback address. */
struct grpc_channel *grpc_channel_new(const char *url, bool allow_plaintext,
				      const struct tls_trust *trust,
				      char *err, size_t errlen);
void grpc_channel_free(struct grpc_channel *ch);
const char *grpc_channel_url(const struct grpc_channel *ch);
bool grpc_url_is_loopback(const char *url);

struct grpc_call;

/* method: "/package.Service/Method". metadata: NULL-terminated "name: value"
 * lines. timeout_s > 0 bounds the whole call (also sent as grpc-timeout). */
struct grpc_call *grpc_call_new(struct grpc_channel *ch, const char *method,
				const char *const *metadata,
				const void *req, size_t req_len,
				double timeout_s, grpc_msg_fn on_msg, void *arg);
CURL *grpc_call_easy(struct grpc_call *c);
/* After the transfer ended with cc (from curl_multi_info_read or
 * curl_easy_perform): the call's status. */
void grpc_call_finish(struct grpc_call *c, CURLcode cc, struct grpc_status *st);
void grpc_call_free(struct grpc_call *c);
/* Blocking: perform, then finish. Returns st->code. */
int grpc_call_run(struct grpc_call *c, struct grpc_status *st);

/* ---- unary calls with retries ---- */

struct grpc_retry {
	int max_retries;        /* transient-code retries after the first try */
	double base_delay_s;
	double factor;
	double max_delay_s;     /* 0 = no cap */
	bool idempotency;       /* send x-idempotency-key / x-retry-* headers */
	double max_throttle_s;  /* total wait on server throttle hints; <0 none */
};

/* The control plane's policy: 3 retries, 100 ms x2 capped at 1 s, keyed. */
extern const struct grpc_retry grpc_retry_control;
/* The task router's policy: 10 retries, 10 ms x2, uncapped. */
extern const struct grpc_retry grpc_retry_router;
/* No retries at all. */
extern const struct grpc_retry grpc_retry_none;

/* One request, one response (collected into resp, empty if the server sent
 * none). timeout_s applies per attempt. Returns st->code. */
int grpc_unary(struct grpc_channel *ch, const char *method,
	       const char *const *metadata, const struct pb_buf *req,
	       double timeout_s, const struct grpc_retry *policy,
	       struct pb_buf *resp, struct grpc_status *st);

/* Sleeps for the policy's delay before retry number `attempt` (1-based). */
double grpc_retry_delay(const struct grpc_retry *p, int attempt);

/* A random UUID4 string (idempotency keys, exec ids). */
void grpc_uuid4(char out[37]);
/* Percent-decodes grpc-message in place. */
void grpc_percent_decode(char *s);
/* Decodes grpc-status-details-bin (base64 google.rpc.Status) looking for a
 * RPCRetryPolicy; returns retry_after seconds or -1. */
double grpc_details_retry_after(const char *b64);

#endif
