/* The open-file spool: a local unlinked temp file per open file, shared by
 * every handle on that inode. Reads fill it by windows fetched from the
 * sandbox (capped, in-guest); writes land in it and are uploaded whole on
 * flush/fsync through the backend's native write. */
#ifndef SBFS_FILE_STATE_H
#define SBFS_FILE_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "backends/backend.h"
#include "range_set.h"
#include "readahead.h"

struct wb_journal;

struct file_state {
	/* The file lock: after the paths rwlock, before the queue locks and
	 * the table lock (fs/core/lock_order.h); held across this file's backend
	 * calls. */
	pthread_mutex_t lock;
	int fd;                  /* the spool */
	struct range_set present;/* spool bytes that hold the file's data */
	off_t size;              /* the file's current size */
	mode_t mode;             /* permission bits, used when uploading new */
	struct timespec mtime;   /* last local change, shown while dirty */
	struct timespec ctime;   /* last local change of data or times, too */
	/* Times a utimens asked while the content waited for its upload
	 * (write-back; UTIME_OMIT for one not asked): the upload carries
	 * the mtime, and what it could not set follows it
	 * (file_state_upload_times). A later write supersedes the mtime. */
	struct timespec times_wanted[2];
	bool times_wanted_set;
	struct timespec remote_mtime; /* mtime of the sandbox copy cached */
	/* After an upload the sandbox's mtime for our content is not known
	 * yet: the first attributes the sandbox reports with the same size
	 * name it, unless an sbexec or refresh came in between (adoptable is
	 * then cleared: the sandbox may have rewritten the file). */
	bool identity_known;
	atomic_bool adoptable;
	/* Set by a coherence point (sbexec, refresh): the sandbox may have
	 * rewritten the file, even within its mtime's granularity (a whole
	 * second on some backends), so a clean spool's content goes. */
	atomic_bool invalidated;
	/* Set instead, while the file is open, by a change the watch
	 * reported: the open reads go on with the version they read, each
	 * fetch checked against it window by window as unwatched (dropped
	 * between the FUSE requests of one read(), the spool would splice
	 * two versions into it); the next open drops it. Table lock. */
	bool reported_while_open;
	/* Kept after the last close as a read cache (fs_core.c's LRU). */
	struct node *owner;
	struct file_state *lru_prev, *lru_next;
	bool retained;
	/* Local changes not yet uploaded. While set, the spool's size and
	 * mtime are the file's; while clear, the node's cached attributes are,
	 * and the spool is a cache of the sandbox copy named by remote_mtime
	 * and size. Read without f->lock by attribute lookups: atomic. */
	atomic_bool dirty;
	bool written;            /* written or truncated since opened */
	bool remote_exists;      /* the sandbox has the file */
	bool unlinked;           /* removed while open: never uploaded */
	int upload_error;        /* last failed upload (-errno), 0 if none */
	unsigned handles;        /* open handles (the node holds the state) */
	unsigned pins;           /* coherence passes using it unlocked */
	off_t seq_next;          /* where a sequential reader reads next */
	size_t window;           /* current read window */
	size_t window_cap;       /* its bound on this link (readahead.h) */
	struct read_link link;   /* what its windows showed of the link */
	/* A fetch met a full spool disk (file_state_drop_fetched): reads of
	 * this file fetch one window at a time, at most half the room left. */
	bool spool_tight;
	/* Fetches under way (readahead.h): they stream into the spool
	 * without f->lock, each into a range nothing else writes until it
	 * is done; `fetched` is signalled as each one ends. */
	struct range inflight[READ_INFLIGHT_MAX];
	size_t n_inflight;
	pthread_cond_t fetched;
	/* Bumped whenever the spool's fetched content is dropped: a fetch
	 * started before stops writing and its bytes are not used. */
	atomic_uint_fast64_t content_gen;
	/* The guest's identity line of the sandbox copy the fetched bytes
	 * came from ("" before the first fetch): every window must show the
	 * same, or the copy changed in between and the spool is dropped
	 * rather than spliced. */
	char ident[SB_IDENT_MAX];
	/* The sandbox's copy the open handles started from: the node's
	 * size and mtime when the first of them opened, or those of the
	 * mount's own upload since (opened_known: one of them is; not the
	 * inode, which the node learns late after an upload that replaced
	 * the file). A shared mapping's pages, and so what is written through
	 * them, are of that copy: once the sandbox holds another (replaced
	 * or rewritten under them), a write is refused, never spliced into
	 * it (file_state_hold_whole). */
	bool opened_known;
	off_t opened_size;
	struct timespec opened_mtime;
	/* A fetch found the sandbox's copy different from the attributes the
	 * node had: op_read makes them be asked again. */
	bool remote_changed;
	bool warned_changing;    /* "keeps changing" logged once per spool */
	/* Write-back mode (writeback.c): the journal entry holding this
	 * spool and whether the journal holds its current content durably
	 * (f->lock; every write and truncate clears it, so a close after an
	 * unchanged one costs no fdatasync), and whether the upload queue
	 * holds it (table lock). wb_copied: the entry is a copy of the
	 * spool, not the spool (wb_journal_add): what was written since is
	 * not in it. */
	int64_t wb_seq;
	bool wb_durable;
	bool wb_copied;
	bool wb_queued;
	/* The journal holding the entry: a closed pending file's fd is -1
	 * while the entry holds its content (wb_park.h). */
	struct wb_journal *wb_journal;
};

