/* The ordered queue of write-back's pending removes and mkdirs, and the
 * set of paths it covers (queued or landing), so a stat or a listing can
 * treat a removed path as gone before it lands, and a call on or below a
 * made one waits for it. Pure data: no locking, no backend.
 *
 * Paths are absolute guest paths without a trailing slash. A path is gone
 * when it or one of its ancestors is removed and none is made. */
#ifndef SBFS_WB_REMOVES_QUEUE_H
#define SBFS_WB_REMOVES_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "backends/backend.h"

/* The sandbox file a removed name was one of several names of: the other
 * names' link counts still count the name until its remove lands. */
struct rmq_file {
	uint64_t dev, ino;
};

struct rmq_entry {
	char *path;
	bool is_dir;
	bool make;            /* a mkdir (with mode), not a remove */
	mode_t mode;
	struct rmq_file file; /* ino 0: the name was the file's only one */
};

struct rmq_slot;

struct rmq {
	struct rmq_entry *v; /* pending, oldest first: v[head..n) */
	size_t head, n, cap;
	size_t pending_bytes; /* path bytes of the pending entries */
	struct rmq_slot **buckets;
	size_t nbuckets, nset; /* set: pending and taken, not yet done, and
				* two ancestor keys per directory among them */
	size_t nmade;          /* mkdirs pending and taken */
	struct rmq_file *files; /* of the entries pending and taken that
				 * name a file with other names */
	size_t nfiles, files_cap;
};

void rmq_init(struct rmq *q);
void rmq_free(struct rmq *q);
/* Appends a copy of path; 0 or -ENOMEM (then nothing changed). */
int rmq_push(struct rmq *q, const char *path, bool is_dir);
/* The same for a name of file, which has other names. */
int rmq_push_linked(struct rmq *q, const char *path, struct rmq_file file);
/* Appends a mkdir of path with mode; 0 or -ENOMEM. */
int rmq_push_mkdir(struct rmq *q, const char *path, mode_t mode);
size_t rmq_pending(const struct rmq *q);
/* Moves the oldest pending entries out (at most max, and max_bytes of
 * path unless that leaves none): *out gets a malloc'd array whose paths
 * stay in the set until rmq_done. Returns how many. */
size_t rmq_take(struct rmq *q, size_t max, size_t max_bytes,
		struct rmq_entry **out);
/* Taken entries landed (or failed): out of the set; frees v and paths. */
void rmq_done(struct rmq *q, struct rmq_entry *v, size_t n);
bool rmq_gone(const struct rmq *q, const char *path);
/* Whether path is a queued (or landing) mkdir's, or below one. */
bool rmq_made(const struct rmq *q, const char *path);
/* rmq_gone(dir + "/" + name) */
bool rmq_gone_in(const struct rmq *q, const char *dir, const char *name);
/* Whether a directory levels (1 or 2) below dir is queued or being
 * removed: dir's own link count (1), or a listing's counts of dir's
 * subdirectories (2), would still count it. */
bool rmq_dir_removed_below(const struct rmq *q, const char *dir, int levels);
/* Whether a name of file is queued or being removed. */
bool rmq_names_file(const struct rmq *q, struct rmq_file file);

/* Whether the queue must land before a call of this kind on path (and
 * to, its second path; NULL: none or unknown) goes to the sandbox:
 *   any call on or below a queued mkdir's path, and a stat or listing
 *   of its parent (which counts it, or names it) or a listing of its
 *   grandparent (which counts the parent's subdirectories);
 *   a stat or listing whose answer counts a queued remove: a link count
 *   of a directory (rmq_dir_removed_below) or of a file with other names
 *   (any stat or listing while one is queued: which names are its other
 *   ones the sandbox alone knows);
 *   a call that makes or writes a name the queue removes or is below one
 *   (write, mkdir, symlink, the new name of a link), or that acts on one
 *   (chmod, truncate, utimens, chown, read, readlink);
 *   everything else: a command, a rename (a directory moved with removes
 *   queued below it), a remove that is not queued, statfs.
 * Calls on other names land in any order: none can observe another's
 * remove, but for the space it frees (struct sb_call_hooks, drain). A
 * link of a file with a name queued is the caller's to land first
 * (rmq_names_file): its answer counts that name. */
bool rmq_call_waits(const struct rmq *q, enum sb_call kind, const char *path,
		    const char *to);

#endif
