/* File operations: open, create, read, write, flush, fsync, release and
 * setattr, over the spool every handle of an inode shares
 * (file_state.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "fs_node.h"
#include "writeback/wb_removes.h"
#include "writeback/writeback.h"

/* A spool kept from an earlier open may hold an older copy than the one
 * the sandbox has now (an sbexec rewrote the file): its content goes, so
 * that neither a read nor a write through this open builds on it (a write
 * would upload the old bytes around the new ones). The node's attributes
 * were just made fresh by the open. */
static void revalidate_spool(struct fs *fs, uint64_t ino,
			     struct file_state *f)
{
	file_lock(f);
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	struct timespec now = fs_now();
	bool known = n && n->file == f;
	off_t size = known ? n->st.st_size : 0;
	struct timespec mtime = known ? n->st.st_mtim : now;
	bool from_sandbox = known && node_attr_fresh(&fs->t, n, &now);
	/* The mode too: a clean spool's is what an upload would give the
	 * file, and what a stat shows once this open writes. An sbexec may
	 * have put another file under the name (mv -f), with its own mode. */
	if (known && !f->dirty)
		f->mode = n->st.st_mode & 07777;
	/* With other names to the file, a write through one of them may
	 * keep the size and, where times are whole seconds, the mtime too:
	 * what the spool holds is fetched again. */
	if (known && fs_attr_linked(n)) {
		f->adoptable = false;
		f->invalidated = true;
	}
	table_unlock(fs);
	if (known)
		file_state_revalidate(f, size, &mtime, from_sandbox);
	file_unlock(f);
}

/* Attaches a handle to the node's spool, making the spool if it is the
 * first. Returns 0 or -errno; the caller replies. */