/* Spools that exist now, in this process: each holds a descriptor. */
size_t file_state_live(void);
/* A new state with an empty spool in dir. size is the remote size (0 for
 * a new or truncated file). NULL with errno set on failure. */
struct file_state *file_state_new(const char *spool_dir, off_t size,
				  mode_t mode, bool remote_exists);
void file_state_free(struct file_state *f);
/* Whether f is a whole, clean copy of the sandbox's file, named by its
 * identity (remote_mtime and size): what another name of that file may
 * start from. f->lock held. */
bool file_state_cloneable(const struct file_state *f);
/* A new state holding a copy of f's content (file_state_cloneable), of
 * the same sandbox copy, for another name of the file (a hard link). f->lock
 * held. NULL with errno set on failure. */
struct file_state *file_state_clone(const struct file_state *f,
				    const char *spool_dir);

/* The following expect f->lock held. guest_path is where the file lives
 * in the sandbox. */

/* Copies up to len bytes at off into buf, fetching missing windows from
 * the sandbox (and, on sequential access, the next ones concurrently).
 * What one call returns is of one version of the sandbox's file: a change
 * seen between windows drops what was fetched and reads again (-EIO if the
 * file keeps changing, or if it changed under local unsaved writes).
 * Returns bytes read or -errno. */
ssize_t file_state_read(struct file_state *f, struct sb_backend *b,
			const char *guest_path, char *buf, size_t len,
			off_t off);
/* Before a local change of a clean spool of a file the sandbox has (a
 * write; a truncate keeping keep bytes): fetches what the spool lacks of
 * them now, so that a dirty spool is always whole and its upload never
 * fetches from a copy the sandbox changed since (that upload is then the
 * host's whole version: last upload wins). -EIO when the sandbox's copy
 * is no longer the one the open handles started from (a stat says so:
 * size, whole-second mtime), so a write made on the
 * old copy is never spliced into the new one (a stat with no answer is
 * no proof: the write goes on); other -errno as a read's.
 * f->lock held. */
int file_state_hold_whole(struct file_state *f, struct sb_backend *b,
			  const char *guest_path, off_t keep);
/* The first handle of f opened, the node or the sandbox showing st
 * (NULL: not known): the copy its writes are made on (for a dirty spool,
 * its upload's). f->lock held. */
void file_state_opened(struct file_state *f, const struct stat *st);
/* The mount set the sandbox's copy's mtime (utimens; NULL: "now", by the
 * sandbox's clock, not known here): still the copy the handles opened.
 * f->lock held. */
void file_state_mtime_set_here(struct file_state *f, const struct timespec *mtime);
ssize_t file_state_write(struct file_state *f, const char *buf, size_t len,
			 off_t off);
int file_state_truncate(struct file_state *f, off_t size);
/* A clean spool gives back the disk space of what reads fetched, and its
 * reads fetch a window at a time from then on (a full spool disk: a file
 * bigger than its room is read a part at a time). f->lock held; waits for
 * the fetches in flight. 0, or -ENOSPC when it held nothing it could give
 * (dirty: local writes live only there). */
int file_state_drop_fetched(struct file_state *f);
/* Drops the cached content when the sandbox's copy is no longer the one
 * the spool holds (a clean spool only). from_sandbox: the attributes are
 * the sandbox's own, not the ones recorded at our upload. */
void file_state_revalidate(struct file_state *f, off_t size,
			   const struct timespec *mtime, bool from_sandbox);
/* Uploads if dirty: fetches whatever part of the file the spool lacks,
 * then one write_file call, asking for the spool's mtime. Leaves dirty
 * set: the caller clears it once the node shows the uploaded size and
 * mtime. On failure the data stays. *mtime_set: the sandbox's copy got
 * that mtime (the backend said so), or the whole second of it, which is
 * then the file's. */
int file_state_upload(struct file_state *f, struct sb_backend *b,
		      const char *guest_path, bool *mtime_set);
/* The spool at the file's size (a hole at the end reads as zeroes),
 * truncated only where it differs, and keeping the times a utimens put
 * on it (a journal entry or a saved copy is the spool). 0 or -errno. */
int file_state_fit_spool(struct file_state *f);
/* A utimens (ts as utimensat's) of f while its content waits for its
 * upload: applied to the spool and remembered for the upload, with no
 * call now. f->lock held. 0 or -errno. */
int file_state_set_times(struct file_state *f, const struct timespec ts[2]);
/* After f's upload to guest_path landed (mtime_set: it gave f->mtime):
 * the times file_state_set_times remembered that it did not give, in one
 * utimens call. 0, or -errno: the sandbox's copy has the content without
 * them, and f stays dirty to try again. */
int file_state_upload_times(struct file_state *f, struct sb_backend *b,
			    const char *guest_path, bool mtime_set);
/* The two halves of file_state_upload around the write call, for batch
 * uploads: prepare fetches what the spool lacks and sizes it; done records
 * a successful upload of u, with the mtime the backend gave it
 * (u->mtime_set), or its failure (r < 0). */
int file_state_upload_prepare(struct file_state *f, struct sb_backend *b,
			      const char *guest_path);
void file_state_upload_done(struct file_state *f, const struct sb_upload *u, int r);
/* How many files have reached the sandbox for the first time so far: a
 * directory listing fetched while this moved may lack one of them. */
uint64_t file_state_first_uploads(void);
/* True when the spool holds the whole file (nothing to fetch). */
bool file_state_complete(const struct file_state *f);

#endif
