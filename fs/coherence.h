/* The coherence points (coherence.c), for the control server and
 * unmount. */
#ifndef SBFS_COHERENCE_H
#define SBFS_COHERENCE_H

#include <jansson.h>
#include <stddef.h>
#include <sys/stat.h>

#include "core/fs.h"

/* Drains the write-back queue, then uploads every dirty file: 0, or the
 * first error with the files that failed named in msg. */
int fs_flush_all(struct fs *fs, char *msg, size_t msglen);
/* fs_flush_all without waiting for the write-back queue (a rename of a
 * directory holding queued files). */
int fs_flush_dirty(struct fs *fs, char *msg, size_t msglen);
void fs_invalidate(struct fs *fs, const char *relpath);
/* The backend's watch (sb_watch_sink) reports relpath changed, st being
 * what it is now (NULL: gone; relpath NULL: anything may have changed).
 * Forgets that path, what is below it and its parent's listing, and
 * tells the kernel; nothing when st shows what the mount already shows
 * (its own change coming back). */
void fs_changed(struct fs *fs, const char *relpath, const struct stat *st);
/* An sbexec command ended: the changes it made are forgotten (where the
 * backend watches, once they are all reported; elsewhere everything
 * cached). */
void fs_command_ended(struct fs *fs);
/* The watch ended: what is cached expires after the timeouts again. */
void fs_watch_lost(struct fs *fs);
void fs_status(struct fs *fs, json_t *obj);
/* What the unmount save did with the files still waiting for upload. */
struct fs_save_report {
	size_t saved, lost;
	char *saved_paths; /* mount-relative paths, ", "-joined; malloc'd */
	char *lost_paths;  /* "PATH (why)", ", "-joined; malloc'd */
};
/* Saves every file still waiting for upload under dir, at its
 * mount-relative path (the mount's tree mirrored); each is saved or named
 * in the report as lost. */
void fs_save_pending(struct fs *fs, const char *dir, struct fs_save_report *rep);
void fs_save_report_free(struct fs_save_report *rep);

#endif