static int open_handle(struct fs *fs, uint64_t ino, struct fs_open *fi,
		       bool created, mode_t create_mode)
{
	int err = 0;
	/* Write-back: an open that may write an existing file records the
	 * copy its writes are made on (file_state_opened) from the sandbox,
	 * once the mount's own uploads landed: the node's attributes could
	 * be a stat taken while one was under way, naming a copy the upload
	 * then replaced, and the first write was refused as if the sandbox
	 * had changed it (fsx after a close, a cache drop and a reopen). */
	bool may_write = fs->wb && !created && (fi->flags & O_ACCMODE) != O_RDONLY &&
			 !(fi->flags & O_TRUNC);
	bool dirty_at_open = false;
	if (may_write) {
		/* A dirty spool's copy is the one its upload will name
		 * (file_state_opened): nothing to ask. Only this file's own
		 * upload, queued or under way, is waited for: a write-open
		 * must not wait for every other file's. */
		table_lock(fs);
		struct node *own = node_by_ino(&fs->t, ino);
		struct file_state *of = own ? own->file : NULL;
		bool dirty = of && of->dirty, uploading = of && of->wb_queued;
		table_unlock(fs);
		dirty_at_open = dirty;
		if (!dirty && uploading)
			wb_drain(fs);
	}
	bool asks = may_write && !dirty_at_open;
	struct timespec now = fs_now();
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	if (!n) {
		table_unlock(fs);
		return -ENOENT;
	}
	/* Close-to-open: a fresh size and mtime decide whether the page
	 * cache and a kept spool still hold the sandbox's content. */
	if (!created && !fs_attr_fresh(fs, n, &now))
		n = fs_refresh_attr(fs, NULL, NULL, n, &err);
	if (n && err == 0 && n->file) {
		struct file_state *kept = n->file;
		fs_file_reuse(fs, kept);
		if (kept->reported_while_open) {
			kept->reported_while_open = false;
			kept->invalidated = true;
		}
		if (kept->dirty)
			fi->keep_cache = true; /* the spool is shared: same content */
		else if (!fs_attr_linked(n) && kept->identity_known && !kept->invalidated &&
			 kept->size == n->st.st_size &&
			 kept->remote_mtime.tv_sec == n->st.st_mtim.tv_sec &&
			 kept->remote_mtime.tv_nsec == n->st.st_mtim.tv_nsec)
			/* The sandbox's copy is still the one the spool, and
			 * so the page cache, were filled from. */
			fi->keep_cache = true;
	} else if (n && err == 0 && S_ISDIR(n->st.st_mode)) {
		err = -EISDIR;
	} else if (n && err == 0) {
		n->file = spool_new(fs, created ? 0 : n->st.st_size,
				    created ? create_mode : n->st.st_mode, !created);
		if (!n->file) {
			err = -errno;
		} else {
			n->file->remote_mtime = n->st.st_mtim;
			n->file->dirty = created;
			if (n->cached_content && !created && !fs_attr_linked(n) &&
			    n->cached_size == n->st.st_size &&
			    n->cached_mtime.tv_sec == n->st.st_mtim.tv_sec &&
			    n->cached_mtime.tv_nsec == n->st.st_mtim.tv_nsec)
				fi->keep_cache = true;
		}
	}
	struct file_state *f = n && err == 0 ? n->file : NULL;
	/* the copy the first handle opens is what its writes are made on */
	bool first_handle = f && f->handles == 0;
	struct stat opened = n ? n->st : (struct stat){0};
	if (f) {
		f->handles++;
		n->cached_content = false;
	}
	table_unlock(fs);
	if (f && first_handle && asks) {
		table_lock(fs);
		n = node_by_ino(&fs->t, ino);
		char *path = n ? fs_node_guest_path(fs, n, &err) : NULL;
		table_unlock(fs);
		err = 0;
		/* no answer: the copy is not known, and no write is refused */
		if (!path || sb_stat(fs->b, path, &opened, NULL) < 0)
			opened.st_mode = 0;
		free(path);
	}
	if (f && first_handle) {
		/* Dirty at the open: not asked, and the node's attributes may
		 * be from before its upload, which can land before this line;
		 * the upload names the copy (file_state_upload_done). */
		bool known = opened.st_mode && !dirty_at_open;
		file_lock(f);
		file_state_opened(f, known ? &opened : NULL);
		file_unlock(f);
	}
	if (f && !created)
		revalidate_spool(fs, ino, f);
	if (f && (fi->flags & O_TRUNC) && !created) {
		file_lock(f);
		err = file_state_truncate(f, 0);
		file_unlock(f);
		fi->keep_cache = false;
	}
	if (err < 0) {
		if (f) {
			table_lock(fs);
			n = node_by_ino(&fs->t, ino);
			if (n && n->file) {
				n->file->handles--;
				fs_file_unref(fs, n);
			}
			table_unlock(fs);
		}
		return err;
	}
	fi->fh = ino;
	return 0;
}

int fs_open(struct fs *fs, uint64_t ino, struct fs_open *o)
{
	int err = fs_check_alive(fs);
	if (err == 0)
		err = open_handle(fs, ino, o, false, 0);
	if (err == 0)
		atomic_fetch_add(&fs->b->files_open, 1);
	return err;
}

/* Makes the node of a new file; nothing is sent yet: the file reaches the
 * sandbox with its content on close (one call per small file). Its inode,
 * or 0 with *err. */
static uint64_t create_node(struct fs *fs, uint64_t parent, const char *name,
			    mode_t mode, int flags, int *err)
{
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	struct timespec now = fs_now();
	if (!p) {
		*err = -ENOENT;
	} else if (n && fs_attr_fresh(fs, n, &now) && (flags & O_EXCL)) {
		*err = -EEXIST;
	} else {
		n = node_child_get(&fs->t, p, name);
		if (!n)
			*err = -ENOMEM;
		else if (n->file)
			*err = -EBUSY;
	}
	if (*err == 0) {
		fs_record_new(fs, n, S_IFREG | (mode & 07777), 0, NULL);
		node_entries_changed(p);
		n->seen_mark = p->list_mark;
		n->nlookup++;
	}
	uint64_t ino = n && *err == 0 ? n->ino : 0;
	table_unlock(fs);
	return ino;
}

