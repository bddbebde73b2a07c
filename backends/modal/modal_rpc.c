/* Calls to Modal: the control plane (token id/secret metadata, the SDKs'
 * retry policy with idempotency keys) and the per-sandbox task command
 * router (bearer JWT; refreshed once on UNAUTHENTICATED; notes 2.6(c)). */
#include "modal.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int modal_md_init(struct modal *m)
{
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	const char *fmt[][2] = {
		{"x-modal-client-type", MODAL_CLIENT_TYPE},
		{"x-modal-client-version", MODAL_CLIENT_VERSION},
		/* format not validated client-side (notes 1.2); say who we are */
		{"x-modal-libmodal-version", "sbfs/" SBFS_VERSION},
		{"x-modal-token-id", m->cfg.token_id},
		{"x-modal-token-secret", m->cfg.token_secret},
		{"x-modal-host", host},
	};
	size_t n = sizeof(fmt) / sizeof(fmt[0]);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(fmt[i][0]) + strlen(fmt[i][1]) + 3;
		m->api_md[i] = malloc(len);
		if (!m->api_md[i])
			return -1;
		snprintf(m->api_md[i], len, "%s: %s", fmt[i][0], fmt[i][1]);
	}
	m->api_md[n] = NULL;
	return 0;
}

void modal_md_free(struct modal *m)
{
	for (size_t i = 0; i < sizeof(m->api_md) / sizeof(m->api_md[0]); i++) {
		free(m->api_md[i]);
		m->api_md[i] = NULL;
	}
}

bool modal_is_auth_error(int code)
{
	return code == GRPC_UNAUTHENTICATED || code == GRPC_PERMISSION_DENIED;
}

const char *modal_generic_status(int status)
{
	static const char *const names[] = {
		"still running", "succeeded", "failed", "was terminated",
		"timed out", "failed to start", "failed internally",
		"reached its idle timeout", "was evicted (out of memory)",
	};
	return status >= 0 && status <= 8 ? names[status] : "ended";
}

void modal_describe(char *buf, size_t n, const char *what,
		    const struct grpc_status *st)
{
	if (st->code == GRPC_UNAUTHENTICATED)
		snprintf(buf, n, "Modal rejected the credentials (%s: %.200s): check MODAL_TOKEN_ID/MODAL_TOKEN_SECRET or run `modal token new`",
			 what, st->message);
	else if (st->code == GRPC_PERMISSION_DENIED)
		snprintf(buf, n, "Modal denied %s (%.200s): check that the token's workspace and MODAL_ENVIRONMENT are the ones you mean",
			 what, st->message);
	else if (st->code == GRPC_UNAVAILABLE && st->cert_untrusted)
		snprintf(buf, n, "Modal %s failed: the server's certificate is not trusted (%.250s): give the CA that signed it with -o ca_file=, SSL_CERT_FILE or SSL_CERT_DIR",
			 what, st->message);
	else
		snprintf(buf, n, "Modal %s failed: %s: %.300s", what,
			 grpc_code_name(st->code), st->message);
}

int modal_api(struct modal *m, const char *method, const struct pb_buf *req,
	      struct pb_buf *resp, double timeout_s, struct grpc_status *st)
{
	char path[128];
	snprintf(path, sizeof(path), MODAL_API "%s", method);
	int code = grpc_unary(m->api, path, (const char *const *)m->api_md, req,
			      timeout_s, &grpc_retry_control, resp, st);
	/* The server gates on x-modal-client-version and says so with
	 * FAILED_PRECONDITION on the first call (notes 1.2). */
	if (code == GRPC_FAILED_PRECONDITION && !m->first_call_done) {
		char msg[sizeof(st->message)];
		snprintf(msg, sizeof(msg), "Modal refuses this client as too old (%.300s): upgrade sbfs", st->message);
		snprintf(st->message, sizeof(st->message), "%s", msg);
	}
	if (code != GRPC_UNAVAILABLE)
		m->first_call_done = true;
	return code;
}

