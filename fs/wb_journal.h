/* The write-back journal: what a daemon killed with uploads still queued
 * leaves behind, so nothing it accepted is dropped in silence.
 *
 * Each queued file is two names in the mount's journal folder (inside the
 * spool directory, so the spool can be hard-linked there): SEQ.data, a
 * link to the spool itself, and SEQ.path, its mount-relative path. Both
 * are fsync'd before close() returns. A pointer in the state directory
 * (STATE/sbfs/journal/NAME, a symlink to the folder) lets any later sbfs
 * start, `sbfs status` or `sbfs sweep` find the folder of a dead daemon
 * and move its files to STATE/sbfs/unsaved/NAME/ under their paths. */
#ifndef SBFS_WB_JOURNAL_H
#define SBFS_WB_JOURNAL_H

#include <stdint.h>
#include <stdio.h>

struct wb_journal;

/* Creates the journal of mount NAME; NULL with a one-line reason in err. */
struct wb_journal *wb_journal_open(const char *spool_dir, const char *name,
				   char *err, size_t errlen);
/* Removes the (empty) journal and its pointer: every entry was uploaded or
 * saved. keep: leave it for the next start to recover. */
void wb_journal_close(struct wb_journal *j, int keep);

/* Records spool fd as mount-relative path relpath, durably; returns the
 * entry's sequence number (> 0) or -errno. */
int64_t wb_journal_add(struct wb_journal *j, int fd, const char *relpath);
/* Makes the entry's data durable again after later writes. */
int wb_journal_sync(struct wb_journal *j, int fd);
/* The file was renamed while still queued. */
int wb_journal_rename(struct wb_journal *j, int64_t seq, const char *relpath);
/* The entry's file was uploaded or is no longer wanted. */
void wb_journal_remove(struct wb_journal *j, int64_t seq);

/* Moves the files of every dead daemon's journal to STATE/sbfs/unsaved/
 * NAME/, printing one line per mount to out. Returns the number of files
 * saved. */
size_t wb_journal_recover(FILE *out);

/* STATE/sbfs (XDG_STATE_HOME or ~/.local/state) into buf. */
void wb_state_dir(char *buf, size_t len);

#endif
