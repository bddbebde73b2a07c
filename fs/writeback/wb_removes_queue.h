/* The ordered queue of write-back's pending removes, and the set of paths
 * it covers (queued or being removed), so a stat or a listing can treat
 * them as gone before they land. Pure data: no locking, no backend.
 *
 * Paths are absolute guest paths without a trailing slash. A path is gone
 * when it or one of its ancestors is in the set. */
#ifndef SBFS_WB_REMOVES_QUEUE_H
#define SBFS_WB_REMOVES_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

struct rmq_entry {
	char *path;
	bool is_dir;
};

struct rmq_slot;

struct rmq {
	struct rmq_entry *v; /* pending, oldest first: v[head..n) */
	size_t head, n, cap;
	size_t pending_bytes; /* path bytes of the pending entries */
	struct rmq_slot **buckets;
	size_t nbuckets, nset; /* set: pending and taken, not yet done, and
				* two ancestor keys per directory among them */
};

void rmq_init(struct rmq *q);
void rmq_free(struct rmq *q);
/* Appends a copy of path; 0 or -ENOMEM (then nothing changed). */
int rmq_push(struct rmq *q, const char *path, bool is_dir);
size_t rmq_pending(const struct rmq *q);
/* Moves the oldest pending entries out (at most max, and max_bytes of
 * path unless that leaves none): *out gets a malloc'd array whose paths
 * stay in the set until rmq_done. Returns how many. */
size_t rmq_take(struct rmq *q, size_t max, size_t max_bytes,
		struct rmq_entry **out);
/* Taken entries landed (or failed): out of the set; frees v and paths. */
void rmq_done(struct rmq *q, struct rmq_entry *v, size_t n);
bool rmq_gone(const struct rmq *q, const char *path);
/* rmq_gone(dir + "/" + name) */
bool rmq_gone_in(const struct rmq *q, const char *dir, const char *name);
/* Whether a directory levels (1 or 2) below dir is queued or being
 * removed: dir's own link count (1), or a listing's counts of dir's
 * subdirectories (2), would still count it. */
bool rmq_dir_removed_below(const struct rmq *q, const char *dir, int levels);

#endif
