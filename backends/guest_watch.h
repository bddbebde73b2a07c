/* Change notifications from inside the sandbox, for a backend whose
 * sandbox runs Linux on the host's architecture and whose exec streams
 * stdin and stdout while the command runs (docker): the mount places its
 * own watcher, sbfs-guest-watch (guest/), in the sandbox with the
 * backend's native upload, runs it for as long as the watch lasts, and
 * turns what it prints into the sink's calls (backend.h, watch_start).
 * It needs nothing of the image: it is linked statically, and removes
 * its own file once it runs.
 *
 * settle asks the watcher, through its stdin, to answer once every event
 * queued before the question is out: the command whose end settles made
 * its changes before, so their events are queued by then (inotify queues
 * them in the syscall that made them), and one round trip through the
 * running exec, not a new call, makes them all known. */
#ifndef SBFS_GUEST_WATCH_H
#define SBFS_GUEST_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "backend.h"

/* The backend's three watch slots (backend.h), as they are: the watch
 * lives in b->guest_watch.
 * start places and starts the watcher, and waits until the whole
 * workspace is watched: 0, or -errno (logged, one line: why the sandbox is
 * not watched).
 * settle: 0 once every change made before the call is delivered to the
 * sink; -EIO once the watch is lost, -ETIMEDOUT when the watcher did not
 * answer in time (the mount then forgets what it cached).
 * stop ends it: no sink call runs after it returns. */
int guest_watch_start(struct sb_backend *b, const struct sb_watch_sink *sink);
int guest_watch_settle(struct sb_backend *b);
void guest_watch_stop(struct sb_backend *b);

/* ---- the watcher's output, one record at a time (unit-tested) ---- */

enum gw_kind {
	GW_READY,    /* the workspace is watched */
	GW_CHANGED,  /* path changed; st: what lstat says of it now */
	GW_GONE,     /* path changed and is gone */
	GW_OVERFLOW, /* events were lost */
	GW_SETTLED,  /* token: the settle question answered */
	GW_FATAL,    /* text: why the watch ended */
};

struct gw_record {
	enum gw_kind kind;
	const char *text; /* the path, the reason; points into the record */
	unsigned long long token;
	struct stat st;
};

/* Parses one record: len bytes, followed by the NUL that ended it (text
 * points into it, up to that NUL). 0, or -EPROTO for anything the watcher
 * does not say. */
int gw_parse_record(const char *rec, size_t len, struct gw_record *out);

#endif
