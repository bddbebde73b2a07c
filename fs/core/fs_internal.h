/* The fs core's helpers, for what is built on it: the operations,
 * write-back and the coherence points. */
#ifndef SBFS_FS_INTERNAL_H
#define SBFS_FS_INTERNAL_H

#include <pthread.h>
#include "file_state.h"
#include "fs.h"
#include "lock_order.h"
#include "fs/writeback/wb_park.h"

/* The table lock and the file locks, in the order of lock_order.h. */
static inline void table_lock(struct fs *fs)
{
	fs_mutex_lock(&fs->t.lock, FS_LOCK_TABLE);
}
static inline void table_unlock(struct fs *fs)
{
	fs_mutex_unlock(&fs->t.lock, FS_LOCK_TABLE);
}
/* A closed file pending upload holds no descriptor (wb_park.h): taking
 * its lock opens its spool again, and letting go closes it. */
static inline void file_lock(struct file_state *f)
{
	fs_mutex_lock(&f->lock, FS_LOCK_FILE);
	if (f->fd < 0)
		wb_unpark(f);
}
static inline bool file_trylock(struct file_state *f)
{
	if (!fs_mutex_trylock(&f->lock, FS_LOCK_FILE))
		return false;
	if (f->fd < 0)
		wb_unpark(f);
	return true;
}
static inline void file_unlock(struct file_state *f)
{
	if (f->wb_journal)
		wb_park(f, 0);
	fs_mutex_unlock(&f->lock, FS_LOCK_FILE);
}

struct timespec fs_now(void);
/* fs_now's clock is CLOCK_MONOTONIC: its deadlines suit the conditions
 * made by cond_init_monotonic (util/timespec.h). */
struct timespec fs_expiry(double seconds);
/* How long a watched mount keeps what no reported change touched: for
 * good, in effect (a year). */
#define FS_WATCHED_TTL_S (365.0 * 24 * 3600)

/* workdir joined with a mount-relative path; malloc'd. */
char *fs_guest_path(const struct fs *fs, const char *relpath);
/* Guest path of a node, or NULL (with *err set) if it has none. Table lock
 * held. */
char *fs_node_guest_path(const struct fs *fs, const struct node *n, int *err);

/* Attributes as the kernel should see them: owned by the mounting user,
 * special files shown as empty regular files (the host kernel must never
 * open a FIFO or device on the sandbox's behalf). */
void fs_map_attr(const struct fs *fs, struct stat *st);
/* When what a backend call told expires: ttl seconds from now; while the
 * mount is watched, not before a change is reported, if none was since
 * `since` (fs->changes before the call). Table lock held. */
struct timespec fs_cache_expiry(const struct fs *fs, double ttl, uint64_t since);
void fs_unmap_owner(const struct fs *fs, uid_t *uid, gid_t *gid);

/* A change of the mount's to n landed in the sandbox (struct node,
 * landed): a stat of n or a listing of its directory answered after it
 * may tell the state before. Table lock held. */
void fs_landed(struct node *n);

/* A file with more than one name: a write, truncate or chmod through
 * any other name changes what this one shows, so its attributes are
 * never taken from the cache (nor cached by the kernel). Table lock
 * held. */
bool fs_attr_linked(const struct node *n);
/* Whether n is a name of the sandbox file (dev, ino): not a directory,
 * with that identity (attributes forgotten still keep it). */
bool fs_node_names_file(const struct node *n, dev_t dev, ino_t ino);
/* A change went through n, a name of a file with several (a truncate, a
 * chmod, an upload): the other names' attributes, served uncached while
 * the file has several but kept once one name is left, are asked again.
 * Table lock held. */
void fs_other_names_changed(struct fs *fs, struct node *n);
/* Attributes are authoritative locally while a spool exists. Table lock
 * held. */
bool fs_attr_fresh(const struct fs *fs, const struct node *n,
		   const struct timespec *now);
/* The node's attributes with the spool's size and mtime folded in. */
void fs_node_stat(const struct node *n, struct stat *st);

/* Uploads one node's dirty spool with f->lock held (table lock not) and
 * records it (fs_record_upload). */
int fs_upload_locked(struct fs *fs, struct node *n, struct file_state *f,
		     const char *guest_path);
/* What the mount knows once f's upload landed: f is clean, n shows its
 * size (and, mtime_set: the sandbox has f's mtime too, so n's attributes
 * stay cached). The one place an upload is recorded, synchronous or
 * queued. f->lock held, table lock not. */
void fs_record_upload(struct fs *fs, struct node *n, struct file_state *f,
		      bool mtime_set);
/* Uploads one node's dirty spool. Takes the file lock; table lock NOT
 * held. The state must be pinned or held by a handle. */
int fs_upload_file(struct fs *fs, struct node *n, struct file_state *f);

#endif
