/* The requests the kernel sends the daemon, counted by kind: what the
 * kernel's caches could not answer. A figure for `sbfs status --json`
 * ("requests") and the benchmark, never a decision: relaxed atomics, one
 * add per request. */
#ifndef SBFS_FUSE_REQUESTS_H
#define SBFS_FUSE_REQUESTS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

enum fuse_request_kind {
	FRQ_LOOKUP, FRQ_FORGET, FRQ_GETATTR, FRQ_SETATTR, FRQ_READLINK,
	FRQ_MKNOD, FRQ_MKDIR, FRQ_UNLINK, FRQ_RMDIR, FRQ_SYMLINK, FRQ_RENAME,
	FRQ_LINK, FRQ_OPEN, FRQ_READ, FRQ_WRITE, FRQ_FLUSH, FRQ_RELEASE,
	FRQ_FSYNC, FRQ_OPENDIR, FRQ_READDIR, FRQ_READDIRPLUS, FRQ_RELEASEDIR,
	FRQ_FSYNCDIR, FRQ_STATFS, FRQ_SETXATTR, FRQ_GETXATTR, FRQ_LISTXATTR,
	FRQ_REMOVEXATTR, FRQ_CREATE,
	FRQ_KINDS
};

struct fuse_requests {
	_Atomic uint64_t n[FRQ_KINDS];
};

static inline void fuse_requests_count(struct fuse_requests *r,
				       enum fuse_request_kind k)
{
	atomic_fetch_add_explicit(&r->n[k], 1, memory_order_relaxed);
}

/* Sets obj's "requests": {"total": N, "<kind>": n...} (kinds seen only). */
void fuse_requests_status(struct fuse_requests *r, json_t *obj);

#endif
