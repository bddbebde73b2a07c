/* The spool's room, owned here: the disk and the descriptors the spools
 * take, the spools kept after their last close as a read cache, and what
 * gives way when the disk is full or the descriptors run out. One policy
 * decides what is given back (spool_give_back) and one loop gives back and
 * tries again (spool_try_again), for a read's fetch, a write and
 * write-back's journal alike; write-back adds its share through a hook.
 * As mountpoint-s3's memory limiter is shared by all its prefetchers and
 * uploaders, and rclone's VFS cache has one quota owner
 * (https://github.com/rclone/rclone, vfs/vfscache/cache.go). */
#ifndef SBFS_SPOOL_BUDGET_H
#define SBFS_SPOOL_BUDGET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs.h"

/* The read cache's bounds; a file bigger than a quarter of it is never
 * kept. */
#define FS_RETAINED_MAX_FILES 4096
#define FS_RETAINED_MAX_BYTES ((off_t)512 * 1024 * 1024)
#define FS_RETAINED_MAX_FILE_BYTES (FS_RETAINED_MAX_BYTES / 4)

void spool_budget_init(struct spool_budget *sb);
void spool_budget_destroy(struct spool_budget *sb);

/* A new spool for a file (file_state_new in the mount's spool_dir); out
 * of descriptors, the read cache gives them back and it tries once more.
 * Table lock held. NULL with errno set. */
struct file_state *spool_new(struct fs *fs, off_t size, mode_t mode,
			     bool remote_exists);

/* Drops a pin/handle reference: when nothing holds the spool and nothing
 * is pending, it is kept as a read cache (within the budget) or freed.
 * Table lock held. */
void fs_file_unref(struct fs *fs, struct node *n);
/* A reference to n's spool for use without the table lock (NULL when it
 * has none). Table lock held. */
struct file_state *fs_pin_file(struct fs *fs, struct node *n);
/* Drops it again. Table lock NOT held. */
void fs_unpin_file(struct fs *fs, uint64_t ino);
/* Takes a kept spool back into use (an open). Table lock held. */
void fs_file_reuse(struct fs *fs, struct file_state *f);
/* Frees n's spool if it is only kept as a read cache. Table lock held. */
void fs_file_forget(struct fs *fs, struct node *n);

/* Whether err is the spool running out of room: a full disk (-ENOSPC) or
 * no descriptor to spare (-EMFILE, -ENFILE). */
bool spool_full_error(int64_t err);

/* The give-back policy, for a call that met err (spool_full_error): the
 * write-back queue's removed files and every spool kept only as a read
 * cache go (both hold disk and descriptors); on a full disk, every clean
 * open spool also gives back what reads fetched into it, to a read's
 * fetch, a write and a journal copy alike: it is fetched again when
 * wanted, what is written is not (file_state_drop_fetched: each then
 * fetches a window at a time within half the room). held: the file lock
 * the caller holds, or NULL; with one held, other files' locks are only
 * tried. Whether anything changed (given back, or a spool newly fetching
 * a window at a time). */
bool spool_give_back(struct fs *fs, int err, struct file_state *held);

/* Runs attempt(arg) (bytes, a count or -errno); while it meets a full
 * spool, gives back (spool_give_back) and tries again, up to eight times
 * while something changed. With no file lock held (held NULL) under the
 * spool-full lock; with one held, without it (class 0 comes before the
 * file locks). Returns the last attempt's result. */
int64_t spool_try_again(struct fs *fs, struct file_state *held,
			int64_t (*attempt)(void *arg), void *arg);

#endif
