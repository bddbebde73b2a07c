/* gRPC over HTTP/2 with libcurl. See grpc.h.
 *
 * Keepalive: libcurl sends HTTP/2 PINGs only from curl_easy_upkeep() on an
 * idle connection, never during a transfer, and has no PING-ack timeout.
 * We set CURLOPT_UPKEEP_INTERVAL_MS (30 s, as the SDKs ping) and TCP
 * keepalive (30 s idle, 10 s interval); a connection that died while idle
 * in the shared pool surfaces as UNAVAILABLE on the next call, which the
 * retry policy covers. */
#include "grpc.h"
#include "util/call_deadline.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

const struct grpc_retry grpc_retry_control = {3, 0.1, 2.0, 1.0, true, -1};
const struct grpc_retry grpc_retry_router = {10, 0.01, 2.0, 0, false, -1};
const struct grpc_retry grpc_retry_none = {0, 0, 1, 0, false, -1};

const char *grpc_code_name(int code)
{
	static const char *const names[] = {
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
		"DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
		"PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
		"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
		"UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
	};
	return code >= 0 && code <= 16 ? names[code] : "UNKNOWN";
}

bool grpc_code_retryable(int code)
{
	return code == GRPC_DEADLINE_EXCEEDED || code == GRPC_UNAVAILABLE ||
	       code == GRPC_CANCELLED || code == GRPC_INTERNAL ||
	       code == GRPC_UNKNOWN;
}

/* ---- framing ---- */

void grpc_frame_init(struct grpc_frame_reader *r, size_t max, grpc_msg_fn fn,
		     void *arg)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
	r->fn = fn;
	r->arg = arg;
}

static int frame_fail(struct grpc_frame_reader *r, const char *why)
{
	r->failed = true;
	snprintf(r->why, sizeof(r->why), "%s", why);
	return -1;
}

static int deliver(struct grpc_frame_reader *r)
{
	int rc = r->fn ? r->fn(r->arg, r->msg, r->msg_len) : 0;
	free(r->msg);
	r->msg = NULL;
	r->hdr_got = r->msg_len = r->msg_got = 0;
	if (rc != 0) {
		r->aborted = true;
		return -1;
	}
	return 0;
}

int grpc_frame_feed(struct grpc_frame_reader *r, const void *data, size_t n)
{
	const uint8_t *p = data;
	if (r->failed || r->aborted)
		return -1;
	while (n) {
		if (r->hdr_got < 5) {
			size_t k = 5 - r->hdr_got < n ? 5 - r->hdr_got : n;
			memcpy(r->hdr + r->hdr_got, p, k);
			r->hdr_got += k;
			p += k;
			n -= k;
			if (r->hdr_got < 5)
				break;
			if (r->hdr[0] != 0)
				return frame_fail(r, r->hdr[0] == 1
					? "compressed message (no compression was negotiated)"
					: "bad frame flag");
			uint32_t len = (uint32_t)r->hdr[1] << 24 | (uint32_t)r->hdr[2] << 16 |
				       (uint32_t)r->hdr[3] << 8 | r->hdr[4];
			if (len > r->max)
				return frame_fail(r, "message larger than the limit");
			r->msg_len = len;
			r->msg_got = 0;
			r->msg = malloc(len ? len : 1);
			if (!r->msg)
				return frame_fail(r, "out of memory");
			if (len == 0 && deliver(r) < 0)
				return -1;
			continue;
		}
		size_t k = r->msg_len - r->msg_got < n ? r->msg_len - r->msg_got : n;
		memcpy(r->msg + r->msg_got, p, k);
		r->msg_got += k;
		p += k;
		n -= k;
		if (r->msg_got == r->msg_len && deliver(r) < 0)
			return -1;
	}
	return 0;
}

bool grpc_frame_idle(const struct grpc_frame_reader *r)
{
	return r->hdr_got == 0;
}

void grpc_frame_free(struct grpc_frame_reader *r)
{
	free(r->msg);
	r->msg = NULL;
}

void grpc_frame_encode(struct pb_buf *out, const void *msg, size_t len)
{
	uint8_t h[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
			(uint8_t)(len >> 8), (uint8_t)len};
	pb_raw(out, h, 5);
	pb_raw(out, msg, len);
}

