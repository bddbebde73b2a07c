/* Calls to E2B's two planes and their errors by layer (notes 1.7): the
 * control plane answers with HTTP statuses; envd's Connect errors come as
 * JSON {code: "not_found", ...}; the edge proxy in front of envd answers a
 * gone sandbox with a plain 502 and a rate limit with 429. */
#include "e2b.h"
#include "transport/base64.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MAX_RESPONSE (8u << 20)
#define RATE_RETRIES 6
#define GONE_RETRIES 3

void e2b_reply_free(struct e2b_reply *r)
{
	json_decref(r->json);
	r->json = NULL;
}

double e2b_retry_after(const char *v)
{
	if (!v || !*v)
		return 0;
	char *end;
	double s = strtod(v, &end);
	if (end == v || s < 0 || !isfinite(s))
		return 0;
	return s > 30 ? 30 : s;
}

static double jitter(double cap)
{
	unsigned r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (unsigned)time(NULL);
	return cap * (0.5 + (double)(r % 1000) / 2000.0);
}

/* Sleeps s seconds unless that passes the call's deadline: false then. */
static bool backoff(double s)
{
	double dl = call_deadline_get();
	if (dl > 0 && call_deadline_now() + s >= dl)
		return false;
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
	return true;
}

struct hdrs {
	double retry_after;
	char *next_token;
	size_t next_len;
};

static void on_header(void *arg, const char *name, const char *value)
{
	struct hdrs *h = arg;
	if (!strcasecmp(name, "Retry-After"))
		h->retry_after = e2b_retry_after(value);
	else if (!strcasecmp(name, "X-Next-Token") && h->next_token)
		snprintf(h->next_token, h->next_len, "%s", value);
}

