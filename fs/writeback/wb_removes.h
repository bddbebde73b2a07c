/* Write-back mode's queued namespace changes: unlink, rmdir of a
 * directory the fs knows is empty and mkdir of a name it knows is absent
 * return at once; they land later, in order, many per backend call
 * (sb_ns_many). A call on or below a queued mkdir's path, or a stat or
 * listing that would count or name it, lands the queue first.
 *
 * Coherence, through the dispatcher's hooks (struct sb_call_hooks): the
 * queue drains before a backend call that could conflict with or observe
 * it (rmq_call_waits: a call on a queued name or below one, a stat or
 * listing whose link counts count a queued remove, a command, a rename);
 * a stat of a queued path answers ENOENT without a call and listings leave
 * queued names out, so nothing shows a removed name again. A call refused
 * for want of space drains and is tried again. A name of a file with
 * other names is queued with the file's identity: the mount shows the
 * others one link fewer at once, any stat or listing drains first, and a
 * link of that file drains first (wbr_drain_file). A background thread
 * drains WBR_IDLE_MS after the last queued remove, or at once when
 * WBR_DRAIN_AT are waiting. A remove that fails in the sandbox keeps the
 * sandbox's file: it is logged, listed in `sbfs status`, reported by the
 * next barrier, and its parent's cached listing is dropped so the file
 * shows again. */
#ifndef SBFS_WB_REMOVES_H
#define SBFS_WB_REMOVES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wb_removes_queue.h"

#define WBR_IDLE_MS 80
#define WBR_DRAIN_AT 4096

struct fs;
struct wb_removes;

/* Starts the queue and its thread and hooks it into fs->b; NULL on
 * failure (the fs then removes synchronously). */
struct wb_removes *wbr_start(struct fs *fs);
/* Drains, unhooks and frees. */
void wbr_stop(struct wb_removes *r);

/* Queues the removal of guest path. 0, or negative when it could not be
 * queued (the caller then removes synchronously). */
int wbr_queue(struct wb_removes *r, const char *path, bool is_dir,
	      struct rmq_file linked);
/* Queues a mkdir of guest path; the same answers. */
int wbr_queue_mkdir(struct wb_removes *r, const char *path, mode_t mode);
/* What the mount knows of a directory about to be removed. */
struct wbr_dir_view {
	bool has_children;   /* the mount still has a node below it */
	bool pending_upload; /* a file below still waits for its upload */
	bool list_fresh;     /* its cached listing is fresh */
	uint64_t list_exec_mark; /* sb_exec_quiet_mark before that listing */
	uint64_t exec_mark;      /* sb_exec_quiet_mark now */
};
/* Whether its rmdir may queue: only when emptiness is certain, i.e. a
 * fresh listing whose every name was removed through the mount (those
 * removes queued ahead of it), nothing pending upload below, and no
 * sbexec command run since the listing nor running now. Otherwise the
 * sandbox must answer (ENOTEMPTY is not known). */
bool wbr_rmdir_can_queue(const struct wbr_dir_view *d);

/* Lands everything queued so far (and waits for a drain in progress). */
void wbr_drain(struct wb_removes *r);
/* wbr_drain when a name of file is queued or being removed. */
void wbr_drain_file(struct wb_removes *r, struct rmq_file file);
/* Failures not yet reported: appended to msg ("; "-separated, as far as it
 * has room), marked reported. Returns 0 or the first one's error. */
int wbr_report(struct wb_removes *r, char *msg, size_t msglen);
/* Adds its counters and failures to the status "writeback" object. */
void wbr_status(struct wb_removes *r, json_t *wb);

#endif