/* ---- small helpers ---- */

void grpc_uuid4(char out[37])
{
	uint8_t b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (uint8_t)((ts.tv_nsec >> (i % 4 * 8)) ^ (getpid() >> i) ^ (i * 37));
	}
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		 b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void grpc_percent_decode(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		int hi, lo;
		if (r[0] == '%' && (hi = hexval((unsigned char)r[1])) >= 0 &&
		    (lo = hexval((unsigned char)r[2])) >= 0) {
			*w++ = (char)(hi << 4 | lo);
			r += 2;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

static size_t b64_decode(const char *in, uint8_t *out, size_t cap)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t n = 0;
	for (; *in; in++) {
		int c = (unsigned char)*in, v;
		if (c >= 'A' && c <= 'Z') v = c - 'A';
		else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
		else if (c >= '0' && c <= '9') v = c - '0' + 52;
		else if (c == '+' || c == '-') v = 62;
		else if (c == '/' || c == '_') v = 63;
		else continue; /* padding, whitespace */
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n < cap)
				out[n++] = (uint8_t)(acc >> bits);
		}
	}
	return n;
}

static bool ends_with(const struct pb_field *f, const char *suffix)
{
	size_t k = strlen(suffix);
	return f->len >= k && memcmp(f->data + f->len - k, suffix, k) == 0;
}

double grpc_details_retry_after(const char *b64)
{
	size_t cap = strlen(b64);
	uint8_t *bin = malloc(cap + 1);
	if (!bin)
		return -1;
	size_t n = b64_decode(b64, bin, cap);
	double after = -1;
	/* Status { code = 1; message = 2; repeated Any details = 3 } */
	struct pb_reader r = pb_reader(bin, n);
	struct pb_field f;
	while (pb_next(&r, &f) == 1) {
		if (f.num != 3 || f.wt != PB_LEN)
			continue;
		struct pb_reader a = pb_sub(&f);
		struct pb_field af;
		bool is_policy = false;
		struct pb_field value = {0};
		while (pb_next(&a, &af) == 1) {
			if (af.num == 1 && af.wt == PB_LEN)
				is_policy = ends_with(&af, "/modal.client.RPCRetryPolicy");
			else if (af.num == 2 && af.wt == PB_LEN)
				value = af;
		}
		if (!is_policy)
			continue;
		/* RPCRetryPolicy { float retry_after_secs = 1; } */
		struct pb_reader pr = pb_sub(&value);
		struct pb_field pf;
		after = 0;
		while (pb_next(&pr, &pf) == 1)
			if (pf.num == 1 && pf.wt == PB_FIXED32)
				after = pb_as_float(&pf);
	}
	free(bin);
	return after;
}

/* ---- channel ---- */

