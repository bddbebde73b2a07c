/* Private to the docker backend: a sandbox is a container on a Docker
 * Engine API (dockerd, or Podman's service).
 *   docker.c        lifecycle: create/attach, watcher, destroy, sweep
 *   docker_api.c    the engine endpoint (DOCKER_HOST...), version
 *                   negotiation, JSON calls and error text
 *   docker_exec.c   attached exec over a raw connection, kill on timeout
 *   docker_files.c  native write (archive upload) and stat (archive HEAD)
 *   docker_stream.c / docker_tar.c  wire formats, unit-tested alone */
#ifndef SBFS_BACKENDS_DOCKER_H
#define SBFS_BACKENDS_DOCKER_H

#include "backends/backend.h"
#include "transport/http.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Newest API this client speaks; older engines down to DK_API_MIN are
 * used at their own version (exec WorkingDir needs 1.35). */
#define DK_API_MAX_MAJOR 1
#define DK_API_MAX_MINOR 41
#define DK_API_MIN_MINOR 35

#define DK_CALL_TIMEOUT_MS 60000L
/* `sbfs list` waits no longer for an engine that does not answer */
#define DK_LIST_TIMEOUT_MS 5000L

struct docker {
	struct http_endpoint ep;
	char where[512];      /* the engine, as the user named it: for messages */
	char api[16];         /* "v1.41": path prefix of every call */
	bool podman;          /* Podman's service: its quirks differ */
	char cid[128];        /* the container's full id */
	unsigned uid, gid;    /* the image user's ids: owner of uploaded files */
	bool owns;            /* created by us (not attached) */
	atomic_bool stopping; /* destroy/release under way: stop the watcher */
	pthread_t watcher;
	bool watcher_started;
	int dead_pipe[2];     /* [1] closed once the container is gone: wakes execs */
	pthread_mutex_t lock;
};

/* ---- docker_api.c ---- */

/* snprintf that may truncate (messages hold engine text of any length);
 * dk_error writes the one-line reason that create/exec report. */
void dk_fmt(char *out, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define dk_error(b, ...) dk_fmt((b)->error, sizeof((b)->error), __VA_ARGS__)

/* Reads DOCKER_HOST (or -o docker_host=), DOCKER_TLS_VERIFY,
 * DOCKER_CERT_PATH, DOCKER_TLS as the docker CLI does. */
int dk_endpoint_setup(struct docker *d, const struct sb_spec *spec,
		      char *err, size_t errlen);
/* GET /version: picks the API version, notices Podman. */
int dk_negotiate(struct docker *d, char *err, size_t errlen);

struct dk_result {
	long status;      /* HTTP status, 0 on transport failure */
	json_t *json;     /* parsed 2xx body, or NULL */
	char msg[400];    /* error: the engine's "message", or the transport's */
};

/* One call: path is printf-style and gets the /vX.Y prefix; body may be
 * NULL (it is not consumed). Returns 0 when the engine answered (any
 * status: check r->status), a negative errno when it could not be reached
 * (r->msg says why). Free r with dk_result_free. */
int dk_call(struct docker *d, const char *method, const json_t *body,
	    long timeout_ms, struct dk_result *r, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
void dk_result_free(struct dk_result *r);
/* "GET" the container: 1 running, 0 stopped or gone (reason written),
 * negative errno if the engine could not be asked. */
int dk_container_running(struct docker *d, char *why, size_t whylen);
/* Marks the backend dead because the container is gone, and wakes every
 * exec waiting on it. Returns -EIO. */
int dk_fail(struct sb_backend *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- docker_exec.c ---- */

int docker_exec(struct sb_backend *b, const struct sb_exec_req *req,
		struct sb_exec_result *res);
/* exec as a given user ("0" for root, NULL for the image's) */
int dk_exec_as(struct sb_backend *b, const struct sb_exec_req *req,
	       struct sb_exec_result *res, const char *user);

/* ---- docker_files.c ---- */

int docker_write_files(struct sb_backend *b, struct sb_upload *v, size_t n);
int docker_write_file(struct sb_backend *b, struct sb_upload *u);
int docker_stat(struct sb_backend *b, const char *path, struct stat *st,
		char **link_target);

#endif
