/* The FUSE adapter: a table of handlers, each decoding a request, calling
 * one fs operation (fs_ops.h) and replying once, at its end. What the
 * fs does, and every lock, is behind those calls. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs_ops.h"
#include "fuse_adapter.h"

static struct fs *req_fs(fuse_req_t req) { return fuse_req_userdata(req); }

/* Counts one request of kind k (status --json "requests"). */
static void counted(fuse_req_t req, enum fuse_request_kind k)
{
	struct fs_fuse *ff = req_fs(req)->notify.arg;
	if (ff)
		fuse_requests_count(&ff->requests, k);
}

static void entry_param(const struct fs_entry *e, struct fuse_entry_param *p)
{
	memset(p, 0, sizeof *p);
	p->ino = e->ino;
	p->attr = e->attr;
	p->attr_timeout = e->attr_timeout;
	p->entry_timeout = e->entry_timeout;
}

static void reply_entry(fuse_req_t req, int err, const struct fs_entry *e)
{
	struct fuse_entry_param p;
	if (err < 0) {
		fuse_reply_err(req, -err);
		return;
	}
	entry_param(e, &p);
	fuse_reply_entry(req, &p);
}

/* ---- notifications (struct fs_notify) ---- */

static void notify_inode(void *arg, uint64_t ino, int64_t off, int64_t len)
{
	struct fs_fuse *ff = arg;
	fuse_lowlevel_notify_inval_inode(ff->se, ino, off, len);
}

/* Makes the kernel ask again about one cached name. Expiring keeps the
 * dentry: invalidating a directory's would cut it loose from processes
 * whose cwd it is (getcwd then fails), so without expire support only
 * files lose theirs. */
static void notify_entry(void *arg, uint64_t parent, const char *name,
			 bool is_dir)
{
	struct fs_fuse *ff = arg;
	size_t len = strlen(name);
	if (ff->expire_only &&
	    fuse_lowlevel_notify_expire_entry(ff->se, parent, name, len,
					      FUSE_LL_EXPIRE_ONLY) == 0)
		return;
	if (!is_dir)
		fuse_lowlevel_notify_inval_entry(ff->se, parent, name, len);
}

void fs_fuse_attach(struct fs *fs, struct fs_fuse *ff, struct fuse_session *se)
{
	*ff = (struct fs_fuse){.se = se};
	fs->notify = (struct fs_notify){
		.arg = ff, .inode = notify_inode, .entry = notify_entry,
	};
}

void fs_fuse_status(struct fs *fs, json_t *obj)
{
	struct fs_fuse *ff = fs->notify.arg;
	if (ff)
		fuse_requests_status(&ff->requests, obj);
}