/* TaskGetCommandRouterAccess {task_id=1} -> {jwt=1, url=2} */
int modal_router_refresh(struct modal *m, struct grpc_status *st)
{
	struct pb_buf req = {0}, resp = {0};
	pb_string(&req, 1, m->task_id);
	int code = modal_api(m, "TaskGetCommandRouterAccess", &req, &resp, 30, st);
	pb_buf_free(&req);
	if (code != GRPC_OK) {
		pb_buf_free(&resp);
		return -1;
	}
	char jwt[sizeof(m->jwt)] = "", url[sizeof(m->router_url)] = "";
	struct pb_reader r = pb_reader(resp.data, resp.len);
	struct pb_field f;
	while (pb_next(&r, &f) == 1) {
		if (f.num == 1 && f.wt == PB_LEN)
			pb_strcpy(&f, jwt, sizeof(jwt));
		else if (f.num == 2 && f.wt == PB_LEN)
			pb_strcpy(&f, url, sizeof(url));
	}
	pb_buf_free(&resp);
	if (!url[0] || !jwt[0]) {
		st->code = GRPC_INTERNAL;
		snprintf(st->message, sizeof(st->message), "the router access response has no URL or token");
		return -1;
	}
	pthread_mutex_lock(&m->lock);
	int rc = 0;
	if (!m->router || strcmp(url, m->router_url) != 0) {
		/* http:// only when the control plane itself is a loopback
		 * test server, as Python allows (notes 2.6(b)) */
		char err[256];
		struct grpc_channel *ch = grpc_channel_new(
			url, grpc_url_is_loopback(m->cfg.server_url), &m->trust,
			err, sizeof(err));
		if (!ch) {
			st->code = GRPC_UNAVAILABLE;
			snprintf(st->message, sizeof(st->message), "task router: %s", err);
			rc = -1;
		} else {
			if (m->router)
				sb_warn("modal: task router moved from %s to %s", m->router_url, url);
			/* the old channel may still carry calls of other threads:
			 * it is kept until release (a rare event, small leak) */
			m->router = ch;
			snprintf(m->router_url, sizeof(m->router_url), "%s", url);
		}
	}
	if (rc == 0) {
		snprintf(m->jwt, sizeof(m->jwt), "%s", jwt);
		m->router_gen++;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int modal_router_refresh_if(struct modal *m, unsigned gen, struct grpc_status *st)
{
	pthread_mutex_lock(&m->lock);
	bool stale = m->router_gen == gen;
	pthread_mutex_unlock(&m->lock);
	return stale ? modal_router_refresh(m, st) : 0;
}

struct grpc_call *modal_router_call(struct modal *m, const char *method,
				    const struct pb_buf *req, double timeout_s,
				    grpc_msg_fn on_msg, void *arg, unsigned *gen)
{
	char path[128];
	snprintf(path, sizeof(path), MODAL_ROUTER "%s", method);
	char *auth = malloc(sizeof(m->jwt) + 32);
	if (!auth)
		return NULL;
	pthread_mutex_lock(&m->lock);
	snprintf(auth, sizeof(m->jwt) + 32, "authorization: Bearer %s", m->jwt);
	struct grpc_channel *ch = m->router;
	if (gen)
		*gen = m->router_gen;
	pthread_mutex_unlock(&m->lock);
	const char *md[] = {auth, NULL};
	struct grpc_call *c = ch ? grpc_call_new(ch, path, md, req ? req->data : NULL,
						 req ? req->len : 0, timeout_s,
						 on_msg, arg)
				 : NULL;
	free(auth); /* curl copied the header list */
	return c;
}

static int collect(void *arg, const uint8_t *msg, size_t len)
{
	struct pb_buf *resp = arg;
	resp->len = 0;
	pb_raw(resp, msg, len);
	return resp->oom ? -1 : 0;
}

static void sleep_s(double s)
{
	if (s > 0)
		usleep((useconds_t)(s * 1e6));
}

int modal_router(struct modal *m, const char *method, const struct pb_buf *req,
		 struct pb_buf *resp, double timeout_s,
		 const struct grpc_retry *policy, struct grpc_status *st)
{
	int retries = 0;
	bool refreshed = false;
	for (;;) {
		unsigned gen = 0;
		resp->len = 0;
		struct grpc_call *c = modal_router_call(m, method, req, timeout_s,
							collect, resp, &gen);
		if (!c) {
			st->code = GRPC_RESOURCE_EXHAUSTED;
			st->cert_untrusted = false;
			snprintf(st->message, sizeof(st->message), "out of memory");
			return st->code;
		}
		grpc_call_run(c, st);
		grpc_call_free(c);
		if (st->code == GRPC_OK)
			return st->code;
		if (st->code == GRPC_UNAUTHENTICATED && !refreshed) {
			refreshed = true;
			struct grpc_status rs;
			if (modal_router_refresh_if(m, gen, &rs) < 0) {
				*st = rs;
				return st->code;
			}
			continue;
		}
		if (!grpc_code_retryable(st->code) || retries >= policy->max_retries)
			return st->code;
		retries++;
		sleep_s(grpc_retry_delay(policy, retries));
	}
}