int fs_create(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	      struct fs_open *o, struct fs_entry *e)
{
	int err = fs_check_alive(fs);
	if (err == 0)
		err = fs_check_new_name(fs, parent, name);
	if (err < 0)
		return err;
	uint64_t ino = create_node(fs, parent, name, mode, o->flags, &err);
	if (err < 0)
		return err;
	err = open_handle(fs, ino, o, true, mode & 07777);
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	if (err == 0 && n)
		fs_fill_entry(fs, n, e);
	else if (err == 0)
		err = -ENOENT;
	table_unlock(fs);
	if (err == 0)
		atomic_fetch_add(&fs->b->files_open, 1);
	return err;
}

/* Reads through the spool, after dropping what it caches if the sandbox
 * changed the file since it was filled (an sbexec, a refresh). f->lock
 * held. */
static ssize_t read_spool(struct fs *fs, struct node *n, struct file_state *f,
			  char *buf, size_t size, off_t off)
{
	int err = 0;
	table_lock(fs);
	char *path = fs_node_guest_path(fs, n, &err);
	off_t remote_size = n->st.st_size;
	struct timespec remote_mtime = n->st.st_mtim, now = fs_now();
	bool from_sandbox = node_attr_fresh(&fs->t, n, &now);
	table_unlock(fs);
	if (path)
		file_state_revalidate(f, remote_size, &remote_mtime,
				      from_sandbox);
	ssize_t r;
	/* An unlinked file is read from what the spool holds. */
	if (!path && !f->unlinked)
		r = err;
	else
		r = file_state_read(f, fs->b, path ? path : "", buf, size, off);
	free(path);
	return r;
}

struct spool_read {
	struct fs *fs;
	struct node *n;
	struct file_state *f;
	char *buf;
	size_t size;
	off_t off;
};

static int64_t read_attempt(void *arg)
{
	struct spool_read *a = arg;
	file_lock(a->f);
	ssize_t r = read_spool(a->fs, a->n, a->f, a->buf, a->size, a->off);
	file_unlock(a->f);
	return r;
}

ssize_t fs_read(struct fs *fs, uint64_t ino, uint64_t fh, char *buf,
		size_t size, off_t off, struct fs_later *later)
{
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	struct node *n;
	struct file_state *f = fs_handle_file(fs, fh, &n);
	if (!f)
		return -EBADF;
	struct spool_read rd = {fs, n, f, buf, size, off};
	ssize_t r = spool_try_again(fs, NULL, read_attempt, &rd);
	file_lock(f);
	bool changed = f->remote_changed;
	f->remote_changed = false;
	file_unlock(f);
	if (changed) {
		/* The read found another version in the sandbox than the
		 * attributes said (and followed it): ask for them again, here
		 * and, once the reply is out, in the kernel. */
		table_lock(fs);
		n = node_by_ino(&fs->t, ino);
		if (n)
			node_forget_attr(n);
		table_unlock(fs);
		later->inval_attrs = ino;
	}
	fs_unpin_file(fs, ino);
	return r;
}

/* Write-back: the mount's own uploads of the file's earlier content land
 * before its first write compares the sandbox's copy with the one the
 * handles opened (file_state_hold_whole): one still under way is no
 * change by the sandbox (fsx after a close and reopen: a stat saw the
 * upload half done). No lock held; f pinned. */
static void land_own_uploads(struct fs *fs, struct file_state *f)
{
	if (!fs->wb)
		return;
	file_lock(f);
	bool compares = !f->dirty && f->remote_exists && !f->unlinked &&
			f->opened_known;
	file_unlock(f);
	if (compares)
		wb_drain(fs);
}

