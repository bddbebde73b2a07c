/* The filesystem: the fs core (inode table, caches, spool, coherence) and
 * the FUSE low-level adapter over it. Knows the sandbox only through the
 * backend interface. */
#ifndef SBFS_FS_H
#define SBFS_FS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <jansson.h>
#include <stdbool.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "../backends/backend.h"
#include "node_table.h"

struct fs_config {
	double attr_timeout; /* seconds attributes and entries stay cached */
	double dir_timeout;  /* seconds a directory listing stays cached */
	const char *spool_dir;
	const char *control_socket; /* value of the control xattr on the root */
	const char *log_path;       /* shown in status */
	bool writeback;             /* -o writeback: see writeback.h */
	size_t max_nodes;           /* node cache bound; 0 = none */
	bool idmap_none;            /* -o idmap=none: no user mapping */
};

struct fs {
	struct sb_backend *b;
	struct node_table t;
	struct fs_config cfg;
	char *workdir;        /* the guest path the mount root shows */
	uid_t uid;            /* the mounting user: the sandbox's user shows */
	gid_t gid;            /* as this one unless -o idmap=none */
	struct fuse_session *se;
	bool se_expire_only;  /* the kernel can expire a dentry without dropping it */
	/* Spools kept after their last close, as a read cache; most recently
	 * closed first. Table lock. */
	struct file_state *retained_head, *retained_tail;
	size_t retained_count;
	off_t retained_bytes;
	struct wb *wb;        /* write-back queue; NULL in the default mode */
	/* The last statfs answer, kept like attributes (df and stress tools
	 * ask for it constantly; its figures are advisory). Table lock. */
	struct statvfs statfs_cache;
	struct timespec statfs_expires;
	uint64_t statfs_gen;
	bool statfs_valid;
};

int fs_init(struct fs *fs, struct sb_backend *b, const struct fs_config *cfg);
void fs_destroy(struct fs *fs);
const struct fuse_lowlevel_ops *fs_fuse_ops(void);

/* Coherence points, for the control server and unmount. */
int fs_flush_all(struct fs *fs, char *msg, size_t msglen);
void fs_invalidate(struct fs *fs, const char *relpath);
void fs_status(struct fs *fs, json_t *obj);
/* What the unmount save did with the files still waiting for upload. */
struct fs_save_report {
	size_t saved, lost;
	char *saved_paths; /* mount-relative paths, ", "-joined; malloc'd */
	char *lost_paths;  /* "PATH (why)", ", "-joined; malloc'd */
};
/* Saves every file still waiting for upload under dir, at its
 * mount-relative path (the mount's tree mirrored); each is saved or named
 * in the report as lost. */
void fs_save_pending(struct fs *fs, const char *dir, struct fs_save_report *rep);
void fs_save_report_free(struct fs_save_report *rep);

#endif