static void body_message(const char *body, size_t len, char *out, size_t n)
{
	out[0] = '\0';
	if (!body || !len)
		return;
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *m = json_string_value(json_object_get(j, "message"));
	if (m)
		snprintf(out, n, "%s", m);
	else
		snprintf(out, n, "%.*s", (int)(len > 200 ? 200 : len), body);
	json_decref(j);
	for (char *p = out; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}

int e2b_api_init(struct e2b *e, char *err, size_t errlen)
{
	if (e2b_endpoint(&e->api, &e->cfg, e->cfg.api_url) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	e->api_init = true;
	snprintf(e->api_hdr, sizeof(e->api_hdr), "X-API-Key: %s", e->cfg.api_key);
	e->api_hdrs[0] = e->api_hdr;
	e->api_hdrs[1] = "User-Agent: sbfs/" SBFS_VERSION;
	e->api_hdrs[2] = NULL;
	return 0;
}

int e2b_api_call(struct e2b *e, const char *method, const char *path,
		 json_t *body, bool idempotent, long timeout_ms,
		 struct e2b_reply *r)
{
	memset(r, 0, sizeof(*r));
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (body && !text)
		return -ENOMEM;
	int rc = 0;
	for (int attempt = 1;; attempt++) {
		struct hdrs h = {.next_token = r->next_token, .next_len = sizeof(r->next_token)};
		struct http_req req = {
			.method = method, .path = path,
			.content_type = text ? "application/json" : NULL,
			.body = text, .body_len = text ? strlen(text) : 0,
			.on_header = on_header, .header_arg = &h,
			.max_response = MAX_RESPONSE, .timeout_ms = timeout_ms,
			.headers = e->api_hdrs,
		};
		struct http_resp resp;
		rc = http_request(&e->api, &req, &resp);
		r->status = resp.status;
		if (rc < 0) {
			snprintf(r->message, sizeof(r->message), "%s", resp.error);
			http_resp_free(&resp);
			if (idempotent && attempt < GONE_RETRIES && rc != -ETIMEDOUT &&
			    backoff(jitter(0.2 * attempt)))
				continue;
			break;
		}
		bool rate = resp.status == 429;
		bool blip = resp.status == 502 || resp.status == 503 || resp.status == 504;
		if ((rate && attempt < RATE_RETRIES) || (blip && idempotent && attempt < GONE_RETRIES)) {
			double wait = h.retry_after > 0 ? h.retry_after
				      : jitter(0.25 * (double)(1u << (attempt - 1)));
			sb_debug("e2b: %s %s: HTTP %ld, retrying in %.2f s", method, path,
				 resp.status, wait);
			if (backoff(wait)) {
				http_resp_free(&resp);
				continue;
			}
			/* no time left: this answer stands */
		}
		r->status = resp.status;
		if (resp.len)
			r->json = json_loadb(resp.body, resp.len, 0, NULL);
		body_message(resp.body, resp.len, r->message, sizeof(r->message));
		http_resp_free(&resp);
		break;
	}
	free(text);
	return rc;
}

void e2b_describe(const struct e2b *e, char *buf, size_t n, const char *what,
		  const struct e2b_reply *r)
{
	if (r->status == 401 || r->status == 403)
		snprintf(buf, n, "E2B rejected the API key (%s: HTTP %ld %.150s): set E2B_API_KEY to a valid key for %s",
			 what, r->status, r->message, e->cfg.api_url);
	else if (r->status == 0)
		snprintf(buf, n, "E2B %s: cannot reach %s (%.200s): check E2B_DOMAIN / E2B_API_URL and the network",
			 what, e->cfg.api_url, r->message);
	else if (r->status == 429)
		snprintf(buf, n, "E2B %s: rate limited (HTTP 429 %.200s): try again later or raise your team's limits",
			 what, r->message);
	else
		snprintf(buf, n, "E2B %s failed: HTTP %ld %.250s", what, r->status,
			 r->message[0] ? r->message : "(no message)");
}

int e2b_envd_init(struct e2b *e, const char *domain, char *err, size_t errlen)
{
	char url[800];
	e2b_envd_url(&e->cfg, e->sandbox_id, domain, url, sizeof(url));
	if (e->envd_init)
		http_endpoint_free(&e->envd);
	if (e2b_endpoint(&e->envd, &e->cfg, url) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	e->envd_init = true;
	size_t k = 0;
	snprintf(e->hdr_store[0], sizeof(e->hdr_store[0]), "X-Access-Token: %s", e->access_token);
	if (e->access_token[0])
		e->envd_hdrs[k++] = e->hdr_store[0];
	if (e->cfg.sandbox_url[0]) {
		/* one URL for every sandbox: the proxy routes by these */
		snprintf(e->hdr_store[1], sizeof(e->hdr_store[1]), "E2b-Sandbox-Id: %s", e->sandbox_id);
		snprintf(e->hdr_store[2], sizeof(e->hdr_store[2]), "E2b-Sandbox-Port: %d", E2B_ENVD_PORT);
		e->envd_hdrs[k++] = e->hdr_store[1];
		e->envd_hdrs[k++] = e->hdr_store[2];
	}
	if (e->user[0]) {
		/* envd takes the user as Basic auth with an empty password */
		char up[80];
		snprintf(up, sizeof(up), "%s:", e->user);
		char *b64 = base64_encode(up, strlen(up));
		if (!b64) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		snprintf(e->hdr_store[3], sizeof(e->hdr_store[3]), "Authorization: Basic %s", b64);
		free(b64);
		e->envd_hdrs[k++] = e->hdr_store[3];
	}
	/* not "connect-python": envd would answer in its legacy format */
	e->envd_hdrs[k++] = "User-Agent: sbfs/" SBFS_VERSION;
	e->envd_hdrs[k] = NULL;
	return 0;
}

/* A 502 from the proxy: the sandbox is gone, or paused (its VM stopped,
 * its file system kept; E2B can pause on timeout). A paused one is resumed
 * with connect, which also starts its timeout again. 1 when resumed. */
static int resume_if_paused(struct sb_backend *b)
{
	struct e2b *e = b->priv;
	char path[300];
	snprintf(path, sizeof(path), "/sandboxes/%s", e->sandbox_id);
	struct e2b_reply r;
	int rc = e2b_api_call(e, "GET", path, NULL, true, 30000, &r);
	const char *state = json_string_value(json_object_get(r.json, "state"));
	bool paused = rc == 0 && r.status == 200 && state && !strcmp(state, "paused");
	e2b_reply_free(&r);
	if (!paused)
		return 0;
	snprintf(path, sizeof(path), "/sandboxes/%s/connect", e->sandbox_id);
	json_t *body = json_pack("{s:I}", "timeout", (json_int_t)e->timeout_s);
	rc = e2b_api_call(e, "POST", path, body, true, 60000, &r);
	json_decref(body);
	bool ok = rc == 0 && (r.status == 200 || r.status == 201);
	if (ok)
		sb_info("e2b: sandbox %s was paused: resumed", e->sandbox_id);
	else
		sb_warn("e2b: sandbox %s is paused and did not resume (HTTP %ld %s)",
			e->sandbox_id, r.status, r.message);
	e2b_reply_free(&r);
	return ok ? 1 : 0;
}

int e2b_envd_status(struct sb_backend *b, long status, const char *body,
		    size_t len, const char *what)
{
	struct e2b *e = b->priv;
	char msg[300];
	body_message(body, len, msg, sizeof(msg));
	switch (status) {
	case 502:
		if (resume_if_paused(b) > 0)
			return -EAGAIN; /* the caller asks again */
		return sb_backend_fail(b, "the E2B sandbox %s is gone (proxy: %.200s): mount a new one",
				       e->sandbox_id, msg[0] ? msg : "HTTP 502");
	case 401:
		return sb_backend_fail(b, "envd of E2B sandbox %s rejected the access token (%.200s): remount to get a new one",
				       e->sandbox_id, msg);
	case 403:
		return -EACCES;
	case 404:
		return -ENOENT;
	case 409:
	case 429:
	case 503:
		return -EAGAIN; /* the caller retries these */
	case 504:
		return -ETIMEDOUT;
	case 507:
	case 413:
		return -ENOSPC;
	default:
		sb_warn("e2b: %s: HTTP %ld %.200s", what, status, msg);
		return -EIO;
	}
}

/* A Connect error body: its string code. A plain HTTP error from the proxy
 * or envd's middleware has a number there instead. */
static bool connect_error(const char *body, size_t len, char *code, size_t cn,
			  char *msg, size_t mn)
{
	json_t *j = json_loadb(body ? body : "", len, 0, NULL);
	const char *c = json_string_value(json_object_get(j, "code"));
	const char *m = json_string_value(json_object_get(j, "message"));
	bool is = c != NULL;
	if (is) {
		snprintf(code, cn, "%s", c);
		snprintf(msg, mn, "%s", m ? m : "");
	}
	json_decref(j);
	return is;
}

int e2b_rpc(struct sb_backend *b, const char *procedure, json_t *reqj,
	    json_t **respj)
{
	struct e2b *e = b->priv;
	if (respj)
		*respj = NULL;
	char *text = json_dumps(reqj, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	char path[128];
	snprintf(path, sizeof(path), "/%s", procedure);
	const char *hdrs[8];
	size_t k = 0;
	for (; e->envd_hdrs[k]; k++)
		hdrs[k] = e->envd_hdrs[k];
	hdrs[k++] = "Connect-Protocol-Version: 1";
	hdrs[k] = NULL;
	int rc;
	for (int attempt = 1;; attempt++) {
		double retry_after = 0;
		struct hdrs h = {0};
		struct http_req req = {
			.method = "POST", .path = path, .content_type = "application/json",
			.body = text, .body_len = strlen(text), .headers = hdrs,
			.on_header = on_header, .header_arg = &h,
			.max_response = MAX_RESPONSE, .timeout_ms = 60000,
		};
		struct http_resp resp;
		rc = http_request(&e->envd, &req, &resp);
		retry_after = h.retry_after;
		if (rc < 0) {
			sb_debug("e2b: %s: %s", procedure, resp.error);
			http_resp_free(&resp);
			/* a refused or dropped connection: the dispatcher retries
			 * where the call is safe to repeat */
			if (rc != -ETIMEDOUT && rc != -ENOMEM && rc != -ECANCELED)
				rc = -ECONNRESET;
			break;
		}
		if (resp.status == 200) {
			if (respj) {
				*respj = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
				if (!*respj)
					rc = -EPROTO;
			}
			http_resp_free(&resp);
			break;
		}
		char code[64], msg[300];
		if (connect_error(resp.body, resp.len, code, sizeof(code), msg, sizeof(msg))) {
			http_resp_free(&resp);
			if (!strcmp(code, "unauthenticated")) {
				rc = sb_backend_fail(b, "envd of E2B sandbox %s refused the call (%s): remount",
						     e->sandbox_id, msg);
				break;
			}
			rc = e2b_connect_errno(code, msg);
			if (rc == -EIO)
				sb_warn("e2b: %s: %s: %s", procedure, code, msg);
			break;
		}
		rc = e2b_envd_status(b, resp.status, resp.body, resp.len, procedure);
		http_resp_free(&resp);
		if (rc == -EAGAIN && attempt < RATE_RETRIES &&
		    backoff(retry_after > 0 ? retry_after : jitter(0.1 * (double)(1u << attempt))))
			continue;
		break;
	}
	free(text);
	return rc;
}
