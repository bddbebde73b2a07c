/* The FUSE low-level adapter: the only part of the fs that knows libfuse.
 * Each handler decodes a request, calls one fs operation (fs_ops.h) and
 * replies; the kernel notifications the fs core asks for go through the
 * struct fs_notify it installs. */
#ifndef SBFS_FUSE_ADAPTER_H
#define SBFS_FUSE_ADAPTER_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdbool.h>

#include "core/fs.h"
#include "fuse_requests.h"

/* The session the notifications go to; owned by the caller, alive as
 * long as the session. */
struct fs_fuse {
	struct fuse_session *se;
	bool expire_only; /* the kernel can expire a dentry without dropping it */
	struct fuse_requests requests;
};

const struct fuse_lowlevel_ops *fs_fuse_ops(void);
/* Sends fs's kernel notifications to se, once the session exists (its
 * userdata must be fs). */
void fs_fuse_attach(struct fs *fs, struct fs_fuse *ff, struct fuse_session *se);
/* Adds the requests the kernel has sent so far, by kind, to a status
 * object (nothing before fs_fuse_attach). */
void fs_fuse_status(struct fs *fs, json_t *obj);

#endif
