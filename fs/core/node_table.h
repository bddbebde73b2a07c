/* The inode table: one node per path the kernel knows or the cache holds,
 * linked into a tree (parent, children) so a rename moves a whole subtree
 * and a path is rebuilt from the parents. Inode numbers are ours and never
 * reused; hard links show as separate inodes, as in sshfs.
 *
 * Every function here expects the table lock held; the fs core releases it
 * around backend calls. */
#ifndef SBFS_NODE_TABLE_H
#define SBFS_NODE_TABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#define NODE_ROOT_INO 1

struct file_state;

/* No stat reports this device: guest_dev of an identity the mount made. */
#define NODE_DEV_OURS ((dev_t)~(dev_t)0)

struct node {
	uint64_t ino;
	uint64_t nlookup;          /* references the kernel holds */
	struct node *parent;       /* NULL for the root and detached nodes */
	char *name;
	struct node *children;     /* first child */
	struct node *next_sibling, *prev_sibling;
	struct node *ino_next;     /* ino hash chain */
	struct node *name_next;    /* (parent, name) hash chain */

	/* Cached attributes: valid while attr_gen matches the table's
	 * generation and attr_expires is in the future. */
	struct stat st;            /* st_ino is ours (ino) */
	ino_t guest_ino;           /* the sandbox's inode and device, which */
	dev_t guest_dev;           /* tell the names of a hard-linked file;
				    * NODE_DEV_OURS: an identity the mount gave
				    * the names its own link made, where the
				    * sandbox's stat tells none */
	char *link_target;
	uint64_t attr_gen;
	struct timespec attr_expires;
	bool attr_set;
	/* The sandbox's stat did not count links (nlink 0): a directory's
	 * count is then the mount's, from its listings and its own mkdir,
	 * rmdir and rename. */
	bool nlink_untold;
	/* A call told this node's owner (a listing, a stat that has one,
	 * the mount's own chown): a stat that cannot tell one keeps it. */
	bool owner_told;
	/* The sandbox may have changed the owner since (a report, a
	 * coherence point): a stat that cannot tell one asks a listing of
	 * the directory (fs_refresh_attr). */
	bool owner_stale;
	/* The mount's own mkdir, rmdir or rename changed this directory's
	 * count: the node is never released or evicted, as the count
	 * may be known nowhere else. */
	bool links_counted;
	/* The sandbox may have made or removed subdirectories here behind
	 * the mount (a command, reported or not): a count nlink_untold kept
	 * is wrong until a listing counts again (the next stat asks for
	 * one, fs_refresh_attr). */
	bool links_stale;
	/* The attributes are the mount's own guess (fs_record_new): a
	 * stat's mtime may differ from them without anything changed. */
	bool attr_made_here;

	/* Cached listing of this directory: every child that exists has a
	 * node with fresh attributes, so a name without one is absent. It is
	 * dropped when a node it named is freed: the listing then no longer
	 * vouches for that name. */
	uint64_t list_gen;
	struct timespec list_expires;
	bool list_set;
	/* sb_exec_quiet_mark from before the listing's call: while it still
	 * matches, no sbexec command can have changed the directory since. */
	uint64_t list_exec_mark;

	/* Changes the mount itself made to this directory's entries: a
	 * listing fetched while this moved may predate one of them. */
	uint64_t entry_changes;
	/* Uploads, attribute changes and queued removes of the mount's that
	 * landed in the sandbox: of this node, or of this directory's
	 * entries. A stat or listing made before one landed and answered
	 * after it tells the old state (the old size or owner, a name
	 * removed, no name yet), and the spool or queue that would have
	 * overridden it may have gone by then. */
	uint64_t landed;
	/* When the mount last changed an entry here: the directory's mtime
	 * and ctime are at least this, whatever an older stat said. */
	struct timespec entries_changed_at;

	/* Identity of the content the kernel's page cache holds. */
	struct timespec cached_mtime;
	off_t cached_size;
	bool cached_content;

	/* Two counters, never one: a directory is both a child named by
	 * its parent's listings and the parent of its own. */
	uint64_t seen_mark;        /* the parent's listing that last named this node */
	uint64_t list_mark;        /* this directory's latest listing */
	size_t list_entries;       /* size of the last listing */
	unsigned remote_lookups;   /* lookups here that asked the sandbox... */
	struct timespec remote_lookups_expire; /* ...counted until then */

	struct file_state *file;   /* spool shared by open handles */
	unsigned open_dirs;

