/* The mount's own changes to the workspace, for the watch: a report of a
 * path is news only when the path is not what the mount's own last change
 * to it left. A change is marked from before its syscalls until its result
 * is known, so a report read meanwhile waits for it instead of taking the
 * mount's half-done call for somebody else's change. */
#ifndef SBFS_OWN_CHANGES_H
#define SBFS_OWN_CHANGES_H

#include <stdbool.h>
#include <sys/stat.h>

struct own_changes;

struct own_changes *own_changes_new(void);
void own_changes_free(struct own_changes *oc);

/* rel is being changed by the mount. false: not marked (every slot is
 * busy); pass it to own_changes_end. */
bool own_changes_begin(struct own_changes *oc, const char *rel);
/* The change to rel ended. left: what it left there, or NULL with gone:
 * it removed rel (or moved it away); NULL without gone: unknown (failed),
 * so the next report of rel is news. */
void own_changes_end(struct own_changes *oc, const char *rel, bool marked,
		     const struct stat *left, bool gone);
/* Waits, at most wait_ms, while a change to rel is under way. */
void own_changes_wait(struct own_changes *oc, const char *rel, int wait_ms);
/* Whether rel as it is now (st, or NULL: gone) is just what the mount's
 * own last change to it left. A mismatch forgets that change: from then
 * on rel is somebody else's. */
bool own_changes_match(struct own_changes *oc, const char *rel, const struct stat *st);

#endif