struct grpc_channel {
	char url[512];       /* scheme://host[:port], no path */
	bool plaintext;
	struct tls_trust trust;
	CURLSH *share;
	pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
};

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *arg)
{
	(void)h;
	(void)a;
	struct grpc_channel *ch = arg;
	pthread_mutex_lock(&ch->locks[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *arg)
{
	(void)h;
	struct grpc_channel *ch = arg;
	pthread_mutex_unlock(&ch->locks[d]);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* host part of scheme://host[:port]/..., into buf */
static bool url_host(const char *url, char *buf, size_t n)
{
	const char *p = strstr(url, "://");
	if (!p)
		return false;
	p += 3;
	size_t k;
	if (*p == '[') {
		const char *e = strchr(p, ']');
		if (!e)
			return false;
		p++;
		k = (size_t)(e - p);
	} else {
		k = strcspn(p, ":/?#");
	}
	if (k == 0 || k >= n)
		return false;
	memcpy(buf, p, k);
	buf[k] = '\0';
	return true;
}

bool grpc_url_is_loopback(const char *url)
{
	char host[256];
	if (!url_host(url, host, sizeof(host)))
		return false;
	return !strcmp(host, "localhost") || !strcmp(host, "::1") ||
	       !strncmp(host, "127.", 4);
}

struct grpc_channel *grpc_channel_new(const char *url, bool allow_plaintext,
				      const struct tls_trust *trust,
				      char *err, size_t errlen)
{
	pthread_once(&curl_once, curl_init_once);
	bool tls = !strncmp(url, "https://", 8);
	bool plain = !strncmp(url, "http://", 7);
	char host[256];
	if ((!tls && !plain) || !url_host(url, host, sizeof(host))) {
		snprintf(err, errlen, "bad server URL '%.200s': expected https://HOST[:PORT]", url);
		return NULL;
	}
	if (plain && !(allow_plaintext && grpc_url_is_loopback(url))) {
		snprintf(err, errlen, "refusing plaintext http:// to '%.200s': only a loopback test server may use http://", url);
		return NULL;
	}
	struct grpc_channel *ch = calloc(1, sizeof(*ch));
	if (!ch) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* keep scheme://authority only: gRPC paths are absolute */
	const char *auth = strstr(url, "://") + 3;
	size_t k = (size_t)(auth - url) + strcspn(auth, "/?#");
	if (k >= sizeof(ch->url)) {
		free(ch);
		snprintf(err, errlen, "server URL too long");
		return NULL;
	}
	memcpy(ch->url, url, k);
	ch->url[k] = '\0';
	ch->plaintext = plain;
	if (trust)
		ch->trust = *trust;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&ch->locks[i], NULL);
	ch->share = curl_share_init();
	if (ch->share) {
		curl_share_setopt(ch->share, CURLSHOPT_LOCKFUNC, share_lock);
		curl_share_setopt(ch->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
		curl_share_setopt(ch->share, CURLSHOPT_USERDATA, ch);
		curl_share_setopt(ch->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
		curl_share_setopt(ch->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	}
	return ch;
}

void grpc_channel_free(struct grpc_channel *ch)
{
	if (!ch)
		return;
	if (ch->share)
		curl_share_cleanup(ch->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&ch->locks[i]);
	free(ch);
}

const char *grpc_channel_url(const struct grpc_channel *ch)
{
	return ch->url;
}

/* ---- calls ---- */

struct grpc_call {
	CURL *easy;
	struct curl_slist *headers;
	struct pb_buf body;
	struct grpc_frame_reader frames;
	char errbuf[CURL_ERROR_SIZE];
	long http_status;
	bool have_status;
	int status;
	char message[512];
	double retry_after;
	double timeout_s;
};

static size_t on_data(char *p, size_t sz, size_t n, void *arg)
{
	struct grpc_call *c = arg;
	size_t len = sz * n;
	if (grpc_frame_feed(&c->frames, p, len) < 0)
		return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
	return len;
}

/* Headers and (HTTP/2) trailers both arrive here, one line per call. */
static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
	struct grpc_call *c = arg;
	size_t len = sz * n;
	char line[2048];
	size_t k = len < sizeof(line) - 1 ? len : sizeof(line) - 1;
	memcpy(line, p, k);
	line[k] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	if (!strncmp(line, "HTTP/", 5)) {
		const char *sp = strchr(line, ' ');
		c->http_status = sp ? strtol(sp + 1, NULL, 10) : 0;
		return len;
	}
	char *colon = strchr(line, ':');
	if (!colon)
		return len;
	*colon = '\0';
	char *val = colon + 1;
	while (*val == ' ' || *val == '\t')
		val++;
	for (char *q = line; *q; q++)
		*q = (char)tolower((unsigned char)*q);
	if (!strcmp(line, "grpc-status")) {
		c->have_status = true;
		c->status = (int)strtol(val, NULL, 10);
	} else if (!strcmp(line, "grpc-message")) {
		snprintf(c->message, sizeof(c->message), "%s", val);
		grpc_percent_decode(c->message);
	} else if (!strcmp(line, "grpc-status-details-bin")) {
		c->retry_after = grpc_details_retry_after(val);
	}
	return len;
}

static int http_to_grpc(long http)
{
	switch (http) {
	case 400: return GRPC_INTERNAL;
	case 401: return GRPC_UNAUTHENTICATED;
	case 403: return GRPC_PERMISSION_DENIED;
	case 404: return GRPC_UNIMPLEMENTED;
	case 429: case 502: case 503: case 504: return GRPC_UNAVAILABLE;
	default: return GRPC_UNKNOWN;
	}
}

struct grpc_call *grpc_call_new(struct grpc_channel *ch, const char *method,
				const char *const *metadata,
				const void *req, size_t req_len,
				double timeout_s, grpc_msg_fn on_msg, void *arg)
{
	struct grpc_call *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->retry_after = -1;
	/* a backend call's deadline bounds every RPC made for it */
	timeout_s = call_deadline_clamp(timeout_s);
	c->timeout_s = timeout_s;
	grpc_frame_init(&c->frames, GRPC_MAX_MESSAGE, on_msg, arg);
	grpc_frame_encode(&c->body, req, req_len);
	c->easy = curl_easy_init();
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", ch->url, method);
	struct curl_slist *h = NULL;
	h = curl_slist_append(h, "content-type: application/grpc");
	h = curl_slist_append(h, "te: trailers");
	h = curl_slist_append(h, "Expect:");
	h = curl_slist_append(h, "Accept:");
	h = curl_slist_append(h, "user-agent: sbfs/" SBFS_VERSION " (libcurl)");
	if (timeout_s > 0) {
		char t[64];
		/* grpc-timeout allows at most 8 digits */
		long long ms = (long long)(timeout_s * 1000) + 1;
		if (ms > 99999999)
			snprintf(t, sizeof(t), "grpc-timeout: %lldS", (ms + 999) / 1000);
		else
			snprintf(t, sizeof(t), "grpc-timeout: %lldm", ms);
		h = curl_slist_append(h, t);
	}
	for (size_t i = 0; metadata && metadata[i]; i++)
		h = curl_slist_append(h, metadata[i]);
	c->headers = h;
	if (!c->easy || !h || c->body.oom) {
		grpc_call_free(c);
		return NULL;
	}
	CURL *e = c->easy;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
			 ch->plaintext ? (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
				       : (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, (const char *)c->body.data);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body.len);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 15000L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(e, CURLOPT_UPKEEP_INTERVAL_MS, 30000L);
	if (timeout_s > 0)
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000) + 1);
	if (ch->share)
		curl_easy_setopt(e, CURLOPT_SHARE, ch->share);
	tls_trust_apply(e, &ch->trust);
	curl_easy_setopt(e, CURLOPT_PRIVATE, c);
	if (getenv("SBFS_CURL_VERBOSE")) /* debugging aid: curl's trace on stderr */
		curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
	return c;
}

CURL *grpc_call_easy(struct grpc_call *c)
{
	return c->easy;
}

static void set_status(struct grpc_status *st, int code, const char *msg)
{
	st->code = code;
	st->cert_untrusted = false;
	snprintf(st->message, sizeof(st->message), "%s", msg ? msg : "");
}

void grpc_call_finish(struct grpc_call *c, CURLcode cc, struct grpc_status *st)
{
	memset(st, 0, sizeof(*st));
	st->retry_after_s = c->retry_after;
	if (c->frames.failed) {
		char m[200];
		snprintf(m, sizeof(m), "bad gRPC response: %s", c->frames.why);
		set_status(st, GRPC_INTERNAL, m);
		return;
	}
	if (c->frames.aborted) {
		set_status(st, GRPC_CANCELLED, "stopped by the caller");
		return;
	}
	if (cc != CURLE_OK) {
		char m[400];
		snprintf(m, sizeof(m), "%s", c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc));
		/* a status that did arrive before the transport broke wins */
		if (c->have_status && c->status != GRPC_OK) {
			set_status(st, c->status, c->message);
			return;
		}
		if (cc == CURLE_OPERATION_TIMEDOUT)
			set_status(st, GRPC_DEADLINE_EXCEEDED, m);
		else
			set_status(st, GRPC_UNAVAILABLE, m);
		/* the caller knows where CAs come from and says so */
		st->cert_untrusted = cc == CURLE_PEER_FAILED_VERIFICATION;
		return;
	}
	if (c->have_status) {
		set_status(st, c->status, c->message);
		if (c->status == GRPC_OK && !grpc_frame_idle(&c->frames))
			set_status(st, GRPC_INTERNAL, "bad gRPC response: stream ended inside a message");
		return;
	}
	if (c->http_status != 200) {
		char m[100];
		snprintf(m, sizeof(m), "HTTP status %ld without a gRPC status", c->http_status);
		set_status(st, http_to_grpc(c->http_status), m);
		return;
	}
	set_status(st, GRPC_UNKNOWN, "the response ended without a gRPC status");
}

void grpc_call_free(struct grpc_call *c)
{
	if (!c)
		return;
	if (c->easy)
		curl_easy_cleanup(c->easy);
	curl_slist_free_all(c->headers);
	pb_buf_free(&c->body);
	grpc_frame_free(&c->frames);
	free(c);
}

int grpc_call_run(struct grpc_call *c, struct grpc_status *st)
{
	CURLcode cc = curl_easy_perform(c->easy);
	grpc_call_finish(c, cc, st);
	return st->code;
}

/* ---- unary with retries ---- */

double grpc_retry_delay(const struct grpc_retry *p, int attempt)
{
	double d = p->base_delay_s;
	for (int i = 1; i < attempt; i++)
		d *= p->factor;
	if (p->max_delay_s > 0 && d > p->max_delay_s)
		d = p->max_delay_s;
	return d;
}

static double mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int collect(void *arg, const uint8_t *msg, size_t len)
{
	struct pb_buf *resp = arg;
	resp->len = 0;
	pb_raw(resp, msg, len);
	return resp->oom ? -1 : 0;
}

int grpc_unary(struct grpc_channel *ch, const char *method,
	       const char *const *metadata, const struct pb_buf *req,
	       double timeout_s, const struct grpc_retry *policy,
	       struct pb_buf *resp, struct grpc_status *st)
{
	if (!policy)
		policy = &grpc_retry_none;
	size_t nmd = 0;
	while (metadata && metadata[nmd])
		nmd++;
	const char **md = calloc(nmd + 6, sizeof(*md));
	if (!md) {
		set_status(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return st->code;
	}
	for (size_t i = 0; i < nmd; i++)
		md[i] = metadata[i];
	char key[64], attempt_h[64], delay_h[64], tattempt_h[64], tdelay_h[64];
	char uuid[37];
	grpc_uuid4(uuid);
	snprintf(key, sizeof(key), "x-idempotency-key: %s", uuid);
	double start = mono_now(), throttled = 0, last_throttle = start;
	int retries = 0, throttles = 0;
	for (;;) {
		size_t k = nmd;
		if (policy->idempotency) {
			snprintf(attempt_h, sizeof(attempt_h), "x-retry-attempt: %d", retries);
			snprintf(delay_h, sizeof(delay_h), "x-retry-delay: %.3f", mono_now() - start);
			md[k++] = key;
			md[k++] = attempt_h;
			md[k++] = delay_h;
			if (throttles) {
				snprintf(tattempt_h, sizeof(tattempt_h), "x-throttle-retry-attempt: %d", throttles);
				snprintf(tdelay_h, sizeof(tdelay_h), "x-throttle-retry-delay: %.3f", mono_now() - last_throttle);
				md[k++] = tattempt_h;
				md[k++] = tdelay_h;
			}
		}
		md[k] = NULL;
		resp->len = 0;
		resp->oom = false;
		struct grpc_call *c = grpc_call_new(ch, method, md,
						    req ? req->data : NULL,
						    req ? req->len : 0, timeout_s,
						    collect, resp);
		if (!c) {
			set_status(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
			break;
		}
		grpc_call_run(c, st);
		grpc_call_free(c);
		if (st->code == GRPC_OK)
			break;
		if (st->retry_after_s >= 0 && policy->idempotency) {
			/* server-directed throttle: does not use up retries */
			double wait = st->retry_after_s > 0.1 ? st->retry_after_s : 0.1;
			double cap = policy->max_throttle_s;
			const char *env = getenv("MODAL_MAX_THROTTLE_WAIT");
			if (env && *env)
				cap = strtod(env, NULL);
			if (cap >= 0 && throttled + wait > cap)
				break;
			throttled += wait;
			throttles++;
			last_throttle = mono_now();
			sleep_s(wait);
			continue;
		}
		if (!grpc_code_retryable(st->code) || retries >= policy->max_retries)
			break;
		retries++;
		sleep_s(grpc_retry_delay(policy, retries));
	}
	free(md);
	return st->code;
}
