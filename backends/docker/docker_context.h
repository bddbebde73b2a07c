/* Where the engine is when neither -o docker_host nor DOCKER_HOST says:
 * the docker CLI's context (DOCKER_CONTEXT, else the config's
 * currentContext), else the first engine socket that exists, rootless
 * ones included. */
#ifndef SBFS_DOCKER_CONTEXT_H
#define SBFS_DOCKER_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>

struct dk_context {
	char *host;     /* the engine's address, as DOCKER_HOST would give it */
	char *tls_dir;  /* the context's ca.pem, cert.pem, key.pem; NULL = none */
	bool skip_verify;
	char name[256]; /* the context's name; "" when host is a default socket */
};

/* 0 with c filled (free with dk_context_free), or -errno with one line in
 * err (a context named that does not exist, an unreadable config). */
int dk_context_find(struct dk_context *c, char *err, size_t errlen);
void dk_context_free(struct dk_context *c);

#endif