/* Before the first write of a clean spool, the rest of the sandbox's
 * copy (file_state_hold_whole): a dirty spool is the whole file, never
 * completed later from a copy changed meanwhile. */
static ssize_t write_whole(struct fs *fs, struct node *n, struct file_state *f,
			   const char *buf, size_t size, off_t off)
{
	land_own_uploads(fs, f);
	file_lock(f);
	ssize_t r = 0;
	if (!f->dirty && f->remote_exists && !f->unlinked) {
		int err = 0;
		table_lock(fs);
		char *path = fs_node_guest_path(fs, n, &err);
		table_unlock(fs);
		if (path)
			r = file_state_hold_whole(f, fs->b, path, INT64_MAX);
		free(path);
	}
	if (r == 0)
		r = file_state_write(f, buf, size, off);
	file_unlock(f);
	return r;
}

struct spool_write {
	struct fs *fs;
	struct node *n;
	struct file_state *f;
	const char *buf;
	size_t size;
	off_t off;
};

static int64_t write_attempt(void *arg)
{
	struct spool_write *a = arg;
	return write_whole(a->fs, a->n, a->f, a->buf, a->size, a->off);
}

ssize_t fs_write(struct fs *fs, uint64_t ino, uint64_t fh, const char *buf,
		 size_t size, off_t off)
{
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	struct node *n;
	struct file_state *f = fs_handle_file(fs, fh, &n);
	if (!f)
		return -EBADF;
	struct spool_write wr = {fs, n, f, buf, size, off};
	ssize_t r = spool_try_again(fs, NULL, write_attempt, &wr);
	fs_unpin_file(fs, ino);
	return r;
}

/* Uploads the handle's file if it is dirty. */
static int upload_handle(struct fs *fs, uint64_t ino, uint64_t fh,
			 bool is_flush)
{
	struct node *n;
	struct file_state *f = fs_handle_file(fs, fh, &n);
	int err = 0;
	/* A new file nobody wrote yet: this close is most likely a shell's
	 * redirection closing its spare descriptor (open, dup2, close), with
	 * the data still to come. Its upload waits for the data or the last
	 * close (release); an explicit fsync still uploads now. */
	bool wait = is_flush && f && !f->remote_exists && !f->written;
	if (f && !wait && is_flush && fs->wb)
		err = wb_commit(fs, n, f); /* durable here, uploaded later */
	else if (f && !wait)
		err = fs_upload_file(fs, n, f);
	if (f)
		fs_unpin_file(fs, ino);
	return err;
}

int fs_flush(struct fs *fs, uint64_t ino, uint64_t fh)
{
	return upload_handle(fs, ino, fh, true);
}

int fs_fsync(struct fs *fs, uint64_t ino, uint64_t fh)
{
	wb_drain_removes(fs); /* a barrier for queued removes too */
	return upload_handle(fs, ino, fh, false);
}

void fs_release(struct fs *fs, uint64_t ino, uint64_t fh)
{
	struct node *n;
	struct file_state *f = fs_handle_file(fs, fh, &n);
	atomic_fetch_sub(&fs->b->files_open, 1); /* FUSE releases each open once */
	/* The last close of a file whose upload waited (see upload_handle).
	 * A failure here has no caller to tell: the file stays pending, shown
	 * in status and retried at the next sync, sbexec or unmount. */
	if (f && f->handles == 1 && f->dirty && fs->wb)
		wb_commit(fs, n, f);
	else if (f && f->handles == 1 && f->dirty)
		fs_upload_file(fs, n, f);
	table_lock(fs);
	n = node_by_ino(&fs->t, ino);
	if (n && n->file) {
		n->file->handles--;
		n->file->pins--;
		fs_file_unref(fs, n);
	}
	table_unlock(fs);
}

/* ---- setattr ---- */

/* chown/lchown (never following a symlink) in the sandbox's ids. A file
 * not uploaded yet is uploaded first: an upload would otherwise make it
 * the sandbox user's again. f->lock held when f. */
