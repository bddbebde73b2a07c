/* What the operations share (fs_node.c): checks, entries, attribute
 * refreshes, paths of inodes, pinned spools and the kernel notifications.
 * Above the core (core/fs_internal.h), below the operations (fs_ops.h). */
#ifndef SBFS_FS_NODE_H
#define SBFS_FS_NODE_H

#include "core/fs_internal.h"
#include "core/spool_budget.h"
#include "fs_ops.h"

/* Kernel notifications (struct fs_notify), when a kernel listens. No fs
 * lock held. */
void fs_notify_inode(struct fs *fs, uint64_t ino, int64_t off, int64_t len);
void fs_notify_entry(struct fs *fs, uint64_t parent, const char *name,
		     bool is_dir);

#define NAME_MAX_BYTES 255
/* The sandbox's PATH_MAX, its NUL included: a longer guest path is
 * refused by every call that takes it there (path_resolution(7)). */
#define PATH_MAX_BYTES 4096

/* -EIO when the sandbox is gone: every operation but the root's getattr
 * and those that only release something fails at once. */
int fs_check_alive(const struct fs *fs);
/* 0, or why a name can never be a file's (-EINVAL, -ENAMETOOLONG). */
int fs_check_name(const char *name);
/* 0, or why name cannot be made in directory parent: fs_check_name's
 * reasons, or -ENAMETOOLONG when its guest path (the workdir in front)
 * would not fit the sandbox's PATH_MAX. Known before anything is asked or
 * queued, so write-back never accepts a name the sandbox must refuse. */
int fs_check_new_name(struct fs *fs, uint64_t parent, const char *name);
/* The entry for n as the kernel is to cache it. Table lock held. */
void fs_fill_entry(const struct fs *fs, const struct node *n,
		   struct fs_entry *e);
/* Records backend attributes on a node (mapped first). Table lock held. */
void fs_record_attr(struct fs *fs, struct node *n, uint64_t since, struct stat *st,
		    const char *link);
/* Attributes of a node made here (mkdir, create, symlink) without asking
 * the sandbox what it just did. Table lock held. */
void fs_record_new(struct fs *fs, struct node *n, mode_t mode, off_t size,
		   const char *link);
/* sb_exec_quiet_mark as of dir's cached listing: while it is still the
 * mark, no command can have changed dir since. Table lock held. */
uint64_t fs_listing_exec_mark(struct fs *fs, const struct node *dir);
/* Whether name is certainly absent from directory dir in the sandbox:
 * dir's listing is fresh, names nothing there, and no command can have
 * changed it since. What write-back may queue a change on without asking
 * (a mkdir, a link). Table lock held. */
bool fs_name_known_absent(struct fs *fs, struct node *dir, const char *name);
/* The mount changed an entry of directory ino. Table lock held. */
void fs_entries_changed(struct fs *fs, uint64_t ino);
/* Fetches fresh attributes: by name (a lookup: name under parent, n the
 * node the name held, or NULL), the answer is for whatever the name holds
 * when it arrives; by node (name and parent NULL), for n wherever it is by
 * then. Table lock held on entry and exit, dropped around the backend
 * call. The node, or NULL with *err. */
struct node *fs_refresh_attr(struct fs *fs, struct node *parent,
			     const char *name, struct node *n, int *err);
/* Guest path of inode ino / of its child name (checked); malloc'd, or
 * NULL with *err. Table lock NOT held. */
char *fs_path_of(struct fs *fs, uint64_t ino, int *err);
char *fs_child_path_of(struct fs *fs, uint64_t parent, const char *name,
		       int *err);
/* The spool of an open handle (fh), pinned; *np its node. */
struct file_state *fs_handle_file(struct fs *fs, uint64_t fh,
				  struct node **np);
/* Replaces the cached listing of directory ino with the sandbox's. Table
 * lock held, dropped around the call. -EAGAIN when the mount kept
 * changing the directory during every try (nothing is cached then). */
int fs_load_listing(struct fs *fs, uint64_t ino);
/* A link or unlink of another name changed the link count (by
 * nlink_delta) and ctime of the sandbox file (dev, ino): every node that
 * is that file follows, here and in the kernel. keep: their attributes
 * stay cached with the mount's time as ctime (an unlink changed nothing
 * else); otherwise they are asked of the sandbox next (a link, whose stat
 * the caller records for the two names it saw). Table lock NOT held. */
void fs_same_file_relinked(struct fs *fs, dev_t dev, ino_t ino,
			   int nlink_delta, bool keep);

#endif
