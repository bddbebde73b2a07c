/* HTTP/1.1 over libcurl for JSON APIs; see http.h. */
#include "http.h"
#include "util/call_deadline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CONNECT_TIMEOUT_MS 10000L

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static void global_init(void)
{
	/* Not thread-safe in older libcurl: done once, before any handle. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *u)
{
	(void)h;
	(void)a;
	struct http_endpoint *ep = u;
	pthread_mutex_lock(&ep->locks[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *u)
{
	(void)h;
	struct http_endpoint *ep = u;
	pthread_mutex_unlock(&ep->locks[d]);
}

int http_endpoint_init(struct http_endpoint *ep)
{
	pthread_once(&global_once, global_init);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&ep->locks[i], NULL);
	ep->share = curl_share_init();
	if (!ep->share)
		return -ENOMEM;
	curl_share_setopt(ep->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(ep->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(ep->share, CURLSHOPT_USERDATA, ep);
	curl_share_setopt(ep->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(ep->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(ep->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	return 0;
}

void http_endpoint_free(struct http_endpoint *ep)
{
	if (ep->share)
		curl_share_cleanup(ep->share);
	ep->share = NULL;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&ep->locks[i]);
	free(ep->unix_socket);
	free(ep->base_url);
	free(ep->ca_file);
	free(ep->ca_dir);
	free(ep->cert_file);
	free(ep->key_file);
	ep->unix_socket = ep->base_url = ep->ca_file = ep->ca_dir =
		ep->cert_file = ep->key_file = NULL;
}

/* Endpoint options common to every handle. */
static void set_endpoint(CURL *h, struct http_endpoint *ep)
{
	if (ep->unix_socket)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, ep->unix_socket);
	if (ep->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, ep->ca_file);
	if (ep->ca_dir)
		curl_easy_setopt(h, CURLOPT_CAPATH, ep->ca_dir);
	if (ep->cert_file)
		curl_easy_setopt(h, CURLOPT_SSLCERT, ep->cert_file);
	if (ep->key_file)
		curl_easy_setopt(h, CURLOPT_SSLKEY, ep->key_file);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, ep->verify_peer ? 1L : 0L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, ep->verify_peer ? 2L : 0L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM */
	curl_easy_setopt(h, CURLOPT_PROXY, ""); /* an engine is never proxied */
}

struct xfer {
	const struct http_req *req;
	struct http_resp *resp;
	size_t cap;
	bool too_big;
};

static size_t on_write(char *data, size_t sz, size_t n, void *u)
{
	struct xfer *x = u;
	size_t len = sz * n;
	struct http_resp *r = x->resp;
	if (x->req->on_data) {
		int rc = x->req->on_data(x->req->data_arg, data, len);
		if (rc < 0) {
			r->body_err = rc;
			return 0;
		}
		return len;
	}
	if (r->len + len > x->req->max_response) {
		x->too_big = true;
		return 0;
	}
	if (r->len + len + 1 > x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 1024;
		while (cap < r->len + len + 1)
			cap *= 2;
		char *p = realloc(r->body, cap);
		if (!p)
			return 0;
		r->body = p;
		x->cap = cap;
	}
	memcpy(r->body + r->len, data, len);
	r->len += len;
	r->body[r->len] = '\0';
	return len;
}

static size_t on_read(char *buf, size_t sz, size_t n, void *u)
{
	struct xfer *x = u;
	ssize_t got = x->req->body_fn(x->req->body_arg, buf, sz * n);
	if (got < 0) {
		x->resp->body_err = (int)got;
		return CURL_READFUNC_ABORT;
	}
	return (size_t)got;
}

static size_t on_header(char *data, size_t sz, size_t n, void *u)
{
	struct xfer *x = u;
	size_t len = sz * n;
	const char *colon = memchr(data, ':', len);
	if (!colon || !x->req->on_header)
		return len;
	char name[128], value[8192];
	size_t nl = (size_t)(colon - data);
	if (nl >= sizeof(name))
		return len;
	memcpy(name, data, nl);
	name[nl] = '\0';
	const char *v = colon + 1, *end = data + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	size_t vl = (size_t)(end - v);
	if (vl >= sizeof(value))
		return len;
	memcpy(value, v, vl);
	value[vl] = '\0';
	x->req->on_header(x->req->header_arg, name, value);
	return len;
}

