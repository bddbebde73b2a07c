/* The filesystem: the fs core (inode table, caches, spool, coherence).
 * Knows the sandbox only through the backend interface and the kernel only
 * through the notifications the adapter installs (fuse_adapter.h); its
 * operations are in fs_ops.h. */
#ifndef SBFS_FS_H
#define SBFS_FS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "backends/backend.h"
#include "node_table.h"

struct fs_config {
	double attr_timeout; /* seconds attributes and entries stay cached */
	double dir_timeout;  /* seconds a directory listing stays cached */
	const char *spool_dir;
	const char *log_path;       /* shown in status */
	bool writeback;             /* -o writeback: see writeback.h */
	size_t max_nodes;           /* node cache bound; 0 = none */
	bool idmap_none;            /* -o idmap=none: no user mapping */
	/* whom the sandbox's user shows as (-o uid=, gid=); 0 in both
	 * fields of a zeroed config is root, so unset is -1 */
	long owner_uid, owner_gid;
	/* -o attr_timeout or dir_timeout given: they hold even while the
	 * backend reports changes (fs_changed) */
	bool timeouts_set;
};

/* Kernel cache notifications, installed by the adapter; unset (NULL
 * functions) without a kernel, as in unit tests. Sent with no fs lock
 * held: the kernel may call back into the fs meanwhile. */
struct fs_notify {
	void *arg;
	/* ino's attributes, and its cached pages from off for len bytes
	 * (off -1: attributes only; len 0: to the end), are stale. */
	void (*inode)(void *arg, uint64_t ino, int64_t off, int64_t len);
	/* The cached name under parent is stale. */
	void (*entry)(void *arg, uint64_t parent, const char *name,
		      bool is_dir);
};

struct file_state;
struct fs;

/* The spool's room: its fields are changed by spool_budget.c alone (and
 * give_back_queued installed by write-back). */
struct spool_budget {
	/* Spools kept after their last close, as a read cache; most recently
	 * closed first. Table lock. */
	struct file_state *kept_head, *kept_tail;
	size_t kept_count;
	off_t kept_bytes;
	/* While more spools than this exist (open or kept: each holds a
	 * descriptor), none is kept: half the open files limit; the other
	 * half is for the backend's connections and pipes, and the commands
	 * reads and sbexec run. */
	size_t fd_budget;
	/* The spool-full lock (lock_order.h, class 0): one caller at a time
	 * gives back and tries again, so two do not take back each other's
	 * room. */
	pthread_mutex_t full;
	/* Bumped by each give-back that changed something: a call that met
	 * a full spool and then waited for the spool-full lock tries again
	 * first if another gave back meanwhile. */
	atomic_uint_fast64_t given;
	/* Write-back's share, installed by wb_start: the queue lets go of the
	 * files removed while they waited. How many it let go. Takes the
	 * queue and table locks (a file lock may be held). */
	size_t (*give_back_queued)(struct fs *fs);
};

struct fs {
	struct sb_backend *b;
	struct node_table t;
	struct fs_config cfg;
	char *workdir;        /* the guest path the mount root shows */
	uid_t uid;            /* the mounting user: the sandbox's user shows */
	gid_t gid;            /* as this one unless -o idmap=none */
	struct fs_notify notify;
	struct spool_budget spool; /* the spool's room (spool_budget.h) */
	struct wb *wb;        /* write-back queue; NULL in the default mode */
	/* While the backend's watch reports every change (coherence.h:
	 * fs_changed), what the mount caches stays until a change to it is
	 * reported, not for a timeout. */
	atomic_bool watched;
	/* Changes reported so far. Table lock. A call during which one
	 * arrived may have seen the path before it: what it told expires
	 * after the timeout, as unwatched (fs_cache_expiry). */
	uint64_t changes;
	/* sb_exec_quiet_mark when the watch last settled after a command:
	 * while it is still the mark, every change any command made has been
	 * reported, so a listing not forgotten since is still all there is
	 * (fs_command_ended). */
	_Atomic uint64_t settled_exec_mark;
	/* Told when f's upload landed (f->lock held), so write-back can drop
	 * f's journal entry; installed by wb_start. The core does not call
	 * into write-back: write-back is built on it. */
	void (*upload_landed)(struct fs *fs, struct file_state *f);
	/* Told after n's upload is recorded (f->lock held, table lock not),
	 * so a link deferred until it can land (fs/link_pending.h). */
	void (*upload_recorded)(struct fs *fs, struct node *n, struct file_state *f);
	/* The last statfs answer, kept like attributes (df and stress tools
	 * ask for it constantly; its figures are advisory). Table lock. */
	struct statvfs statfs_cache;
	struct timespec statfs_expires;
	uint64_t statfs_gen;
	bool statfs_valid;
};

int fs_init(struct fs *fs, struct sb_backend *b, const struct fs_config *cfg);
void fs_destroy(struct fs *fs);
/* Raises the soft open files limit to the hard one, at most 65,536: every
 * open file and every read cache entry holds a spool descriptor, and
 * under Debian's default of 1,024 the 1,000th file read failed with
 * EMFILE. Before the sandbox starts: its processes inherit it. */
void fs_raise_open_files_limit(void);

#endif