/* ---- handlers ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;
	struct fs_fuse *ff = fs->notify.arg;
	if (ff)
		ff->expire_only = conn->capable & FUSE_CAP_EXPIRE_ONLY;
	conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	/* Always readdirplus: one listing answers `ls -l` entirely. */
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_write = 1024 * 1024;
	conn->max_readahead = 1024 * 1024;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	counted(req, FRQ_LOOKUP);
	struct fs_entry e;
	reply_entry(req, fs_lookup(req_fs(req), parent, name, &e), &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	counted(req, FRQ_FORGET);
	fs_forget(req_fs(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	counted(req, FRQ_FORGET);
	for (size_t i = 0; i < count; i++)
		fs_forget(req_fs(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void reply_attr(fuse_req_t req, int err, const struct stat *st,
		       double timeout)
{
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, st, timeout);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	counted(req, FRQ_GETATTR);
	(void)fi;
	struct stat st;
	double timeout;
	int err = fs_getattr(req_fs(req), ino, &st, &timeout);
	reply_attr(req, err, &st, timeout);
}

/* FUSE's setattr fields in the fs's terms. */
static int setattr_fields(int to_set)
{
	static const struct { int fuse, fs; } map[] = {
		{FUSE_SET_ATTR_MODE, FS_SET_MODE},
		{FUSE_SET_ATTR_UID, FS_SET_UID},
		{FUSE_SET_ATTR_GID, FS_SET_GID},
		{FUSE_SET_ATTR_SIZE, FS_SET_SIZE},
		{FUSE_SET_ATTR_ATIME, FS_SET_ATIME},
		{FUSE_SET_ATTR_MTIME, FS_SET_MTIME},
		{FUSE_SET_ATTR_ATIME_NOW, FS_SET_ATIME_NOW},
		{FUSE_SET_ATTR_MTIME_NOW, FS_SET_MTIME_NOW},
	};
	int r = 0;
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (to_set & map[i].fuse)
			r |= map[i].fs;
	return r;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	counted(req, FRQ_SETATTR);
	(void)fi;
	struct fs *fs = req_fs(req);
	struct stat st;
	int err = fs_setattr(fs, ino, attr, setattr_fields(to_set), &st);
	reply_attr(req, err, &st, fs->cfg.attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	counted(req, FRQ_READLINK);
	char *shown = NULL;
	int err = fs_readlink(req_fs(req), ino, &shown);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_readlink(req, shown);
	free(shown);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	counted(req, FRQ_MKDIR);
	struct fs_entry e;
	reply_entry(req, fs_mkdir(req_fs(req), parent, name, mode, &e), &e);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	counted(req, FRQ_SYMLINK);
	struct fs_entry e;
	reply_entry(req, fs_symlink(req_fs(req), link, parent, name, &e), &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	counted(req, FRQ_MKNOD);
	(void)rdev;
	struct fs_entry e;
	reply_entry(req, fs_mknod(req_fs(req), parent, name, mode, &e), &e);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	counted(req, FRQ_LINK);
	struct fs *fs = req_fs(req);
	struct fs_entry e;
	struct fs_later later = {0};
	int err = fs_link(fs, ino, newparent, newname, &e, &later);
	fs_send_before(fs, &later);
	reply_entry(req, err, &e);
	fs_send_later(fs, &later);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	counted(req, FRQ_UNLINK);
	fuse_reply_err(req, -fs_unlink(req_fs(req), parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	counted(req, FRQ_RMDIR);
	fuse_reply_err(req, -fs_rmdir(req_fs(req), parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	counted(req, FRQ_RENAME);
	struct fs *fs = req_fs(req);
	struct fs_later later = {0};
	fuse_reply_err(req, -fs_rename(fs, parent, name, newparent, newname,
				       flags, &later));
	fs_send_later(fs, &later);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	counted(req, FRQ_OPEN);
	struct fs_open o = {.flags = fi->flags, .keep_cache = fi->keep_cache};
	int err = fs_open(req_fs(req), ino, &o);
	fi->keep_cache = o.keep_cache;
	fi->fh = o.fh;
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_open(req, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	counted(req, FRQ_CREATE);
	struct fs_open o = {.flags = fi->flags, .keep_cache = fi->keep_cache};
	struct fs_entry e;
	int err = fs_create(req_fs(req), parent, name, mode, &o, &e);
	fi->keep_cache = o.keep_cache;
	fi->fh = o.fh;
	struct fuse_entry_param p;
	if (err == 0)
		entry_param(&e, &p);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_create(req, &p, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	counted(req, FRQ_READ);
	struct fs *fs = req_fs(req);
	struct fs_later later = {0};
	char *buf = malloc(size ? size : 1);
	ssize_t r = buf ? fs_read(fs, ino, fi->fh, buf, size, off, &later)
			: -ENOMEM;
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
	free(buf);
	fs_send_later(fs, &later);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	counted(req, FRQ_WRITE);
	ssize_t r = fs_write(req_fs(req), ino, fi->fh, buf, size, off);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_write(req, (size_t)r);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	counted(req, FRQ_FLUSH);
	fuse_reply_err(req, -fs_flush(req_fs(req), ino, fi->fh));
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	counted(req, FRQ_FSYNC);
	(void)datasync;
	fuse_reply_err(req, -fs_fsync(req_fs(req), ino, fi->fh));
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	counted(req, FRQ_RELEASE);
	fs_release(req_fs(req), ino, fi->fh);
	fuse_reply_err(req, 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	counted(req, FRQ_OPENDIR);
	struct fs *fs = req_fs(req); /* req is gone once replied to */
	struct fs_dir *d;
	struct fs_later later = {0};
	int err = fs_opendir(fs, ino, &d, &later);
	fi->fh = (uint64_t)(uintptr_t)d;
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_open(req, fi);
	fs_send_later(fs, &later);
}

/* Where readdir's entries are packed. */
struct dir_buf {
	fuse_req_t req;
	char *buf;
	size_t size, used;
	bool plus;
};

static bool add_dirent(void *ctx, const char *name, const struct fs_entry *e,
		       off_t next)
{
	struct dir_buf *b = ctx;
	size_t len, room = b->size - b->used;
	if (b->plus) {
		struct fuse_entry_param p;
		entry_param(e, &p);
		len = fuse_add_direntry_plus(b->req, b->buf + b->used, room,
					     name, &p, next);
	} else {
		len = fuse_add_direntry(b->req, b->buf + b->used, room, name,
					&e->attr, next);
	}
	if (len > room)
		return false;
	b->used += len;
	return true;
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi, bool plus)
{
	struct dir_buf b = {.req = req, .buf = malloc(size), .size = size,
			    .plus = plus};
	if (b.buf)
		fs_readdir(req_fs(req), ino, (struct fs_dir *)(uintptr_t)fi->fh,
			   off, plus, add_dirent, &b);
	if (!b.buf)
		fuse_reply_err(req, ENOMEM);
	else
		fuse_reply_buf(req, b.buf, b.used);
	free(b.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	counted(req, FRQ_READDIR);
	readdir_common(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	counted(req, FRQ_READDIRPLUS);
	readdir_common(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	counted(req, FRQ_RELEASEDIR);
	fs_releasedir(req_fs(req), ino, (struct fs_dir *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	counted(req, FRQ_FSYNCDIR);
	(void)ino;
	(void)datasync;
	(void)fi;
	fs_fsyncdir(req_fs(req));
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	counted(req, FRQ_STATFS);
	(void)ino;
	struct statvfs st;
	int err = fs_statfs(req_fs(req), &st);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_statfs(req, &st);
}

/* No extended attributes: ENOSYS, which the kernel remembers for the whole
 * mount and answers itself from then on (EOPNOTSUPP to the caller). Any
 * other answer it cannot cache: `ls -l` would ask two per file, and every
 * write security.capability, each time. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	counted(req, FRQ_GETXATTR);
	(void)ino;
	(void)name;
	(void)size;
	fuse_reply_err(req, ENOSYS);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	counted(req, FRQ_LISTXATTR);
	(void)ino;
	(void)size;
	fuse_reply_err(req, ENOSYS);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	counted(req, FRQ_SETXATTR);
	(void)ino;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(req, ENOSYS);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	counted(req, FRQ_REMOVEXATTR);
	(void)ino;
	(void)name;
	fuse_reply_err(req, ENOSYS);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
};

const struct fuse_lowlevel_ops *fs_fuse_ops(void) { return &ops; }
