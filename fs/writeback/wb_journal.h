/* The write-back journal: what a daemon killed with uploads still queued
 * leaves behind, so nothing it accepted is dropped in silence.
 *
 * Each queued file is two names in the mount's journal folder (inside the
 * spool directory, so the spool can be hard-linked there): SEQ.data, a
 * link to the spool itself, and SEQ.path, its mount-relative path as a
 * symlink's target (a regular file when too long for one). Before close()
 * returns, the spool's data is fdatasync'd and the folder fsync'd, which
 * makes both names and the symlink durable; the closes that arrive while
 * one fsync of the folder runs share the next one (group commit). A
 * pointer in the state directory
 * (STATE/sbfs/journal/NAME, a file naming the folder) lets any later sbfs
 * start, `sbfs status` or `sbfs sweep` find the folder of a dead daemon
 * and move its files to STATE/sbfs/unsaved/NAME/ under their paths. The
 * pointer, the folder's name in the spool directory and the folders
 * above the pointer are synced when the journal is made, so each link is
 * durable before a close() is acknowledged, whichever file systems the
 * spool and the state directory are on. A journal whose pointer is gone
 * anyway is found by a search of the spool folders used
 * (STATE/sbfs/spool-dirs) and the default one. */
#ifndef SBFS_WB_JOURNAL_H
#define SBFS_WB_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct wb_journal;

/* Creates the journal of mount NAME; NULL with a one-line reason in err. */
struct wb_journal *wb_journal_open(const char *spool_dir, const char *name,
				   char *err, size_t errlen);
/* Removes the (empty) journal and its pointer: every entry was uploaded or
 * saved. keep: leave it for the next start to recover. */
void wb_journal_close(struct wb_journal *j, int keep);

/* Records spool fd as mount-relative path relpath, durably (it returns
 * once a folder fsync that began after the entry was made has succeeded);
 * returns the entry's sequence number (> 0) or -errno. The entry is the
 * spool itself (a link to it), so wb_journal_sync makes later writes
 * durable in it; or, *copied set, a copy (a spool that had an entry
 * before cannot be linked again), which later writes do not reach. */
int64_t wb_journal_add(struct wb_journal *j, int fd, const char *relpath,
		       bool *copied);
/* The entry seq's data (the spool, or its copy) opened again, read and
 * write; -1 with errno set. */
int wb_journal_reopen(struct wb_journal *j, int64_t seq);
/* Its path, for a save that cannot take the file's lock. */
void wb_journal_entry_path(struct wb_journal *j, int64_t seq, char *buf,
			   size_t len);
/* Entries added so far, and the folder fsyncs that made them durable
 * (fewer when closes arrived together). */
void wb_journal_counts(struct wb_journal *j, uint64_t *entries,
		       uint64_t *fsyncs);
/* Makes the entry's data durable again after later writes. */
int wb_journal_sync(struct wb_journal *j, int fd);
/* The file was renamed while still queued. */
int wb_journal_rename(struct wb_journal *j, int64_t seq, const char *relpath);
/* The entry's file was uploaded or is no longer wanted. */
void wb_journal_remove(struct wb_journal *j, int64_t seq);

/* Moves the files of every dead daemon's journal to STATE/sbfs/unsaved/
 * NAME/, printing one line per mount to out (and one more for a journal
 * found without its pointer). Returns the number of files saved. */
size_t wb_journal_recover(FILE *out);

/* Saves one file that never reached the sandbox as DEST + relpath
 * (relpath mount-relative, "/a/b": the mount's tree is mirrored, parents
 * made), never over an existing name (then NAME.1, NAME.2, ...). The file
 * is (srcdir, name): moved there when move, else hard-linked (name may be
 * /proc/self/fd/N); across file systems it is copied. 0, with the saved
 * path in saved_as (may be NULL), or -errno: the file is not saved. The
 * unmount save and the crash recovery both go through here. */
int unsaved_save(int srcdir, const char *name, bool move, const char *relpath,
		 const char *dest, char *saved_as, size_t len);

/* The spool folder of a mount without -o spool_dir: TMPDIR or /var/tmp. */
const char *wb_default_spool_dir(void);

/* STATE/sbfs (XDG_STATE_HOME or ~/.local/state) into buf. */
void wb_state_dir(char *buf, size_t len);

#endif
