/* A small HTTP/1.1 client over libcurl for JSON APIs: one endpoint (a unix
 * socket, plain TCP, or TCP with TLS client certificates), requests with an
 * optional JSON or streamed body, a capped response body, response headers
 * on request, and a timeout on every call. Thread-safe: every request uses
 * its own easy handle; connections and TLS sessions are shared through a
 * locked curl share, so a TLS engine is not re-handshaken per call.
 *
 * Also opens raw connections (CONNECT_ONLY) for protocols that take over
 * the connection after the response headers (Docker's attached exec). */
#ifndef SBFS_TRANSPORT_HTTP_H
#define SBFS_TRANSPORT_HTTP_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct http_endpoint {
	char *unix_socket;   /* non-NULL: talk HTTP over this socket */
	char *base_url;      /* "http://localhost" for a socket, or http(s)://host:port */
	char *ca_file, *cert_file, *key_file; /* TLS client setup, may be NULL */
	char *ca_dir;        /* hashed CA directory (CURLOPT_CAPATH), may be NULL */
	bool verify_peer;    /* TLS: verify the server's certificate and name */
	CURLSH *share;
	pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
};

/* Streams a request body: fill buf with at most len bytes, return the
 * count, 0 at the end, or a negative errno to abort. */
typedef ssize_t (*http_body_fn)(void *arg, char *buf, size_t len);
/* One response header line (name and value trimmed). */
typedef void (*http_header_fn)(void *arg, const char *name, const char *value);
/* A streamed response body, as it arrives (chunk boundaries are the
 * network's): return 0 to go on, a negative errno to abort the transfer
 * (http_request then returns it). */
typedef int (*http_data_fn)(void *arg, const char *data, size_t len);

struct http_req {
	const char *method;       /* "GET", "POST", "PUT", "DELETE", "HEAD" */
	const char *path;         /* with query string, starting with '/' */
	const char *content_type; /* for a body; NULL = none sent */
	const char *body;         /* in-memory body (len body_len), or NULL */
	size_t body_len;
	http_body_fn body_fn;     /* streamed body instead, of body_size bytes */
	void *body_arg;
	curl_off_t body_size;     /* -1: unknown (chunked) */
	http_header_fn on_header;
	void *header_arg;
	size_t max_response;      /* response bytes kept; more is an error */
	long timeout_ms;          /* whole transfer; 0 = none, use stall_ms */
	long stall_ms;            /* abort after this long without progress */
	const atomic_bool *abort_flag; /* set by another thread: abort now */
	const char *const *headers; /* extra "Name: value" lines, NULL-terminated */
	http_data_fn on_data;     /* body goes here instead of resp->body */
	void *data_arg;
};

struct http_resp {
	long status;          /* 0 if no response */
	char *body;           /* NUL-terminated, may be NULL */
	size_t len;
	int body_err;         /* the body_fn's error, if it aborted */
	char error[CURL_ERROR_SIZE]; /* transport failure, one line */
};

int http_endpoint_init(struct http_endpoint *ep);
void http_endpoint_free(struct http_endpoint *ep);

/* 0 when a response arrived (any status), negative errno for a transport
 * failure with resp->error set. Free resp with http_resp_free. */
int http_request(struct http_endpoint *ep, const struct http_req *req,
		 struct http_resp *resp);
void http_resp_free(struct http_resp *resp);

/* A connected easy handle (CONNECT_ONLY) to the endpoint, for raw HTTP on
 * it with curl_easy_send/curl_easy_recv; *sock is its socket for poll.
 * NULL on failure with err set. */
CURL *http_connect_raw(struct http_endpoint *ep, long timeout_ms,
		       curl_socket_t *sock, char *err, size_t errlen);

/* Percent-encodes s for a query string value; malloc'd. */
char *http_query_escape(const char *s);

#endif
