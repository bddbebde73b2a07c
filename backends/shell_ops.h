/* The generic file operations every backend inherits: each runs one POSIX
 * sh command in the guest through the backend's raw exec slot. Paths are
 * passed only as positional parameters (sh -c 'script' sh "$path"), never
 * spliced into script text. Guest side uses only what both GNU coreutils
 * and busybox provide; a missing tool is named in the error. */
#ifndef SBFS_SHELL_OPS_H
#define SBFS_SHELL_OPS_H

#include "backend.h"

/* The guest's read: a guarded check that path is a regular file, its
 * identity, then a dd bounded to the window (see sb_read_stream). A
 * backend's read slot must keep each of these promises. */
int shell_read(struct sb_backend *b, const char *path, off_t off, size_t len,
	       const struct sb_read_sink *sink, size_t *got);

int shell_write_file(struct sb_backend *b, const char *path, int fd,
		     off_t size, mode_t mode);
int shell_list_dir(struct sb_backend *b, const char *path,
		   struct sb_dirlist *out);
int shell_stat(struct sb_backend *b, const char *path, struct stat *st,
	       char **link_target);
int shell_mkdir(struct sb_backend *b, const char *path, mode_t mode);
int shell_remove(struct sb_backend *b, const char *path, bool is_dir);
int shell_rename(struct sb_backend *b, const char *from, const char *to,
		 bool noreplace);
int shell_chmod(struct sb_backend *b, const char *path, mode_t mode);
int shell_truncate(struct sb_backend *b, const char *path, off_t size);
int shell_utimens(struct sb_backend *b, const char *path,
		  const struct timespec ts[2]);
int shell_symlink(struct sb_backend *b, const char *target,
		  const char *linkpath);
int shell_chown(struct sb_backend *b, const char *path, uid_t uid, gid_t gid);
/* Leaves st as it is: sb_link stats the new name. */
int shell_hardlink(struct sb_backend *b, const char *from, const char *to,
		   struct stat *st);
int shell_readlink(struct sb_backend *b, const char *path, char **target);
int shell_statfs(struct sb_backend *b, const char *path, struct statvfs *st);
/* Many removes in one guest command per chunk (chunks stay well under
 * ARG_MAX); each v[i].rc set. Returns 0 or the error of a command. */
int shell_ns_many(struct sb_backend *b, struct sb_ns_change *v, size_t n);

/* Parsers, exposed for unit tests. Input is the command's stdout. */
int shell_parse_list(const char *out, size_t len, struct sb_dirlist *list);
int shell_parse_stat_line(const char *line, size_t len, struct stat *st);
int shell_parse_statfs(const char *out, size_t len, struct statvfs *st);
/* The batch remove's report: sets every v[i].rc (0 unless a FAIL line
 * names it); -EPROTO unless it is complete and well formed. */
int shell_parse_ns_report(const char *out, size_t len,
			      struct sb_ns_change *v, size_t n);

#endif