static int on_progress(void *u, curl_off_t a, curl_off_t b, curl_off_t c,
		       curl_off_t d)
{
	(void)a; (void)b; (void)c; (void)d;
	struct xfer *x = u;
	return x->req->abort_flag && atomic_load(x->req->abort_flag) ? 1 : 0;
}

static int curl_to_errno(CURLcode c)
{
	switch (c) {
	case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
	case CURLE_OUT_OF_MEMORY: return -ENOMEM;
	case CURLE_ABORTED_BY_CALLBACK: return -ECANCELED;
	default: return -EIO;
	}
}

int http_request(struct http_endpoint *ep, const struct http_req *req,
		 struct http_resp *resp)
{
	memset(resp, 0, sizeof(*resp));
	CURL *h = curl_easy_init();
	if (!h) {
		snprintf(resp->error, sizeof(resp->error), "out of memory");
		return -ENOMEM;
	}
	struct xfer x = {.req = req, .resp = resp};
	char *url = NULL;
	struct curl_slist *hdrs = NULL;
	if (asprintf(&url, "%s%s", ep->base_url, req->path) < 0) {
		curl_easy_cleanup(h);
		return -ENOMEM;
	}
	set_endpoint(h, ep);
	curl_easy_setopt(h, CURLOPT_SHARE, ep->share);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, resp->error);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
	/* a backend call's deadline bounds every request made for it */
	long timeout_ms = call_deadline_clamp_ms(req->timeout_ms);
	if (timeout_ms > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	if (req->stall_ms > 0) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
				 (req->stall_ms + 999) / 1000);
	}
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
	/* no "Expect: 100-continue" round trip before a body */
	hdrs = curl_slist_append(hdrs, "Expect:");
	char ct[128];
	if (req->content_type) {
		snprintf(ct, sizeof(ct), "Content-Type: %s", req->content_type);
		hdrs = curl_slist_append(hdrs, ct);
	}
	for (size_t i = 0; req->headers && req->headers[i]; i++)
		hdrs = curl_slist_append(hdrs, req->headers[i]);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	const char *m = req->method;
	if (req->body_fn) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, &x);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, req->body_size);
		if (strcmp(m, "PUT") != 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
	} else if (!strcmp(m, "POST")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body ? req->body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(req->body ? req->body_len : 0));
	} else if (!strcmp(m, "HEAD")) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(m, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
	}
	CURLcode c = curl_easy_perform(h);
	int rc = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
	if (c != CURLE_OK) {
		if (x.too_big)
			snprintf(resp->error, sizeof(resp->error),
				 "response larger than %zu bytes", req->max_response);
		else if (!resp->error[0])
			snprintf(resp->error, sizeof(resp->error), "%s",
				 curl_easy_strerror(c));
		rc = resp->body_err ? resp->body_err
		     : x.too_big    ? -EFBIG
				    : curl_to_errno(c);
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	free(url);
	return rc;
}

void http_resp_free(struct http_resp *resp)
{
	free(resp->body);
	resp->body = NULL;
	resp->len = 0;
}

CURL *http_connect_raw(struct http_endpoint *ep, long timeout_ms,
		       curl_socket_t *sock, char *err, size_t errlen)
{
	CURL *h = curl_easy_init();
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	char ebuf[CURL_ERROR_SIZE] = "";
	set_endpoint(h, ep);
	/* Not shared: this connection is ours alone and never returns to
	 * the pool (the peer takes it over after the response headers). */
	curl_easy_setopt(h, CURLOPT_URL, ep->base_url);
	curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	timeout_ms = call_deadline_clamp_ms(timeout_ms);
	if (timeout_ms > 0)
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
	CURLcode c = curl_easy_perform(h);
	curl_socket_t s = CURL_SOCKET_BAD;
	if (c == CURLE_OK)
		c = curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &s);
	if (c != CURLE_OK || s == CURL_SOCKET_BAD) {
		snprintf(err, errlen, "%s", ebuf[0] ? ebuf : curl_easy_strerror(c));
		curl_easy_cleanup(h);
		return NULL;
	}
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	*sock = s;
	return h;
}

char *http_query_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}
