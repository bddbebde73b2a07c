#ifndef SBFS_LIST_OWNED_H
#define SBFS_LIST_OWNED_H

#include <jansson.h>

#include "options.h"

/* The kept and orphaned sandboxes of every backend that can list its own
 * (list_owned), or only of only->backend with only's options; one object
 * each: backend, sandbox, state ("kept" or "orphaned"), started (when
 * known), mount (null), reason (an orphan's). Notes about backends
 * skipped go to stderr. *abandoned: a backend's listing still runs (it
 * missed the deadline) and reads only: free nothing of it then. */
json_t *list_owned_sandboxes(const struct mount_options *only, bool *abandoned);

#endif