	/* Write-back's deferred hard link (fs/link_pending.h): this name
	 * shows node alias_of, a file whose link to this name waits for
	 * its first upload (until alias_landed); on that node, alias is
	 * this name's node. Valid while each names the other (node_alias,
	 * node_shown); changed under the file's lock and this one. */
	uint64_t alias_of;
	uint64_t alias;
	bool alias_landed;
};

struct node_table {
	/* The table lock: before only the journal's commit lock in the lock
	 * order (fs/core/lock_order.h); never held across a backend call or a
	 * kernel notification. */
	pthread_mutex_t lock;
	struct node **by_ino;
	struct node **by_name;
	size_t nbuckets;
	size_t count;
	uint64_t next_ino;
	uint64_t gen;              /* bumped to invalidate every cache */
	struct node *root;
	/* Bound on count (0: none). Past it, nodes the kernel has forgotten
	 * and that hold nothing but cached attributes are evicted: their
	 * attributes are asked again when next wanted. Nodes the kernel
	 * holds, open files and directories, and spools are never evicted,
	 * so count may stay above the bound while they last. */
	size_t max_nodes;
	size_t sweep_at;           /* no full sweep from forget below this */
	uint64_t evicted;          /* nodes evicted since init */
	/* The owner shown for a node no call has told one for (the
	 * sandbox's user, as the mount shows it). */
	uid_t untold_uid;
	gid_t untold_gid;
};

int node_table_init(struct node_table *t, mode_t root_mode);
void node_table_destroy(struct node_table *t);

struct node *node_by_ino(struct node_table *t, uint64_t ino);
struct node *node_child(struct node_table *t, struct node *parent,
			const char *name);
/* Returns the existing child or a new one with no attributes. */
struct node *node_child_get(struct node_table *t, struct node *parent,
			    const char *name);
/* Moves n under new_parent as new_name; a node already there is detached. */
int node_move(struct node_table *t, struct node *n, struct node *new_parent,
	      const char *new_name);
/* Takes n out of the tree (it was removed); it stays findable by inode
 * until the kernel forgets it. */
void node_detach(struct node_table *t, struct node *n);
/* True for a node taken out of the tree: the sandbox has no name for it,
 * so its attributes are only the ones kept here. */
static inline bool node_removed(const struct node *n)
{
	return !n->parent && n->ino != NODE_ROOT_INO;
}
/* Frees n when nothing refers to it any more. Returns true if freed. */
bool node_release_if_unused(struct node_table *t, struct node *n);

/* n holds nothing but a cache: in the tree, forgotten by the kernel, no
 * spool, no open handle, no children, and its directory is not open. */
bool node_evictable(const struct node_table *t, const struct node *n);
/* The kernel has forgotten n (nlookup reached 0): past the bound, n and
 * the ancestors it leaves empty are evicted, and a full sweep runs when
 * the table has grown by a quarter of the bound since the last one. */
void node_forgotten(struct node_table *t, struct node *n);
/* Evicts evictable nodes, deepest first, until count <= target. Returns
 * how many went. Callers must not hold node pointers across it other
 * than the root. */
size_t node_table_evict(struct node_table *t, size_t target);

/* The node a name shows: an alias shows its file's node. */
struct node *node_shown(struct node_table *t, struct node *c);
/* The alias of file node n, or NULL. */
struct node *node_alias(struct node_table *t, const struct node *n);

/* The mount-relative path ("/" for the root, "/a/b" below it) in a malloc'd
 * string; NULL for a detached node or on allocation failure. */
char *node_path(const struct node *n);

bool node_attr_fresh(const struct node_table *t, const struct node *n,
		     const struct timespec *now);
void node_set_attr(struct node_table *t, struct node *n, const struct stat *st,
		   const char *link_target, const struct timespec *expires);
void node_forget_attr(struct node *n);
/* Records that the mount changed an entry of directory d now: its mtime
 * and ctime move to now, as a local file system's would. */
void node_entries_changed(struct node *d);
/* The mount added (delta 1) or removed (-1) a subdirectory of d: its
 * link count follows at once, as a local file system's does. */
void node_subdirs_changed(struct node *d, int delta);
bool node_list_fresh(const struct node_table *t, const struct node *n,
		     const struct timespec *now);

/* Calls fn for every node in the tree below (and including) n. */
void node_walk(struct node *n, void (*fn)(struct node *, void *), void *arg);

#endif
