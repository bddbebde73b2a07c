/* The fs's locks and the one order they are taken in, outermost first.
 * A thread holding a lock takes only locks further down this list:
 *
 *   0. the spool-full lock (struct spool_budget): held by a read or a
 *      write that met a full spool while it has the spools give back and
 *      tries again (spool_try_again), so two such calls do not take back
 *      each other's room; it takes file locks;
 *   1. the paths rwlock (struct wb, writeback.c): written around a
 *      directory rename, read by a write-back batch while it uploads;
 *   2. each file's lock (struct file_state): held across the backend calls
 *      that read or upload that file. A second file lock is taken inside
 *      a first only by a rename (the renamed file's, then the replaced
 *      one's: the kernel serialises renames) and by a write-back batch,
 *      which takes every one but its first with a trylock;
 *   3. the remove queue's drain lock (struct wb_removes): a backend call
 *      made under a file lock lands the queued removes first;
 *   4. the remove queue's lock (struct wb_removes);
 *   5. the write-back queue's lock (struct wb);
 *   6. the table lock (struct node_table): never held across a backend
 *      call;
 *   7. the journal's commit lock (struct wb_journal): innermost, taken
 *      under a file lock by a close joining a group commit; never held
 *      across an fsync.
 *
 * Outside the fs: a backend's watch (local_watch.c) holds its own lock
 * while it reports a change (fs_changed), so that lock comes before all
 * of these; the fs never calls into a watch holding one of them.
 *
 * No fs lock is held while a kernel notification is sent (fs_notify_*): the
 * kernel may call back into the fs while it processes one.
 *
 * file_state_free takes a file lock under the table lock: the state is
 * unreachable by then (no handle, no pin), so no thread can hold its lock
 * and want the table. It locks the mutex directly, outside this check.
 *
 * Debug builds (SBFS_LOCK_CHECK) keep a per-thread count of what is held
 * and abort on a lock taken out of order. */
#ifndef SBFS_LOCK_ORDER_H
#define SBFS_LOCK_ORDER_H

#include <pthread.h>
#include <stdbool.h>

enum fs_lock_class {
	FS_LOCK_SPOOL_FULL,
	FS_LOCK_PATHS,
	FS_LOCK_FILE,
	FS_LOCK_RM_DRAIN,
	FS_LOCK_RM_QUEUE,
	FS_LOCK_WB_QUEUE,
	FS_LOCK_TABLE,
	FS_LOCK_JOURNAL,
	FS_LOCK_CLASSES
};

#ifdef SBFS_LOCK_CHECK
/* Aborts when c may not be taken now; trylock: cannot wait, so only a
 * lock already held of a class that does not nest is wrong. */
void fs_lock_check_take(enum fs_lock_class c, bool trylock);
void fs_lock_check_held(enum fs_lock_class c, int delta);
/* Aborts when this thread holds any fs lock (before a notification). */
void fs_lock_check_none(const char *what);
#else
static inline void fs_lock_check_take(enum fs_lock_class c, bool trylock)
{
	(void)c, (void)trylock;
}
static inline void fs_lock_check_held(enum fs_lock_class c, int delta)
{
	(void)c, (void)delta;
}
static inline void fs_lock_check_none(const char *what) { (void)what; }
#endif

static inline void fs_mutex_lock(pthread_mutex_t *m, enum fs_lock_class c)
{
	fs_lock_check_take(c, false);
	pthread_mutex_lock(m);
	fs_lock_check_held(c, 1);
}

static inline bool fs_mutex_trylock(pthread_mutex_t *m, enum fs_lock_class c)
{
	fs_lock_check_take(c, true);
	if (pthread_mutex_trylock(m) != 0)
		return false;
	fs_lock_check_held(c, 1);
	return true;
}

static inline void fs_mutex_unlock(pthread_mutex_t *m, enum fs_lock_class c)
{
	fs_lock_check_held(c, -1);
	pthread_mutex_unlock(m);
}

static inline void fs_rwlock_rdlock(pthread_rwlock_t *l, enum fs_lock_class c)
{
	fs_lock_check_take(c, false);
	pthread_rwlock_rdlock(l);
	fs_lock_check_held(c, 1);
}

static inline void fs_rwlock_wrlock(pthread_rwlock_t *l, enum fs_lock_class c)
{
	fs_lock_check_take(c, false);
	pthread_rwlock_wrlock(l);
	fs_lock_check_held(c, 1);
}

static inline void fs_rwlock_unlock(pthread_rwlock_t *l, enum fs_lock_class c)
{
	fs_lock_check_held(c, -1);
	pthread_rwlock_unlock(l);
}

#endif
