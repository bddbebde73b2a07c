/* The file system's operations, one per kernel request, in the fs's own
 * terms: inode numbers in, 0 or -errno out. The FUSE adapter (fuse_ops.c)
 * decodes a request, calls one of these and replies; unit tests call them
 * directly over an in-memory backend.
 *
 *   ns_ops.c    lookup, forget, getattr, readlink, mkdir, symlink, mknod,
 *               link
 *   ns_move.c   unlink, rmdir, rename
 *   file_ops.c  open, create, read, write, flush, fsync, release, setattr
 *   dir_ops.c   opendir, readdir, releasedir, fsyncdir, statfs
 *
 * Every call that names an inode expects one the kernel holds (looked up
 * and not forgotten); a gone one answers -ENOENT. A call that hands an
 * entry back (struct fs_entry) counts one kernel reference on it, as a
 * lookup does. */
#ifndef SBFS_FS_OPS_H
#define SBFS_FS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

struct fs;

/* What the kernel is told of one name. */
struct fs_entry {
	uint64_t ino;
	struct stat attr;
	double attr_timeout;  /* 0: shown but not to be cached */
	double entry_timeout;
};

/* Notifications an operation asks for once its reply is out (the kernel
 * may be waiting on the request's pages, or updates the inode when the
 * reply comes): fs_send_later sends them. */
struct fs_later {
	uint64_t inval_attrs; /* an inode whose attributes are stale; 0: none */
	bool inval_attrs_before; /* told before the reply too (fs_send_before) */
	/* names whose kernel entries are wrong (parent 0: none); the names
	 * are the request's, valid until its handler returns */
	struct {
		uint64_t parent;
		const char *name;
	} inval_names[2];
};
void fs_send_later(struct fs *fs, const struct fs_later *later);
/* What of later must also be told before the reply. */
void fs_send_before(struct fs *fs, const struct fs_later *later);

/* ---- namespace (ns_ops.c, ns_move.c) ---- */

int fs_lookup(struct fs *fs, uint64_t parent, const char *name,
	      struct fs_entry *e);
/* The kernel dropped nlookup references on ino. */
void fs_forget(struct fs *fs, uint64_t ino, uint64_t nlookup);
/* *timeout: how long the kernel may keep st. */
int fs_getattr(struct fs *fs, uint64_t ino, struct stat *st, double *timeout);
/* The target as the mount shows it (symlink_policy.h); malloc'd. */
int fs_readlink(struct fs *fs, uint64_t ino, char **shown);
int fs_mkdir(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	     struct fs_entry *e);
int fs_symlink(struct fs *fs, const char *target, uint64_t parent,
	       const char *name, struct fs_entry *e);
/* Regular files only (EPERM otherwise). */
int fs_mknod(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	     struct fs_entry *e);
int fs_link(struct fs *fs, uint64_t ino, uint64_t newparent,
	    const char *newname, struct fs_entry *e, struct fs_later *later);
int fs_unlink(struct fs *fs, uint64_t parent, const char *name);
int fs_rmdir(struct fs *fs, uint64_t parent, const char *name);
/* flags: 0 or RENAME_NOREPLACE (anything else is EINVAL); later: what to
 * tell the kernel after the reply (NULL: nothing). */
int fs_rename(struct fs *fs, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, unsigned flags,
	      struct fs_later *later);

/* ---- files (file_ops.c) ---- */

/* An open: flags are open(2)'s; keep_cache (in: the kernel's, out: what
 * the open decided) says the kernel's cached pages are still the file's;
 * fh names the handle in later calls. */
struct fs_open {
	int flags;
	bool keep_cache;
	uint64_t fh;
};
int fs_open(struct fs *fs, uint64_t ino, struct fs_open *o);
/* Makes (locally: nothing reaches the sandbox before the first upload)
 * and opens parent/name. */
int fs_create(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	      struct fs_open *o, struct fs_entry *e);
/* Bytes read into buf (at most size), or -errno. */
ssize_t fs_read(struct fs *fs, uint64_t ino, uint64_t fh, char *buf,
		size_t size, off_t off, struct fs_later *later);
ssize_t fs_write(struct fs *fs, uint64_t ino, uint64_t fh, const char *buf,
		 size_t size, off_t off);
int fs_flush(struct fs *fs, uint64_t ino, uint64_t fh);
int fs_fsync(struct fs *fs, uint64_t ino, uint64_t fh);
void fs_release(struct fs *fs, uint64_t ino, uint64_t fh);

/* Which fields of a setattr apply. */
enum {
	FS_SET_MODE = 1 << 0,
	FS_SET_UID = 1 << 1,
	FS_SET_GID = 1 << 2,
	FS_SET_SIZE = 1 << 3,
	FS_SET_ATIME = 1 << 4,
	FS_SET_MTIME = 1 << 5,
	FS_SET_ATIME_NOW = 1 << 6,
	FS_SET_MTIME_NOW = 1 << 7,
};
/* Applies the fields of attr that to_set names; *out: the attributes
 * after. */
int fs_setattr(struct fs *fs, uint64_t ino, const struct stat *attr,
	       int to_set, struct stat *out);

/* ---- directories, the file system as a whole (dir_ops.c) ---- */

struct fs_dir;
/* A snapshot of the directory's entries, from its cached listing or a new
 * one. A new one may change the directory's own link count (later). */
int fs_opendir(struct fs *fs, uint64_t ino, struct fs_dir **d,
	       struct fs_later *later);
/* Receives one entry (off: the offset of the next); false when it did not
 * fit, which ends the call. */
typedef bool (*fs_dirent_fn)(void *ctx, const char *name,
			     const struct fs_entry *e, off_t next);
/* Hands the entries from offset off on ("." 0, ".." 1, then the
 * snapshot's) to fn. plus: with full entries, each one given counting a
 * kernel reference. */
void fs_readdir(struct fs *fs, uint64_t ino, struct fs_dir *d, off_t off,
		bool plus, fs_dirent_fn fn, void *ctx);
void fs_releasedir(struct fs *fs, uint64_t ino, struct fs_dir *d);
void fs_fsyncdir(struct fs *fs);
int fs_statfs(struct fs *fs, struct statvfs *st);

#endif
