/* Write-back mode (-o writeback): close() returns once the file is durable
 * in the local spool and journal; a few worker threads upload queued files
 * in the background, many small files per backend call.
 *
 * Ordering: a worker holds each file's lock from the moment it reads the
 * file's path until its upload is recorded, so an unlink, a rename or a
 * truncate of that file (which take the same lock) comes wholly before or
 * wholly after it. Renaming a directory changes the paths of the files
 * below without their locks: it holds the queue's path lock for writing,
 * which workers hold for reading while they upload.
 *
 * Barriers (fsync of a file, sbexec, `sbfs sync`, unmount) wait for the
 * queue to drain; fs_flush_all then retries whatever failed, synchronously,
 * and reports it. */
#ifndef SBFS_WRITEBACK_H
#define SBFS_WRITEBACK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fs;
struct node;
struct file_state;

/* Starts the workers and the journal (fs->wb). 0, or -1 with a reason. */
int wb_start(struct fs *fs, const char *name, char *err, size_t errlen);
/* Stops the workers; the journal is removed unless keep (files that could
 * not be uploaded nor saved stay there for the next start to recover). */
void wb_stop(struct fs *fs, bool keep);

/* At close: makes f's data durable in the journal and queues its upload.
 * f is pinned or held by a handle; no lock held. Returns 0, or the error
 * of a synchronous upload when the file could not be queued. */
int wb_commit(struct fs *fs, struct node *n, struct file_state *f);
/* Waits until nothing is queued or uploading. */
void wb_drain(struct fs *fs);

/* Queues the remove of a guest path (wb_removes.h); dev and ino: the
 * sandbox file it is one of several names of, ino 0 when it is the only
 * name or a directory. 0, or negative when it must go to the sandbox now
 * (default mode, or it could not queue). */
int wb_queue_remove(struct fs *fs, const char *guest_path, bool is_dir,
		    uint64_t dev, uint64_t ino);
/* Queues a mkdir of a guest path whose name is known absent: 0, or
 * negative when it must go to the sandbox now. */
int wb_queue_mkdir(struct fs *fs, const char *guest_path, mode_t mode);
/* Lands the queued removes now (fsync, fsyncdir). */
void wb_drain_removes(struct fs *fs);
/* Lands them now if a name of the sandbox file (dev, ino) is among them:
 * before a link of it, whose answer would count that name. */
void wb_drain_removes_of(struct fs *fs, uint64_t dev, uint64_t ino);
/* Queued removes that failed since the last report: named in msg (after
 * what it holds), 0 or the first one's error. */
int wb_report_removes(struct fs *fs, char *msg, size_t msglen);

/* f's journal entry goes: f was uploaded or removed. f->lock held. */
void wb_forget(struct fs *fs, struct file_state *f);
/* f (queued, f->lock held) now lives at relpath. */
void wb_renamed(struct fs *fs, struct file_state *f, const char *relpath);

/* Held for writing around a directory rename; for reading around an
 * upload made outside the workers that computes more than one path. */
void wb_paths_write_lock(struct fs *fs);
void wb_paths_read_lock(struct fs *fs);
void wb_paths_unlock(struct fs *fs);

/* "writeback" object of `sbfs status`. No lock held. */
void wb_status(struct fs *fs, json_t *obj);

#endif
