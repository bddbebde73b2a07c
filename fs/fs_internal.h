/* Helpers shared by the fs operations and the coherence code. */
#ifndef SBFS_FS_INTERNAL_H
#define SBFS_FS_INTERNAL_H

#include <pthread.h>
#include "file_state.h"
#include "fs.h"
#include "fs_ops.h"
#include "lock_order.h"

/* The table lock and the file locks, in the order of lock_order.h. */
static inline void table_lock(struct fs *fs)
{
	fs_mutex_lock(&fs->t.lock, FS_LOCK_TABLE);
}
static inline void table_unlock(struct fs *fs)
{
	fs_mutex_unlock(&fs->t.lock, FS_LOCK_TABLE);
}
static inline void file_lock(struct file_state *f)
{
	fs_mutex_lock(&f->lock, FS_LOCK_FILE);
}
static inline bool file_trylock(struct file_state *f)
{
	return fs_mutex_trylock(&f->lock, FS_LOCK_FILE);
}
static inline void file_unlock(struct file_state *f)
{
	fs_mutex_unlock(&f->lock, FS_LOCK_FILE);
}

/* Kernel notifications (struct fs_notify), when a kernel listens. No fs
 * lock held. */
void fs_notify_inode(struct fs *fs, uint64_t ino, int64_t off, int64_t len);
void fs_notify_entry(struct fs *fs, uint64_t parent, const char *name,
		     bool is_dir);

struct timespec fs_now(void);
/* A condition whose timed waits take deadlines from fs_now's clock. */
void fs_cond_init_monotonic(pthread_cond_t *c);
struct timespec fs_expiry(double seconds);

/* workdir joined with a mount-relative path; malloc'd. */
char *fs_guest_path(const struct fs *fs, const char *relpath);
/* Guest path of a node, or NULL (with *err set) if it has none. Table lock
 * held. */
char *fs_node_guest_path(const struct fs *fs, const struct node *n, int *err);

/* Attributes as the kernel should see them: owned by the mounting user,
 * special files shown as empty regular files (the host kernel must never
 * open a FIFO or device on the sandbox's behalf). */
void fs_map_attr(const struct fs *fs, struct stat *st);
void fs_unmap_owner(const struct fs *fs, uid_t *uid, gid_t *gid);

/* Attributes are authoritative locally while a spool exists. Table lock
 * held. */
bool fs_attr_fresh(const struct fs *fs, const struct node *n,
		   const struct timespec *now);
/* The node's attributes with the spool's size and mtime folded in. */
void fs_node_stat(const struct node *n, struct stat *st);

/* Uploads one node's dirty spool with f->lock held (table lock not) and
 * records the new attributes. */
int fs_upload_locked(struct fs *fs, struct node *n, struct file_state *f,
		     const char *guest_path);
/* Uploads one node's dirty spool. Takes the file lock; table lock NOT
 * held. The state must be pinned or held by a handle. */
int fs_upload_file(struct fs *fs, struct node *n, struct file_state *f);
/* fs_flush_all without waiting for the write-back queue: uploads every
 * dirty file now. */
int fs_flush_dirty(struct fs *fs, char *msg, size_t msglen);
/* Drops a pin/handle reference: when nothing holds the spool and nothing
 * is pending, it is kept as a read cache (within a budget) or freed.
 * Table lock held. */
void fs_file_unref(struct fs *fs, struct node *n);
/* Takes a kept spool back into use (an open). Table lock held. */
void fs_file_reuse(struct fs *fs, struct file_state *f);
/* Frees n's spool if it is only kept as a read cache. Table lock held. */
void fs_file_forget(struct fs *fs, struct node *n);

/* ---- what the operations share (fs_node.c) ---- */

#define NAME_MAX_BYTES 255

/* -EIO when the sandbox is gone: every operation but the root's getattr
 * and those that only release something fails at once. */
int fs_check_alive(const struct fs *fs);
/* 0, or why a name can never be a file's (-EINVAL, -ENAMETOOLONG). */
int fs_check_name(const char *name);
/* The entry for n as the kernel is to cache it. Table lock held. */
void fs_fill_entry(const struct fs *fs, const struct node *n,
		   struct fs_entry *e);
/* Records backend attributes on a node (mapped first). Table lock held. */
void fs_record_attr(struct fs *fs, struct node *n, struct stat *st,
		    const char *link);
/* Attributes of a node made here (mkdir, create, symlink) without asking
 * the sandbox what it just did. Table lock held. */
void fs_record_new(struct fs *fs, struct node *n, mode_t mode, off_t size,
		   const char *link);
/* The mount changed an entry of directory ino. Table lock held. */
void fs_entries_changed(struct fs *fs, uint64_t ino);
/* Fetches fresh attributes for n (or, n NULL, for the would-be child name
 * of parent). Table lock held on entry and exit, dropped around the
 * backend call. The node, or NULL with *err. */
struct node *fs_refresh_attr(struct fs *fs, struct node *parent,
			     const char *name, struct node *n, int *err);
/* Guest path of inode ino / of its child name (checked); malloc'd, or
 * NULL with *err. Table lock NOT held. */
char *fs_path_of(struct fs *fs, uint64_t ino, int *err);
char *fs_child_path_of(struct fs *fs, uint64_t parent, const char *name,
		       int *err);
/* A reference to n's spool for use without the table lock (NULL when it
 * has none). Table lock held. */
struct file_state *fs_pin_file(struct fs *fs, struct node *n);
/* Drops it again. Table lock NOT held. */
void fs_unpin_file(struct fs *fs, uint64_t ino);
/* The spool of an open handle (fh), pinned; *np its node. */
struct file_state *fs_handle_file(struct fs *fs, uint64_t fh,
				  struct node **np);
/* Replaces the cached listing of directory ino with the sandbox's. Table
 * lock held, dropped around the call. -EAGAIN when the mount kept
 * changing the directory during every try (nothing is cached then). */
int fs_load_listing(struct fs *fs, uint64_t ino);
/* Forgets the attributes of every node that is the sandbox file
 * (dev, ino), here and in the kernel: its link count and ctime changed
 * with a link or unlink of another name. Table lock NOT held. */
void fs_forget_same_file(struct fs *fs, dev_t dev, ino_t ino);

#endif
