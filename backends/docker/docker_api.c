/* Talking to the engine: where it is (DOCKER_HOST and friends, as the
 * docker CLI reads them), which API version to speak, and one JSON call
 * with the engine's own error text kept for the user. */
#include "docker.h"
#include "docker_context.h"
#include "transport/tls_trust.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DK_RESPONSE_MAX (32u * 1024 * 1024)

void dk_fmt(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, n, fmt, ap);
	va_end(ap);
}

static const char *env_nonempty(const char *k)
{
	const char *v = getenv(k);
	return v && *v ? v : NULL;
}

static char *cert_file(const char *dir, const char *name)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	if (access(p, R_OK) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

static int endpoint_from_host(struct docker *d, const char *host,
			      const struct dk_context *ctx, char *err, size_t errlen);

/* A verified engine without a ca.pem of its own: the CAs that OpenSSL
 * tools trust, SSL_CERT_FILE and SSL_CERT_DIR (the docker CLI, in Go,
 * falls back to the system pool, which reads both). One of them must be
 * set: a remote engine's certificate is almost never from a public CA. */
static int trust_from_env(struct docker *d, const char *dir, char *err,
			  size_t errlen)
{
	struct tls_trust t;
	if (tls_trust_load(&t, NULL, "the CA that signed the engine's certificate",
			   err, errlen) < 0)
		return -EINVAL;
	if (!t.ca_file[0] && !t.ca_dir[0]) {
		dk_fmt(err, errlen,
			 "DOCKER_TLS_VERIFY is set but %.300s/ca.pem is missing or unreadable; set DOCKER_CERT_PATH, or SSL_CERT_FILE/SSL_CERT_DIR to the engine's CA",
			 dir);
		return -ENOENT;
	}
	if (t.ca_file[0] && !(d->ep.ca_file = strdup(t.ca_file)))
		return -ENOMEM;
	if (t.ca_dir[0] && !(d->ep.ca_dir = strdup(t.ca_dir)))
		return -ENOMEM;
	return 0;
}

int dk_endpoint_setup(struct docker *d, const struct sb_spec *spec,
		      char *err, size_t errlen)
{
	const char *host = spec ? sb_spec_option(spec, "docker_host") : NULL;
	if (!host || !*host)
		host = env_nonempty("DOCKER_HOST");
	struct dk_context ctx = {0};
	if (!host) {
		int rc = dk_context_find(&ctx, err, errlen);
		if (rc < 0)
			return rc;
		host = ctx.host;
	}
	int rc = endpoint_from_host(d, host, &ctx, err, errlen);
	if (rc == 0 && ctx.name[0])
		snprintf(d->where, sizeof(d->where), "%s (docker context %s)", host, ctx.name);
	dk_context_free(&ctx);
	return rc;
}

static int endpoint_from_host(struct docker *d, const char *host,
			      const struct dk_context *ctx, char *err, size_t errlen)
{
	snprintf(d->where, sizeof(d->where), "%s", host);
	if (http_endpoint_init(&d->ep) < 0) {
		dk_fmt(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (!strncmp(host, "unix://", 7)) {
		const char *path = host + 7;
		struct stat st;
		if (stat(path, &st) < 0) {
			dk_fmt(err, errlen,
				 "no Docker engine socket at %s; start dockerd (or `podman system service`) or set DOCKER_HOST",
				 host);
			return -ENOENT;
		}
		if (access(path, R_OK | W_OK) < 0) {
			dk_fmt(err, errlen,
				 "permission denied on the Docker engine socket %s; join the group that owns it (e.g. docker) or set DOCKER_HOST",
				 path);
			return -EACCES;
		}
		d->ep.unix_socket = strdup(path);
		d->ep.base_url = strdup("http://localhost");
		return d->ep.unix_socket && d->ep.base_url ? 0 : -ENOMEM;
	}
	const char *hp = NULL;
	bool https = false;
	if (!strncmp(host, "tcp://", 6))
		hp = host + 6;
	else if (!strncmp(host, "http://", 7))
		hp = host + 7;
	else if (!strncmp(host, "https://", 8))
		hp = host + 8, https = true;
	if (!hp || !*hp) {
		dk_fmt(err, errlen,
			 "DOCKER_HOST=%.300s is not supported by sbfs (unix:// or tcp:// only); for ssh://, forward the socket (ssh -L /tmp/d.sock:/var/run/docker.sock HOST) and use unix:///tmp/d.sock",
			 host);
		return -EINVAL;
	}
	/* A context's TLS files say TLS, verified unless it skips that */
	bool verify = ctx->tls_dir ? !ctx->skip_verify : env_nonempty("DOCKER_TLS_VERIFY") != NULL;
	bool tls = https || verify || ctx->tls_dir || env_nonempty("DOCKER_TLS");
	/* host:port, with the CLI's default ports; drop any path */
	size_t hl = strcspn(hp, "/");
	const char *colon = memchr(hp, ':', hl);
	if (asprintf(&d->ep.base_url, "%s://%.*s%s", tls ? "https" : "http",
		     (int)hl, hp, colon ? "" : tls ? ":2376" : ":2375") < 0) {
		d->ep.base_url = NULL;
		return -ENOMEM;
	}
	if (tls) {
		const char *dir = ctx->tls_dir ? ctx->tls_dir : env_nonempty("DOCKER_CERT_PATH");
		char def[4096];
		if (!dir) {
			snprintf(def, sizeof(def), "%s/.docker",
				 env_nonempty("HOME") ? getenv("HOME") : "/root");
			dir = def;
		}
		d->ep.ca_file = cert_file(dir, "ca.pem");
		d->ep.cert_file = cert_file(dir, "cert.pem");
		d->ep.key_file = cert_file(dir, "key.pem");
		d->ep.verify_peer = verify;
		if (verify && !d->ep.ca_file) {
			int rc = trust_from_env(d, dir, err, errlen);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* The engine's "message", or the first line of whatever it said. */
static void error_text(const char *body, size_t len, long status, char *out,
		       size_t outlen)
{
	json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
	if (m)
		dk_fmt(out, outlen, "%s", m);
	else if (body && len)
		dk_fmt(out, outlen, "%.*s", (int)strcspn(body, "\r\n"), body);
	else
		dk_fmt(out, outlen, "HTTP status %ld", status);
	json_decref(j);
	/* one line for the user */
	out[strcspn(out, "\r\n")] = '\0';
}

int dk_call(struct docker *d, const char *method, const json_t *body,
	    long timeout_ms, struct dk_result *r, const char *fmt, ...)
{
	memset(r, 0, sizeof(*r));
	char path[2048];
	int n = d->api[0] ? snprintf(path, sizeof(path), "/%s", d->api) : 0;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(path + n, sizeof(path) - (size_t)n, fmt, ap);
	va_end(ap);
	if (m < 0 || (size_t)(n + m) >= sizeof(path)) {
		dk_fmt(r->msg, sizeof(r->msg), "request path too long");
		return -ENAMETOOLONG;
	}
	char *json = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (body && !json)
		return -ENOMEM;
	struct http_req req = {
		.method = method,
		.path = path,
		.content_type = json ? "application/json" : NULL,
		.body = json,
		.body_len = json ? strlen(json) : 0,
		.max_response = DK_RESPONSE_MAX,
		.timeout_ms = timeout_ms,
	};
	struct http_resp resp;
	int rc = http_request(&d->ep, &req, &resp);
	free(json);
	r->status = resp.status;
	if (rc < 0) {
		dk_fmt(r->msg, sizeof(r->msg), "cannot reach the Docker engine at %s: %s",
			 d->where, resp.error);
		http_resp_free(&resp);
		return rc;
	}
	if (resp.status >= 200 && resp.status < 300) {
		if (resp.len)
			r->json = json_loadb(resp.body, resp.len, 0, NULL);
	} else {
		error_text(resp.body, resp.len, resp.status, r->msg, sizeof(r->msg));
	}
	http_resp_free(&resp);
	return 0;
}

void dk_result_free(struct dk_result *r)
{
	json_decref(r->json);
	r->json = NULL;
}

static int parse_version(const char *s, int *maj, int *min)
{
	return s && sscanf(s, "%d.%d", maj, min) == 2 ? 0 : -1;
}

int dk_negotiate(struct docker *d, char *err, size_t errlen)
{
	d->api[0] = '\0';
	struct dk_result r;
	int rc = dk_call(d, "GET", NULL, 15000, &r, "/version");
	if (rc < 0 || r.status != 200 || !r.json) {
		if (rc < 0)
			dk_fmt(err, errlen, "%s; is dockerd (or `podman system service`) running there? set DOCKER_HOST otherwise",
				 r.msg);
		else
			dk_fmt(err, errlen, "the Docker engine at %s did not answer GET /version (%s); is DOCKER_HOST an engine API?",
				 d->where, r.msg[0] ? r.msg : "not JSON");
		dk_result_free(&r);
		return rc < 0 ? rc : -EPROTO;
	}
	int maj = 0, min = 0;
	const char *ver = json_string_value(json_object_get(r.json, "ApiVersion"));
	json_t *comps = json_object_get(r.json, "Components");
	for (size_t i = 0; i < json_array_size(comps); i++) {
		const char *name = json_string_value(
			json_object_get(json_array_get(comps, i), "Name"));
		if (name && strstr(name, "Podman"))
			d->podman = true;
	}
	const char *forced = env_nonempty("DOCKER_API_VERSION");
	if (forced)
		ver = forced;
	if (parse_version(ver, &maj, &min) < 0) {
		dk_fmt(err, errlen, "the Docker engine at %s reports no API version", d->where);
		dk_result_free(&r);
		return -EPROTO;
	}
	if (!forced && (maj > DK_API_MAX_MAJOR ||
			(maj == DK_API_MAX_MAJOR && min > DK_API_MAX_MINOR))) {
		maj = DK_API_MAX_MAJOR;
		min = DK_API_MAX_MINOR;
	}
	if (maj < 1 || (maj == 1 && min < DK_API_MIN_MINOR)) {
		dk_fmt(err, errlen, "the Docker engine at %s speaks API %d.%d; sbfs needs 1.%d or newer (upgrade the engine)",
			 d->where, maj, min, DK_API_MIN_MINOR);
		dk_result_free(&r);
		return -EPROTO;
	}
	snprintf(d->api, sizeof(d->api), "v%d.%d", maj, min);
	dk_result_free(&r);
	return 0;
}

int dk_container_running(struct docker *d, char *why, size_t whylen)
{
	struct dk_result r;
	/* within the call's deadline: a loaded engine was seen to take over
	 * 15 s to answer an inspect */
	int rc = dk_call(d, "GET", NULL, DK_CALL_TIMEOUT_MS, &r, "/containers/%s/json", d->cid);
	if (rc < 0) {
		dk_fmt(why, whylen, "%s", r.msg);
		return rc;
	}
	if (r.status == 404) {
		dk_fmt(why, whylen, "was removed outside sbfs");
		dk_result_free(&r);
		return 0;
	}
	json_t *st = json_object_get(r.json, "State");
	if (r.status != 200 || !st) {
		dk_fmt(why, whylen, "cannot be inspected: %s", r.msg);
		dk_result_free(&r);
		return -EPROTO;
	}
	int running = json_is_true(json_object_get(st, "Running")) &&
		      !json_is_true(json_object_get(st, "Paused"));
	if (!running)
		dk_fmt(why, whylen, "%s (exit code %lld%s)",
			 json_is_true(json_object_get(st, "Paused"))
				 ? "was paused outside sbfs"
				 : "stopped: killed or exited outside sbfs",
			 (long long)json_integer_value(json_object_get(st, "ExitCode")),
			 json_is_true(json_object_get(st, "OOMKilled"))
				 ? ", out of memory"
				 : "");
	dk_result_free(&r);
	return running;
}

int dk_fail(struct sb_backend *b, const char *fmt, ...)
{
	struct docker *d = b->priv;
	char reason[SB_REASON_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	int rc = sb_backend_fail(b, "%s", reason);
	pthread_mutex_lock(&d->lock);
	if (d->dead_pipe[1] >= 0) {
		close(d->dead_pipe[1]);
		d->dead_pipe[1] = -1;
	}
	pthread_mutex_unlock(&d->lock);
	return rc;
}