static int chown_path(struct fs *fs, struct node *n, struct file_state *f,
		      const char *path, const struct stat *attr, int to_set)
{
	uid_t uid = (to_set & FS_SET_UID) ? attr->st_uid : (uid_t)-1;
	gid_t gid = (to_set & FS_SET_GID) ? attr->st_gid : (gid_t)-1;
	fs_unmap_owner(fs, &uid, &gid);
	/* A new file's first upload makes it the sandbox user's: a chown to
	 * that user (tar or cp -p as root, with the caller's own ids) is
	 * what the upload gives, and cannot fail. Nothing to send. Not
	 * under a set-group-ID directory, whose group a new file may take
	 * or not, as the backend's upload makes it. */
	if (f && f->dirty && !f->remote_exists &&
	    (uid == (uid_t)-1 || uid == fs->b->guest_uid) &&
	    (gid == (gid_t)-1 || gid == fs->b->guest_gid)) {
		table_lock(fs);
		bool sgid_dir = !n->parent || (n->parent->st.st_mode & S_ISGID);
		table_unlock(fs);
		if (!sgid_dir)
			return 0;
	}
	int err = 0;
	if (f && f->dirty)
		err = fs_upload_locked(fs, n, f, path);
	return err < 0 ? err : sb_chown(fs->b, path, uid, gid);
}

/* utimensat's times from a setattr. */
static void setattr_times(const struct stat *attr, int to_set,
			  struct timespec ts[2])
{
	ts[0] = ts[1] = (struct timespec){0, UTIME_OMIT};
	if (to_set & FS_SET_ATIME_NOW)
		ts[0].tv_nsec = UTIME_NOW;
	else if (to_set & FS_SET_ATIME)
		ts[0] = attr->st_atim;
	if (to_set & FS_SET_MTIME_NOW)
		ts[1].tv_nsec = UTIME_NOW;
	else if (to_set & FS_SET_MTIME)
		ts[1] = attr->st_mtim;
}

/* Applies a setattr to the spool and the sandbox. f->lock held when f;
 * path NULL for a file with no name left. */
static int apply_setattr(struct fs *fs, struct node *n, struct file_state *f,
			 const char *path, int err, const struct stat *attr,
			 int to_set)
{
	/* Open but unlinked: it lives only in its spool, has no path, and
	 * nothing in the sandbox is to change (ftruncate after unlink). */
	bool orphan = f && f->unlinked;
	if (orphan && !path)
		err = 0;
	if ((path || orphan) && (to_set & FS_SET_SIZE)) {
		/* the bytes a truncate keeps are whole first (hold_whole) */
		if (f && (err = path ? file_state_hold_whole(f, fs->b, path,
							     attr->st_size)
				     : 0) == 0)
			err = file_state_truncate(f, attr->st_size);
		else if (!f)
			err = sb_truncate(fs->b, path, attr->st_size);
	}
	if (orphan) {
		if (err == 0 && (to_set & FS_SET_MODE))
			f->mode = attr->st_mode & 07777;
		return err;
	}
	if (path && err == 0 && (to_set & FS_SET_MODE)) {
		if (f && !f->remote_exists) {
			/* Applied when the new file is first uploaded. */
			f->mode = attr->st_mode & 07777;
		} else {
			err = sb_chmod(fs->b, path, attr->st_mode & 07777);
			if (err == 0 && f)
				f->mode = attr->st_mode & 07777;
		}
	}
	if (path && err == 0 && (to_set & (FS_SET_ATIME | FS_SET_MTIME))) {
		struct timespec ts[2];
		setattr_times(attr, to_set, ts);
		if (f && f->dirty && fs->wb) {
			/* Write-back: they go with the upload (tar, cp -p). */
			err = file_state_set_times(f, ts);
		} else {
			/* An upload would reset the times: upload first. */
			if (f && f->dirty)
				err = fs_upload_locked(fs, n, f, path);
			if (err == 0)
				err = sb_utimens(fs->b, path, ts);
			/* the open handles' copy, changed by the mount itself */
			if (err == 0 && f && (to_set & FS_SET_MTIME))
				file_state_mtime_set_here(f, (to_set & FS_SET_MTIME_NOW)
								     ? NULL : &attr->st_mtim);
		}
	}
	if (path && err == 0 && (to_set & (FS_SET_UID | FS_SET_GID)))
		err = chown_path(fs, n, f, path, attr, to_set);
	return err;
}

/* Records what was changed rather than asking the sandbox again; *out:
 * the attributes now. */
static int record_setattr(struct fs *fs, uint64_t ino, bool has_spool,
			  const struct stat *attr, int to_set,
			  struct stat *out)
{
	int err = 0;
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	if (n) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (to_set & FS_SET_MODE)
			n->st.st_mode = (n->st.st_mode & S_IFMT) | (attr->st_mode & 07777);
		if ((to_set & FS_SET_SIZE) && !has_spool) {
			n->st.st_size = attr->st_size;
			n->st.st_mtim = now;
		}
		if (to_set & FS_SET_ATIME)
			n->st.st_atim = (to_set & FS_SET_ATIME_NOW) ? now : attr->st_atim;
		if (to_set & FS_SET_MTIME) {
			n->st.st_mtim = (to_set & FS_SET_MTIME_NOW) ? now : attr->st_mtim;
			/* A time set explicitly is the directory's mtime from
			 * now on: entry changes before it no longer raise it
			 * when its attributes are asked again. */
			n->entries_changed_at = (struct timespec){0, 0};
		}
		if (to_set & FS_SET_UID)
			n->st.st_uid = attr->st_uid;
		if (to_set & FS_SET_GID)
			n->st.st_gid = attr->st_gid;
		if (to_set & (FS_SET_UID | FS_SET_GID))
			n->owner_told = true; /* the other id stays as told */
		n->st.st_ctim = now;
		fs_landed(n);
		fs_node_stat(n, out);
		fs_other_names_changed(fs, n);
	} else {
		err = -ENOENT;
	}
	table_unlock(fs);
	return err;
}

int fs_setattr(struct fs *fs, uint64_t ino, const struct stat *attr,
	       int to_set, struct stat *out)
{
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	/* Write-back: a directory's new mode, owner or times land after
	 * what was written into it before them (tar sets them last): an
	 * upload landing after would move its mtime, and one into a
	 * directory made read-only would be refused. */
	if (fs->wb && (to_set & ~FS_SET_SIZE)) {
		table_lock(fs);
		struct node *d = node_by_ino(&fs->t, ino);
		bool dir = d && S_ISDIR(d->st.st_mode);
		table_unlock(fs);
		if (dir)
			wb_drain(fs);
	}
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	if (!n) {
		table_unlock(fs);
		return -ENOENT;
	}
	/* A spool kept only as a read cache is no open file: the change goes
	 * to the sandbox directly. */
	fs_file_forget(fs, n);
	struct file_state *f = fs_pin_file(fs, n);
	char *path = fs_node_guest_path(fs, n, &err);
	table_unlock(fs);

	if (f && (to_set & FS_SET_SIZE))
		land_own_uploads(fs, f);
	if (f)
		file_lock(f);
	err = apply_setattr(fs, n, f, path, err, attr, to_set);
	if (f)
		file_unlock(f);
	free(path);
	/* Write-back: a closed file changed by path goes back in the queue. */
	if (f && err == 0 && fs->wb && f->dirty && f->handles == 0)
		err = wb_commit(fs, n, f);
	if (err == 0)
		err = record_setattr(fs, ino, f != NULL, attr, to_set, out);
	if (f)
		fs_unpin_file(fs, ino);
	return err;
}
