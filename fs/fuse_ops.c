/* The FUSE adapter: kernel requests in, fs-core and backend calls out.
 * Pattern of every handler: take the table lock, look at the cache, copy
 * what the backend call needs, drop the lock for the (slow) call, take it
 * again to record the result. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../control/server.h"
#include "../util/log.h"
#include "fs_internal.h"
#include "symlink_policy.h"
#include "wb_removes.h"
#include "writeback.h"

#define NAME_MAX_BYTES 255

static struct fs *req_fs(fuse_req_t req) { return fuse_req_userdata(req); }

static bool dead(struct fs *fs, fuse_req_t req)
{
	if (!sb_backend_is_dead(fs->b))
		return false;
	fuse_reply_err(req, EIO);
	return true;
}

static int check_name(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || strchr(name, '/'))
		return -EINVAL;
	if (len > NAME_MAX_BYTES)
		return -ENAMETOOLONG;
	return 0;
}

static void fill_entry(const struct fs *fs, const struct node *n,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->ino = n->ino;
	fs_node_stat(n, &e->attr);
	struct timespec now = fs_now();
	/* Attributes we know to be stale are shown but not cached. */
	e->attr_timeout = fs_attr_fresh(fs, n, &now) ? fs->cfg.attr_timeout : 0;
	e->entry_timeout = fs->cfg.attr_timeout;
}

/* Records backend attributes on a node; table lock held. */
static void record_attr(struct fs *fs, struct node *n, struct stat *st,
			const char *link)
{
	fs_map_attr(fs, st);
	struct timespec exp = fs_expiry(fs->cfg.attr_timeout);
	node_set_attr(&fs->t, n, st, link, &exp);
}

/* Attributes of a locally made node (mkdir, create, symlink) without a
 * round trip to ask the sandbox what it just did. */
static void record_new(struct fs *fs, struct node *n, mode_t mode, off_t size,
		       const char *link)
{
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_mode = mode;
	st.st_nlink = S_ISDIR(mode) ? 2 : 1;
	st.st_size = size;
	st.st_uid = fs->b->guest_uid; /* made by the sandbox's user */
	st.st_gid = fs->b->guest_gid;
	clock_gettime(CLOCK_REALTIME, &st.st_mtim);
	st.st_atim = st.st_ctim = st.st_mtim;
	record_attr(fs, n, &st, link);
}

/* The mount changed an entry of directory ino (table lock held). */
static void entries_changed(struct fs *fs, fuse_ino_t ino)
{
	struct node *d = node_by_ino(&fs->t, ino);
	if (d)
		node_entries_changed(d);
}

/* Fetches fresh attributes for n (or its would-be child name under
 * parent when n is NULL). Table lock held on entry and exit, dropped
 * around the backend call. Returns the node or NULL with *err. */
static struct node *refresh_attr(struct fs *fs, struct node *parent,
				 const char *name, struct node *n, int *err)
{
	char *path;
	if (n) {
		path = fs_node_guest_path(fs, n, err);
	} else {
		char *dir = fs_node_guest_path(fs, parent, err);
		path = NULL;
		if (dir && asprintf(&path, "%s/%s",
				    strcmp(dir, "/") ? dir : "", name) < 0) {
			path = NULL;
			*err = -ENOMEM;
		}
		free(dir);
	}
	if (!path)
		return NULL;
	uint64_t pino = parent ? parent->ino : 0, nino = n ? n->ino : 0;
	pthread_mutex_unlock(&fs->t.lock);
	struct stat st;
	char *link = NULL;
	int r = sb_stat(fs->b, path, &st, &link);
	free(path);
	pthread_mutex_lock(&fs->t.lock);
	/* The nodes may have gone while unlocked: look them up again. */
	parent = pino ? node_by_ino(&fs->t, pino) : NULL;
	n = nino ? node_by_ino(&fs->t, nino) : NULL;
	if (r < 0) {
		if (r == -ENOENT && n && n->parent &&
		    (!n->file || n->file->retained))
			node_detach(&fs->t, n);
		free(link);
		*err = r;
		return NULL;
	}
	if (!n) {
		if (!parent || (!parent->parent && parent->ino != NODE_ROOT_INO)) {
			free(link);
			*err = -ENOENT;
			return NULL;
		}
		n = node_child_get(&fs->t, parent, name);
		if (!n) {
			free(link);
			*err = -ENOMEM;
			return NULL;
		}
	}
	if (!n->file || !n->file->dirty)
		record_attr(fs, n, &st, link);
	free(link);
	return n;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;
	fs->se_expire_only = conn->capable & FUSE_CAP_EXPIRE_ONLY;
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

static int load_listing(struct fs *fs, uint64_t ino);

/* Directories with more entries than this are never listed just to answer
 * a lookup. */
#define LOOKUP_SCAN_MAX_ENTRIES 10000

/* True when a lookup in directory p should list p instead of asking the
 * sandbox for that one name: another lookup there needed the sandbox
 * within the attribute timeout (a create loop asking for one new name
 * after another, rm -rf or git walking names whose attributes expired),
 * so one listing answers this name and the next ones, and the directory
 * is not known to be huge. Table lock held. */
static bool lookups_scan(struct fs *fs, const struct node *p,
			 const struct timespec *now)
{
	(void)fs;
	bool recent = p->remote_lookups > 0 &&
		      (now->tv_sec < p->remote_lookups_expire.tv_sec ||
		       (now->tv_sec == p->remote_lookups_expire.tv_sec &&
			now->tv_nsec < p->remote_lookups_expire.tv_nsec));
	return recent && p->list_entries <= LOOKUP_SCAN_MAX_ENTRIES;
}

/* Remembers that a lookup in directory ino asked the sandbox. Table lock
 * held. */
static void note_remote_lookup(struct fs *fs, uint64_t ino)
{
	struct node *p = node_by_ino(&fs->t, ino);
	if (!p)
		return;
	p->remote_lookups++;
	/* Twice the attribute timeout: a listing made for a scan expires
	 * after one, and the scan going on should list again at once rather
	 * than pay a stat first. */
	p->remote_lookups_expire = fs_expiry(2 * fs->cfg.attr_timeout);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err = check_name(name);
	if (err < 0) {
		fuse_reply_err(req, -err);
		return;
	}
	struct fuse_entry_param e;
	struct timespec now = fs_now();
	pthread_mutex_lock(&fs->t.lock);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	if (!p) {
		err = -ENOENT;
	} else if (n && fs_attr_fresh(fs, n, &now)) {
		/* cached */
	} else if (node_list_fresh(&fs->t, p, &now) &&
		   (!n || n->seen_mark != p->list_mark)) {
		err = -ENOENT; /* the fresh listing does not name it */
	} else if (lookups_scan(fs, p, &now)) {
		/* One listing answers the next names asked too. */
		note_remote_lookup(fs, parent);
		err = load_listing(fs, parent);
		p = node_by_ino(&fs->t, parent);
		n = p && err == 0 ? node_child(&fs->t, p, name) : NULL;
		if (err == -EAGAIN && p) {
			/* The directory keeps changing: ask for this name. */
			err = 0;
			n = refresh_attr(fs, p, name, node_child(&fs->t, p, name), &err);
		} else if (err == 0 && (!n || !p || n->seen_mark != p->list_mark)) {
			err = -ENOENT;
		}
	} else {
		n = refresh_attr(fs, p, name, n, &err);
		note_remote_lookup(fs, parent);
	}
	if (err == 0 && n) {
		n->nlookup++;
		fill_entry(fs, n, &e);
	}
	pthread_mutex_unlock(&fs->t.lock);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_entry(req, &e);
}

static void forget_one(struct fs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct node *n = node_by_ino(&fs->t, ino);
	if (!n || ino == NODE_ROOT_INO)
		return;
	n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
	if (n->nlookup == 0)
		node_forgotten(&fs->t, n);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = req_fs(req);
	pthread_mutex_lock(&fs->t.lock);
	forget_one(fs, ino, nlookup);
	pthread_mutex_unlock(&fs->t.lock);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct fs *fs = req_fs(req);
	pthread_mutex_lock(&fs->t.lock);
	for (size_t i = 0; i < count; i++)
		forget_one(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&fs->t.lock);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct fs *fs = req_fs(req);
	if (ino == NODE_ROOT_INO && sb_backend_is_dead(fs->b)) {
		/* The root stays reachable so sbexec and `sbfs status` can
		 * find the daemon and say why everything else fails. */
		struct stat st;
		pthread_mutex_lock(&fs->t.lock);
		fs_node_stat(fs->t.root, &st);
		pthread_mutex_unlock(&fs->t.lock);
		st.st_uid = fs->uid;
		st.st_gid = fs->gid;
		fuse_reply_attr(req, &st, 0);
		return;
	}
	if (dead(fs, req))
		return;
	struct stat st;
	int err = 0;
	struct timespec now = fs_now();
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, ino);
	if (!n)
		err = -ENOENT;
	else if (!fs_attr_fresh(fs, n, &now) && !node_removed(n))
		n = refresh_attr(fs, n->parent, n->name, n, &err);
	if (n && err == 0)
		fs_node_stat(n, &st);
	pthread_mutex_unlock(&fs->t.lock);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, fs->cfg.attr_timeout);
}

/* Runs a path operation on node ino: copies its guest path under the lock
 * and calls fn without it. */
static char *path_of(struct fs *fs, fuse_ino_t ino, int *err)
{
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, ino);
	char *p = n ? fs_node_guest_path(fs, n, err) : NULL;
	if (!n)
		*err = -ENOENT;
	pthread_mutex_unlock(&fs->t.lock);
	return p;
}

static char *child_path_of(struct fs *fs, fuse_ino_t parent, const char *name,
			   int *err)
{
	*err = check_name(name);
	if (*err < 0)
		return NULL;
	char *dir = path_of(fs, parent, err);
	if (!dir)
		return NULL;
	char *p;
	if (asprintf(&p, "%s/%s", strcmp(dir, "/") ? dir : "", name) < 0) {
		p = NULL;
		*err = -ENOMEM;
	}
	free(dir);
	return p;
}

/* Takes a reference to n's spool for an operation that needs it without
 * the table lock. */
static struct file_state *pin_file(struct fs *fs, struct node *n)
{
	struct file_state *f = n->file;
	if (f)
		f->pins++;
	(void)fs;
	return f;
}

static void unpin_file(struct fs *fs, fuse_ino_t ino)
{
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, ino);
	if (n && n->file) {
		n->file->pins--;
		fs_file_unref(fs, n);
	}
	pthread_mutex_unlock(&fs->t.lock);
}

/* chown/lchown (never following a symlink) in the sandbox's ids. A file
 * not uploaded yet is uploaded first: an upload would otherwise make it
 * the sandbox user's again. f->lock held when f. */
static int chown_path(struct fs *fs, struct node *n, struct file_state *f,
		      const char *path, const struct stat *attr, int to_set)
{
	uid_t uid = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
	gid_t gid = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
	fs_unmap_owner(fs, &uid, &gid);
	int err = 0;
	if (f && f->dirty)
		err = fs_upload_locked(fs, n, f, path);
	return err < 0 ? err : sb_chown(fs->b, path, uid, gid);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	(void)fi;
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err = 0;
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, ino);
	if (!n) {
		pthread_mutex_unlock(&fs->t.lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* A spool kept only as a read cache is no open file: the change goes
	 * to the sandbox directly. */
	fs_file_forget(fs, n);
	struct file_state *f = pin_file(fs, n);
	char *path = fs_node_guest_path(fs, n, &err);
	pthread_mutex_unlock(&fs->t.lock);

	if (f)
		pthread_mutex_lock(&f->lock);
	/* Open but unlinked: it lives only in its spool, has no path, and
	 * nothing in the sandbox is to change (ftruncate after unlink). */
	bool orphan = f && f->unlinked;
	if (orphan && !path)
		err = 0;
	if ((path || orphan) && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (f)
			err = file_state_truncate(f, attr->st_size);
		else
			err = sb_truncate(fs->b, path, attr->st_size);
	}
	if (orphan) {
		if (err == 0 && (to_set & FUSE_SET_ATTR_MODE))
			f->mode = attr->st_mode & 07777;
	} else if (path && err == 0 && (to_set & FUSE_SET_ATTR_MODE)) {
		if (f && !f->remote_exists) {
			/* Applied when the new file is first uploaded. */
			f->mode = attr->st_mode & 07777;
		} else {
			err = sb_chmod(fs->b, path, attr->st_mode & 07777);
			if (err == 0 && f)
				f->mode = attr->st_mode & 07777;
		}
	}
	if (path && !orphan && err == 0 &&
	    (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		/* An upload would reset the times: upload first. */
		if (f && f->dirty)
			err = fs_upload_locked(fs, n, f, path);
		struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			ts[0].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			ts[0] = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			ts[1].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			ts[1] = attr->st_mtim;
		if (err == 0)
			err = sb_utimens(fs->b, path, ts);
	}
	if (path && !orphan && err == 0 &&
	    (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		err = chown_path(fs, n, f, path, attr, to_set);
	if (f)
		pthread_mutex_unlock(&f->lock);
	free(path);
	/* Write-back: a closed file changed by path goes back in the queue. */
	if (f && err == 0 && fs->wb && f->dirty && f->handles == 0)
		err = wb_commit(fs, n, f);

	/* Record what was changed rather than asking the sandbox again. */
	struct stat st;
	pthread_mutex_lock(&fs->t.lock);
	n = node_by_ino(&fs->t, ino);
	if (err == 0 && n) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (to_set & FUSE_SET_ATTR_MODE)
			n->st.st_mode = (n->st.st_mode & S_IFMT) | (attr->st_mode & 07777);
		if ((to_set & FUSE_SET_ATTR_SIZE) && !f) {
			n->st.st_size = attr->st_size;
			n->st.st_mtim = now;
		}
		if (to_set & FUSE_SET_ATTR_ATIME)
			n->st.st_atim = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? now : attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME)
			n->st.st_mtim = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? now : attr->st_mtim;
		if (to_set & FUSE_SET_ATTR_UID)
			n->st.st_uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			n->st.st_gid = attr->st_gid;
		n->st.st_ctim = now;
		fs_node_stat(n, &st);
	} else if (err == 0) {
		err = -ENOENT;
	}
	pthread_mutex_unlock(&fs->t.lock);
	if (f)
		unpin_file(fs, ino);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, fs->cfg.attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err = 0;
	struct timespec now = fs_now();
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, ino);
	char *target = NULL, *rel = n ? node_path(n) : NULL;
	if (n && n->link_target && fs_attr_fresh(fs, n, &now))
		target = strdup(n->link_target);
	pthread_mutex_unlock(&fs->t.lock);
	if (!n || !rel) {
		free(target);
		free(rel);
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!target) {
		char *path = path_of(fs, ino, &err);
		if (path)
			err = sb_readlink(fs->b, path, &target);
		free(path);
	}
	if (err < 0 || !target) {
		free(rel);
		fuse_reply_err(req, err < 0 ? -err : ENOMEM);
		return;
	}
	/* Never resolved here; shown only in a form that, followed by the
	 * host kernel, stays inside the mount (symlink_policy.h). */
	char *shown = NULL;
	err = symlink_policy_view(fs->workdir, rel, target, &shown);
	if (err < 0) {
		if (err != -ENOMEM)
			symlink_policy_log_refusal(rel, target, err);
		fuse_reply_err(req, -err);
	} else {
		fuse_reply_readlink(req, shown);
	}
	free(shown);
	free(rel);
	free(target);
}

/* What the sandbox looked like before a creating call, as far as the
 * caches go: a new directory's empty listing dates from then. */
struct before_create {
	uint64_t gen, exec_mark;
};

#define NOT_A_DIR ((struct before_create){0}) /* no listing to date */

static struct before_create before_create(struct fs *fs)
{
	pthread_mutex_lock(&fs->t.lock);
	struct before_create bc = {.gen = fs->t.gen,
				   .exec_mark = sb_exec_quiet_mark(fs->b)};
	pthread_mutex_unlock(&fs->t.lock);
	return bc;
}

/* Common tail of mkdir/symlink/mknod: record the new child and reply. */
static void reply_new_child(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
			    const char *name, mode_t mode, off_t size,
			    const char *link, struct before_create bc)
{
	struct fuse_entry_param e;
	int err = 0;
	pthread_mutex_lock(&fs->t.lock);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child_get(&fs->t, p, name) : NULL;
	if (p)
		node_entries_changed(p);
	if (p && n && S_ISDIR(mode))
		node_subdirs_changed(p, 1);
	if (n) {
		record_new(fs, n, mode, size, link);
		n->seen_mark = p->list_mark;
		if (S_ISDIR(mode)) {
			/* A new directory is empty: lookups inside it need
			 * no round trip. */
			n->list_set = true;
			n->list_gen = bc.gen;
			n->list_exec_mark = bc.exec_mark;
			n->list_expires = fs_expiry(fs->cfg.dir_timeout);
		}
		n->nlookup++;
		fill_entry(fs, n, &e);
	} else {
		err = p ? -ENOMEM : -ENOENT;
	}
	pthread_mutex_unlock(&fs->t.lock);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_entry(req, &e);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err;
	char *path = child_path_of(fs, parent, name, &err);
	struct before_create bc = before_create(fs);
	if (path)
		err = sb_mkdir(fs->b, path, mode & 07777);
	free(path);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		reply_new_child(req, fs, parent, name, S_IFDIR | (mode & 07777),
				4096, NULL, bc);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err;
	char *path = child_path_of(fs, parent, name, &err);
	if (path)
		err = sb_symlink(fs->b, link, path);
	free(path);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		reply_new_child(req, fs, parent, name, S_IFLNK | 0777,
				(off_t)strlen(link), link, NOT_A_DIR);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	(void)rdev;
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	if (!S_ISREG(mode)) {
		/* FIFOs and devices would be the host's, not the sandbox's. */
		fuse_reply_err(req, EPERM);
		return;
	}
	int err;
	char *path = child_path_of(fs, parent, name, &err);
	if (path) {
		/* An empty upload creates the file with its mode. */
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		err = fd < 0 ? -errno : sb_write_file(fs->b, path, fd, 0, mode & 07777);
		if (fd >= 0)
			close(fd);
	}
	free(path);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		reply_new_child(req, fs, parent, name, S_IFREG | (mode & 07777),
				0, NULL, NOT_A_DIR);
}

/* The other names of a hard-linked file: their cached link count (and
 * ctime) changed with a link or unlink elsewhere. */
struct same_file {
	dev_t dev;
	ino_t ino;
	uint64_t *v;
	size_t n, cap;
};

static void collect_same_file(struct node *n, void *arg)
{
	struct same_file *s = arg;
	/* attributes forgotten earlier still name the file they were of */
	if (S_ISDIR(n->st.st_mode) || n->guest_ino != s->ino ||
	    n->guest_dev != s->dev)
		return;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		uint64_t *v = realloc(s->v, cap * sizeof *v);
		if (!v)
			return;
		s->v = v;
		s->cap = cap;
	}
	node_forget_attr(n);
	s->v[s->n++] = n->ino;
}

/* Forgets the attributes of every node that is the sandbox file
 * (dev, ino), here and in the kernel. Table lock not held. */
static void forget_same_file(struct fs *fs, dev_t dev, ino_t ino)
{
	if (ino == 0) /* a backend that does not report inodes */
		return;
	struct same_file s = {.dev = dev, .ino = ino};
	pthread_mutex_lock(&fs->t.lock);
	node_walk(fs->t.root, collect_same_file, &s);
	pthread_mutex_unlock(&fs->t.lock);
	/* Outside the table lock: the kernel may call back into us. */
	for (size_t i = 0; fs->se && i < s.n; i++)
		fuse_lowlevel_notify_inval_inode(fs->se, s.v[i], -1, 0);
	free(s.v);
}

/* A file still only in its spool (new, or written and not uploaded) is
 * uploaded first, so the new name shares what the old one shows. */
static int upload_before_link(struct fs *fs, fuse_ino_t ino, const char *from)
{
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, ino);
	struct file_state *f = n ? pin_file(fs, n) : NULL;
	pthread_mutex_unlock(&fs->t.lock);
	if (!f)
		return n ? 0 : -ENOENT;
	pthread_mutex_lock(&f->lock);
	int err = f->dirty ? fs_upload_locked(fs, n, f, from) : 0;
	pthread_mutex_unlock(&f->lock);
	unpin_file(fs, ino);
	return err;
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err;
	char *from = path_of(fs, ino, &err);
	char *to = from ? child_path_of(fs, newparent, newname, &err) : NULL;
	if (to)
		err = upload_before_link(fs, ino, from);
	if (to && err == 0)
		err = sb_link(fs->b, from, to);
	/* Both names are one file: what the sandbox says of it now holds
	 * for both, link count included. */
	struct stat st;
	char *target = NULL;
	if (to && err == 0)
		err = sb_stat(fs->b, to, &st, &target);
	free(from);
	free(to);
	if (err < 0) {
		free(target);
		fuse_reply_err(req, -err);
		return;
	}
	forget_same_file(fs, st.st_dev, st.st_ino);
	struct fuse_entry_param e;
	pthread_mutex_lock(&fs->t.lock);
	struct node *p = node_by_ino(&fs->t, newparent);
	struct node *n = p ? node_child_get(&fs->t, p, newname) : NULL;
	struct node *old = node_by_ino(&fs->t, ino);
	if (p)
		node_entries_changed(p); /* a new name: its mtime and ctime */
	if (n) {
		struct stat copy = st;
		record_attr(fs, n, &st, target);
		if (old && old != n)
			record_attr(fs, old, &copy, target);
		n->seen_mark = p->list_mark;
		n->nlookup++;
		fill_entry(fs, n, &e);
	} else {
		err = p ? -ENOMEM : -ENOENT;
	}
	pthread_mutex_unlock(&fs->t.lock);
	free(target);
	if (err < 0) {
		fuse_reply_err(req, -err);
		return;
	}
	fuse_reply_entry(req, &e);
	/* The kernel keeps the old name's link count otherwise. After the
	 * reply: it updates that inode's ctime when the reply comes. */
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
}

/* Files below dir still waiting for their upload (write-back): not in
 * the sandbox yet, but dir is not empty. Table lock held. */
static bool pending_upload_below(const struct node *dir)
{
	for (const struct node *c = dir->children; c; c = c->next_sibling)
		if (c->file && c->file->dirty && !c->file->unlinked)
			return true;
	return false;
}

/* Whether dir is certainly empty in the sandbox (wbr_rmdir_can_queue).
 * A change made behind the mount's back otherwise (a process a command
 * left running) still makes a queued rmdir fail: that is reported at the
 * next barrier and the directory shows again (wb_removes.c). Table lock
 * held. */
static bool known_empty(struct fs *fs, const struct node *dir,
			const struct timespec *now)
{
	struct wbr_dir_view v = {
		.has_children = dir->children != NULL,
		.pending_upload = pending_upload_below(dir),
		.list_fresh = node_list_fresh(&fs->t, dir, now),
		.list_exec_mark = dir->list_exec_mark,
		.exec_mark = sb_exec_quiet_mark(fs->b),
	};
	return wbr_rmdir_can_queue(&v);
}

/* A file losing its last name while open lives on in its spool alone
 * (f->unlinked): what the spool has not fetched yet must come over now,
 * while the sandbox still has it, or a later read of the open fd has
 * nothing to read from. f->lock held. */
static void keep_open_content(struct fs *fs, struct file_state *f,
			      const char *path)
{
	if (f->handles == 0 || f->unlinked || file_state_complete(f))
		return;
	int r = file_state_upload_prepare(f, fs->b, path);
	if (r < 0)
		sb_warn("%s: could not keep the content of the removed open "
			"file (%s); reads of its open descriptors may fail",
			path, strerror(-r));
}

static void remove_child(fuse_req_t req, fuse_ino_t parent, const char *name,
			 bool is_dir)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err;
	char *path = child_path_of(fs, parent, name, &err);
	if (!path) {
		fuse_reply_err(req, -err);
		return;
	}
	pthread_mutex_lock(&fs->t.lock);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	uint64_t ino = n ? n->ino : 0;
	struct file_state *f = n ? pin_file(fs, n) : NULL;
	bool pending_below = is_dir && n && pending_upload_below(n);
	/* Write-back queues the remove (wb_removes.h): a file always, a
	 * directory only when it is known empty; otherwise the sandbox
	 * answers now, after the queued removes it depends on (the
	 * dispatcher lands them ahead of the call). */
	struct timespec now = fs_now();
	bool queue = fs->wb && n && (!is_dir || known_empty(fs, n, &now));
	pthread_mutex_unlock(&fs->t.lock);
	if (pending_below) {
		free(path);
		if (f)
			unpin_file(fs, ino);
		fuse_reply_err(req, ENOTEMPTY);
		return;
	}

	/* Holding the spool's lock orders the removal after an upload in
	 * flight and keeps one from starting after it. */
	if (f)
		pthread_mutex_lock(&f->lock);
	if (f)
		keep_open_content(fs, f, path);
	if (f && !f->remote_exists)
		err = 0; /* created here and never uploaded: nothing to remove */
	else if (!queue || wb_queue_remove(fs, path, is_dir) < 0)
		err = sb_remove(fs->b, path, is_dir);
	else
		err = 0;
	if (f && (err == 0 || err == -ENOENT)) {
		f->unlinked = true;
		wb_forget(fs, f); /* a queued upload is cancelled */
	}
	if (f)
		pthread_mutex_unlock(&f->lock);
	free(path);
	bool linked = false;
	dev_t file_dev = 0;
	ino_t file_ino = 0;
	if (err == 0 || err == -ENOENT) {
		pthread_mutex_lock(&fs->t.lock);
		p = node_by_ino(&fs->t, parent);
		n = p ? node_child(&fs->t, p, name) : NULL;
		if (p && err == 0)
			node_entries_changed(p);
		if (p && err == 0 && is_dir)
			node_subdirs_changed(p, -1);
		if (n && (!ino || n->ino == ino)) {
			linked = !is_dir && n->st.st_nlink > 1;
			file_dev = n->guest_dev;
			file_ino = n->guest_ino;
			node_detach(&fs->t, n);
		}
		pthread_mutex_unlock(&fs->t.lock);
	}
	if (linked) /* its other names lost a link */
		forget_same_file(fs, file_dev, file_ino);
	if (f)
		unpin_file(fs, ino);
	fuse_reply_err(req, -err);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_child(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_child(req, parent, name, true);
}

/* Write-back: a file still waiting for its first upload is renamed here
 * only, and uploaded under its new name (an editor's or git's write-temp-
 * then-rename costs no call). Its lock keeps a worker from uploading it
 * under the old name meanwhile. A file the rename replaces loses its own
 * pending upload. Returns false when the rename must go to the sandbox. */
static bool rename_pending(struct fs *fs, uint64_t nino, struct file_state *f,
			   struct file_state *of, fuse_ino_t newparent,
			   const char *newname, int *err)
{
	pthread_mutex_lock(&f->lock);
	if (!f->dirty || f->remote_exists || f->unlinked) {
		pthread_mutex_unlock(&f->lock);
		return false;
	}
	if (of) {
		pthread_mutex_lock(&of->lock);
		of->unlinked = true;
		wb_forget(fs, of);
	}
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, nino);
	struct node *np = node_by_ino(&fs->t, newparent);
	char *rel = NULL;
	if (!n || !np) {
		*err = -ENOENT;
	} else {
		struct node *from = n->parent;
		*err = node_move(&fs->t, n, np, newname);
		n->seen_mark = np->list_mark;
		rel = node_path(n);
		if (from)
			node_entries_changed(from);
		node_entries_changed(np);
		n->st.st_ctim = np->st.st_ctim;
	}
	pthread_mutex_unlock(&fs->t.lock);
	if (*err == 0)
		wb_renamed(fs, f, rel);
	free(rel);
	if (of)
		pthread_mutex_unlock(&of->lock);
	pthread_mutex_unlock(&f->lock);
	return true;
}

/* A directory moved from p to np (over a directory there when
 * replaced): the parents' link counts follow. Table lock held. */
static void rename_subdir_counts(struct node *p, struct node *np,
				 bool replaced)
{
	if (p && p != np)
		node_subdirs_changed(p, -1);
	if (np && p != np && !replaced)
		node_subdirs_changed(np, 1);
	if (np && p == np && replaced)
		node_subdirs_changed(np, -1);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	if (flags & ~RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	int err = check_name(newname);
	if (err < 0) {
		fuse_reply_err(req, -err);
		return;
	}
	pthread_mutex_lock(&fs->t.lock);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	bool subtree = n && n->children;
	struct file_state *f = n ? pin_file(fs, n) : NULL;
	uint64_t nino = n ? n->ino : 0;
	struct node *np = node_by_ino(&fs->t, newparent);
	struct node *old = np ? node_child(&fs->t, np, newname) : NULL;
	struct file_state *of = old && old != n ? pin_file(fs, old) : NULL;
	uint64_t oino = old ? old->ino : 0;
	bool old_is_dir = old && S_ISDIR(old->st.st_mode);
	bool moved_dir = n && old != n && S_ISDIR(n->st.st_mode);
	/* The sandbox's copy of a directory whose files are still pending
	 * upload may be empty: the rename would succeed there and replace
	 * them. The kernel checks the types; emptiness is ours to know. */
	bool old_not_empty = fs->wb && old_is_dir && old != n &&
			     pending_upload_below(old);
	pthread_mutex_unlock(&fs->t.lock);
	if (old_not_empty) {
		err = -ENOTEMPTY;
		goto out;
	}

	if (fs->wb && f && !subtree && !flags && !old_is_dir &&
	    rename_pending(fs, nino, f, of, newparent, newname, &err))
		goto out;

	/* The sandbox must have what it renames: pending data first. Below a
	 * directory, no worker may upload by the old paths meanwhile. */
	bool paths_locked = subtree && fs->wb;
	if (paths_locked) {
		wb_drain(fs);
		wb_paths_write_lock(fs);
	}
	if (subtree) {
		char msg[256] = "";
		err = fs_flush_dirty(fs, msg, sizeof msg);
	}
	if (f && err == 0)
		err = fs_upload_file(fs, n, f);
	char *from = err == 0 ? child_path_of(fs, parent, name, &err) : NULL;
	char *to = from ? child_path_of(fs, newparent, newname, &err) : NULL;
	/* A replaced file's queued upload must not land after the rename. */
	if (of)
		pthread_mutex_lock(&of->lock);
	if (of && to && !(flags & RENAME_NOREPLACE))
		keep_open_content(fs, of, to);
	if (from && to)
		err = sb_rename(fs->b, from, to, flags & RENAME_NOREPLACE);
	if (of && err == 0) {
		of->unlinked = true;
		wb_forget(fs, of);
	}
	if (of)
		pthread_mutex_unlock(&of->lock);
	free(from);
	free(to);
	if (err == 0) {
		pthread_mutex_lock(&fs->t.lock);
		p = node_by_ino(&fs->t, parent);
		np = node_by_ino(&fs->t, newparent);
		n = p ? node_child(&fs->t, p, name) : NULL;
		old = np ? node_child(&fs->t, np, newname) : NULL;
		if (old && old != n && old->file)
			old->file->unlinked = true;
		entries_changed(fs, parent);
		entries_changed(fs, newparent);
		if (moved_dir)
			rename_subdir_counts(p, np, old_is_dir);
		if (n && np) {
			err = node_move(&fs->t, n, np, newname);
			n->seen_mark = np->list_mark;
			/* A rename changes the node's ctime only; the times
			 * are the call's, as the parents' are. */
			n->st.st_ctim = np->st.st_ctim;
		} else if (old) {
			node_detach(&fs->t, old);
		}
		pthread_mutex_unlock(&fs->t.lock);
	}
	if (paths_locked)
		wb_paths_unlock(fs);
out:
	if (f)
		unpin_file(fs, nino);
	if (of)
		unpin_file(fs, oino);
	fuse_reply_err(req, -err);
}

/* ---- files ---- */

/* A spool kept from an earlier open may hold an older copy than the one
 * the sandbox has now (an sbexec rewrote the file): its content goes, so
 * that neither a read nor a write through this open builds on it (a write
 * would upload the old bytes around the new ones). The node's attributes
 * were just made fresh by the open. */
static void revalidate_spool(struct fs *fs, fuse_ino_t ino,
			     struct file_state *f)
{
	pthread_mutex_lock(&f->lock);
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, ino);
	struct timespec now = fs_now();
	bool known = n && n->file == f;
	off_t size = known ? n->st.st_size : 0;
	struct timespec mtime = known ? n->st.st_mtim : now;
	bool from_sandbox = known && node_attr_fresh(&fs->t, n, &now);
	pthread_mutex_unlock(&fs->t.lock);
	if (known)
		file_state_revalidate(f, size, &mtime, from_sandbox);
	pthread_mutex_unlock(&f->lock);
}

/* Attaches a handle to the node's spool, making the spool if it is the
 * first. Returns 0 or -errno; the caller replies. */
static int open_handle(struct fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		       bool created, mode_t create_mode)
{
	int err = 0;
	struct timespec now = fs_now();
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, ino);
	if (!n) {
		pthread_mutex_unlock(&fs->t.lock);
		return -ENOENT;
	}
	/* Close-to-open: a fresh size and mtime decide whether the page
	 * cache and a kept spool still hold the sandbox's content. */
	if (!created && !fs_attr_fresh(fs, n, &now))
		n = refresh_attr(fs, n->parent, n->name, n, &err);
	if (n && err == 0 && n->file) {
		struct file_state *kept = n->file;
		fs_file_reuse(fs, kept);
		if (kept->dirty)
			fi->keep_cache = 1; /* the spool is shared: same content */
		else if (kept->identity_known && !kept->invalidated &&
			 kept->size == n->st.st_size &&
			 kept->remote_mtime.tv_sec == n->st.st_mtim.tv_sec &&
			 kept->remote_mtime.tv_nsec == n->st.st_mtim.tv_nsec)
			/* The sandbox's copy is still the one the spool, and
			 * so the page cache, were filled from. */
			fi->keep_cache = 1;
	} else if (n && err == 0 && S_ISDIR(n->st.st_mode)) {
		err = -EISDIR;
	} else if (n && err == 0) {
		n->file = file_state_new(fs->cfg.spool_dir,
					 created ? 0 : n->st.st_size,
					 created ? create_mode : n->st.st_mode,
					 !created);
		if (!n->file) {
			err = -errno;
		} else {
			n->file->remote_mtime = n->st.st_mtim;
			n->file->dirty = created;
			if (n->cached_content && !created &&
			    n->cached_size == n->st.st_size &&
			    n->cached_mtime.tv_sec == n->st.st_mtim.tv_sec &&
			    n->cached_mtime.tv_nsec == n->st.st_mtim.tv_nsec)
				fi->keep_cache = 1;
		}
	}
	struct file_state *f = n && err == 0 ? n->file : NULL;
	if (f) {
		f->handles++;
		n->cached_content = false;
	}
	pthread_mutex_unlock(&fs->t.lock);
	if (f && !created)
		revalidate_spool(fs, ino, f);
	if (f && (fi->flags & O_TRUNC) && !created) {
		pthread_mutex_lock(&f->lock);
		err = file_state_truncate(f, 0);
		pthread_mutex_unlock(&f->lock);
		fi->keep_cache = 0;
	}
	if (err < 0) {
		if (f) {
			pthread_mutex_lock(&fs->t.lock);
			n = node_by_ino(&fs->t, ino);
			if (n && n->file) {
				n->file->handles--;
				fs_file_unref(fs, n);
			}
			pthread_mutex_unlock(&fs->t.lock);
		}
		return err;
	}
	fi->fh = ino;
	return 0;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err = open_handle(fs, ino, fi, false, 0);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_open(req, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err = check_name(name);
	if (err < 0) {
		fuse_reply_err(req, -err);
		return;
	}
	struct fuse_entry_param e;
	pthread_mutex_lock(&fs->t.lock);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	struct timespec now = fs_now();
	if (!p) {
		err = -ENOENT;
	} else if (n && fs_attr_fresh(fs, n, &now) && (fi->flags & O_EXCL)) {
		err = -EEXIST;
	} else {
		/* Nothing is sent yet: the file reaches the sandbox with its
		 * content on close (one call per small file). */
		n = node_child_get(&fs->t, p, name);
		if (!n)
			err = -ENOMEM;
		else if (n->file)
			err = -EBUSY;
	}
	if (err == 0) {
		record_new(fs, n, S_IFREG | (mode & 07777), 0, NULL);
		node_entries_changed(p);
		n->seen_mark = p->list_mark;
		n->nlookup++;
	}
	uint64_t ino = n ? n->ino : 0;
	pthread_mutex_unlock(&fs->t.lock);
	if (err < 0) {
		fuse_reply_err(req, -err);
		return;
	}
	err = open_handle(fs, ino, fi, true, mode & 07777);
	pthread_mutex_lock(&fs->t.lock);
	n = node_by_ino(&fs->t, ino);
	if (err == 0 && n)
		fill_entry(fs, n, &e);
	else if (err == 0)
		err = -ENOENT;
	pthread_mutex_unlock(&fs->t.lock);
	if (err < 0)
		fuse_reply_err(req, -err);
	else
		fuse_reply_create(req, &e, fi);
}

/* The spool of an open handle, pinned for use without the table lock. */
static struct file_state *handle_file(struct fs *fs, struct fuse_file_info *fi,
				      struct node **np)
{
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, fi->fh);
	struct file_state *f = n ? pin_file(fs, n) : NULL;
	pthread_mutex_unlock(&fs->t.lock);
	*np = n;
	return f;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	struct node *n;
	struct file_state *f = handle_file(fs, fi, &n);
	if (!f) {
		fuse_reply_err(req, EBADF);
		return;
	}
	char *buf = malloc(size ? size : 1);
	ssize_t r = buf ? 0 : -ENOMEM;
	pthread_mutex_lock(&f->lock);
	char *path = NULL;
	if (buf) {
		int err = 0;
		pthread_mutex_lock(&fs->t.lock);
		path = fs_node_guest_path(fs, n, &err);
		off_t remote_size = n->st.st_size;
		struct timespec remote_mtime = n->st.st_mtim, now = fs_now();
		bool from_sandbox = node_attr_fresh(&fs->t, n, &now);
		pthread_mutex_unlock(&fs->t.lock);
		/* The sandbox may have changed the file since the spool was
		 * filled (an sbexec, a refresh): then its cache goes. */
		if (path)
			file_state_revalidate(f, remote_size, &remote_mtime,
					      from_sandbox);
		/* An unlinked file is read from what the spool holds. */
		if (!path && !f->unlinked)
			r = err;
		else
			r = file_state_read(f, fs->b, path ? path : "", buf,
					    size, off);
	}
	bool changed = f->remote_changed;
	f->remote_changed = false;
	pthread_mutex_unlock(&f->lock);
	free(path);
	if (changed) {
		/* The read found another version in the sandbox than the
		 * attributes said (and followed it): ask for them again. */
		pthread_mutex_lock(&fs->t.lock);
		n = node_by_ino(&fs->t, ino);
		if (n)
			node_forget_attr(n);
		pthread_mutex_unlock(&fs->t.lock);
	}
	unpin_file(fs, ino);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
	free(buf);
	/* After the reply: the kernel may wait on this read's pages. Offset
	 * -1: attributes only, the page cache is left to the next open. */
	if (changed && fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	struct node *n;
	struct file_state *f = handle_file(fs, fi, &n);
	if (!f) {
		fuse_reply_err(req, EBADF);
		return;
	}
	pthread_mutex_lock(&f->lock);
	ssize_t r = file_state_write(f, buf, size, off);
	pthread_mutex_unlock(&f->lock);
	unpin_file(fs, ino);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_write(req, (size_t)r);
}

/* Uploads the handle's file if it is dirty and replies. */
static void upload_reply(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi, bool is_flush)
{
	struct fs *fs = req_fs(req);
	struct node *n;
	struct file_state *f = handle_file(fs, fi, &n);
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
		unpin_file(fs, ino);
	fuse_reply_err(req, -err);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	upload_reply(req, ino, fi, true);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	(void)datasync;
	wb_drain_removes(req_fs(req)); /* a barrier for queued removes too */
	upload_reply(req, ino, fi, false);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct node *n;
	struct file_state *f = handle_file(fs, fi, &n);
	/* The last close of a file whose upload waited (see upload_reply). A
	 * failure here has no caller to tell: the file stays pending, shown in
	 * status and retried at the next sync, sbexec or unmount. */
	if (f && f->handles == 1 && f->dirty && fs->wb)
		wb_commit(fs, n, f);
	else if (f && f->handles == 1 && f->dirty)
		fs_upload_file(fs, n, f);
	pthread_mutex_lock(&fs->t.lock);
	n = node_by_ino(&fs->t, ino);
	if (n && n->file) {
		n->file->handles--;
		n->file->pins--;
		fs_file_unref(fs, n);
	}
	pthread_mutex_unlock(&fs->t.lock);
	fuse_reply_err(req, 0);
}

/* ---- directories ---- */

struct dir_entry {
	char *name;
	uint64_t ino;
	struct stat st;
};

struct dir_handle {
	struct dir_entry *v;
	size_t n;
};

static void dir_handle_free(struct dir_handle *d)
{
	for (size_t i = 0; d && i < d->n; i++)
		free(d->v[i].name);
	if (d)
		free(d->v);
	free(d);
}

/* Tries to fetch a listing this many times while the mount keeps changing
 * the directory before giving up on caching one. */
#define LISTING_TRIES 4

/* True when child c, which a listing does not name, may have reached the
 * sandbox only after the listing was made: a file created here whose
 * first upload is not done, or done since first_uploads was read (the
 * count moves before the file stops showing as new, hence the fence). */
static bool newer_than_listing(const struct node *c, uint64_t first_uploads)
{
	if (!c->file)
		return false;
	if (!c->file->remote_exists)
		return true;
	atomic_thread_fence(memory_order_seq_cst);
	return file_state_first_uploads() != first_uploads;
}

/* What the mount knew just before a listing's call: a change of any of
 * these while it was under way makes the listing stale, not fresh. */
struct listing_start {
	uint64_t first_uploads; /* file_state_first_uploads() */
	uint64_t gen;		/* the table's coherence generation */
	uint64_t exec_mark;	/* sb_exec_quiet_mark(): sbexec commands */
};

/* Replaces the cached listing of directory node p with list, fetched
 * while the table was unlocked. Table lock held. */
static void apply_listing(struct fs *fs, struct node *p,
			  const struct sb_dirlist *list,
			  const struct listing_start *before)
{
	uint64_t mark = ++p->list_mark;
	struct timespec exp = fs_expiry(fs->cfg.attr_timeout);
	p->list_gen = before->gen;
	p->list_exec_mark = before->exec_mark;
	for (size_t i = 0; i < list->n; i++) {
		struct sb_dirent *d = &list->v[i];
		if (check_name(d->name) < 0 || strcmp(d->name, ".") == 0 ||
		    strcmp(d->name, "..") == 0)
			continue; /* never trust a name the sandbox sends */
		struct node *c = node_child_get(&fs->t, p, d->name);
		if (!c)
			break;
		c->seen_mark = mark;
		if (!c->file || !c->file->dirty) {
			fs_map_attr(fs, &d->st);
			node_set_attr(&fs->t, c, &d->st, d->link_target, &exp);
		}
	}
	p->list_entries = list->n;
	/* Children the listing no longer names are gone, unless they are
	 * newer than the listing. */
	struct node *c = p->children;
	while (c) {
		struct node *next = c->next_sibling;
		if (c->seen_mark != mark &&
		    !newer_than_listing(c, before->first_uploads))
			node_detach(&fs->t, c);
		else
			c->seen_mark = mark;
		c = next;
	}
	p->list_set = true;
	p->list_expires = fs_expiry(fs->cfg.dir_timeout);
}

/* Replaces the cached listing of directory node ino with the sandbox's.
 * Table lock held; dropped around the call. -EAGAIN when the mount kept
 * changing the directory during every try: then nothing is cached and
 * the caller answers from the sandbox name by name. */
static int load_listing(struct fs *fs, uint64_t ino)
{
	for (int try = 0; try < LISTING_TRIES; try++) {
		int err = 0;
		struct node *p = node_by_ino(&fs->t, ino);
		char *path = p ? fs_node_guest_path(fs, p, &err) : NULL;
		if (!path)
			return p ? err : -ENOENT;
		uint64_t changes = p->entry_changes;
		struct listing_start before = {
			.first_uploads = file_state_first_uploads(),
			.gen = fs->t.gen,
			.exec_mark = sb_exec_quiet_mark(fs->b),
		};
		pthread_mutex_unlock(&fs->t.lock);
		struct sb_dirlist list = {0};
		err = sb_list_dir(fs->b, path, &list);
		free(path);
		pthread_mutex_lock(&fs->t.lock);
		p = node_by_ino(&fs->t, ino);
		if (err == 0 && !p)
			err = -ENOENT;
		if (err == 0 && p->entry_changes != changes) {
			/* It may predate a create, remove or rename of ours. */
			sb_dirlist_free(&list);
			continue;
		}
		if (err == 0)
			apply_listing(fs, p, &list, &before);
		sb_dirlist_free(&list);
		return err;
	}
	return -EAGAIN;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	int err = 0;
	struct timespec now = fs_now();
	struct dir_handle *d = calloc(1, sizeof *d);
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&fs->t.lock);
	struct node *p = node_by_ino(&fs->t, ino);
	if (!p)
		err = -ENOENT;
	else if (!node_list_fresh(&fs->t, p, &now))
		err = load_listing(fs, ino);
	if (err == -EAGAIN)
		err = 0; /* kept changing: what the nodes know, uncached */
	p = node_by_ino(&fs->t, ino);
	if (err == 0 && p) {
		size_t n = 0;
		for (struct node *c = p->children; c; c = c->next_sibling)
			n++;
		d->v = calloc(n + 2, sizeof *d->v);
		if (!d->v)
			err = -ENOMEM;
		for (struct node *c = p->children; c && d->v; c = c->next_sibling) {
			struct dir_entry *e = &d->v[d->n];
			e->name = strdup(c->name);
			if (!e->name)
				break;
			e->ino = c->ino;
			fs_node_stat(c, &e->st);
			d->n++;
		}
		p->open_dirs++;
	} else if (err == 0) {
		err = -ENOENT;
	}
	pthread_mutex_unlock(&fs->t.lock);
	if (err < 0) {
		dir_handle_free(d);
		fuse_reply_err(req, -err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	fuse_reply_open(req, fi);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi, bool plus)
{
	struct fs *fs = req_fs(req);
	struct dir_handle *d = (struct dir_handle *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	/* Offsets: 0 ".", 1 "..", 2+i the i-th child. */
	pthread_mutex_lock(&fs->t.lock);
	for (off_t i = off; i < (off_t)d->n + 2; i++) {
		const char *name;
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		struct node *n = NULL;
		if (i < 2) {
			name = i == 0 ? "." : "..";
			e.attr.st_ino = ino;
			e.attr.st_mode = S_IFDIR;
		} else {
			struct dir_entry *de = &d->v[i - 2];
			name = de->name;
			e.attr = de->st;
			n = node_by_ino(&fs->t, de->ino);
			if (plus && n) {
				fill_entry(fs, n, &e);
			}
		}
		size_t len;
		if (plus)
			len = fuse_add_direntry_plus(req, buf + used, size - used,
						     name, &e, i + 1);
		else
			len = fuse_add_direntry(req, buf + used, size - used,
						name, &e.attr, i + 1);
		if (len > size - used)
			break;
		/* The kernel now holds a reference to the inode. */
		if (plus && n)
			n->nlookup++;
		used += len;
	}
	pthread_mutex_unlock(&fs->t.lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	dir_handle_free((struct dir_handle *)(uintptr_t)fi->fh);
	pthread_mutex_lock(&fs->t.lock);
	struct node *n = node_by_ino(&fs->t, ino);
	if (n && n->open_dirs > 0) {
		n->open_dirs--;
		node_release_if_unused(&fs->t, n);
	}
	pthread_mutex_unlock(&fs->t.lock);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	/* Directory operations are synchronous, but for write-back's queued
	 * removes: they land now (a failure is reported at the next sync). */
	wb_drain_removes(req_fs(req));
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct fs *fs = req_fs(req);
	if (dead(fs, req))
		return;
	struct statvfs st;
	struct timespec now = fs_now();
	pthread_mutex_lock(&fs->t.lock);
	bool cached = fs->statfs_valid && fs->statfs_gen == fs->t.gen &&
		      (now.tv_sec < fs->statfs_expires.tv_sec ||
		       (now.tv_sec == fs->statfs_expires.tv_sec &&
			now.tv_nsec < fs->statfs_expires.tv_nsec));
	uint64_t gen = fs->t.gen;
	st = fs->statfs_cache;
	pthread_mutex_unlock(&fs->t.lock);
	if (cached) {
		fuse_reply_statfs(req, &st);
		return;
	}
	int err = sb_statfs(fs->b, fs->workdir, &st);
	if (err < 0) {
		fuse_reply_err(req, -err);
		return;
	}
	pthread_mutex_lock(&fs->t.lock);
	fs->statfs_cache = st;
	fs->statfs_expires = fs_expiry(fs->cfg.attr_timeout);
	fs->statfs_gen = gen;
	fs->statfs_valid = true;
	pthread_mutex_unlock(&fs->t.lock);
	fuse_reply_statfs(req, &st);
}

/* ---- xattrs: only the root's control-socket attribute ---- */

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct fs *fs = req_fs(req);
	const char *value = fs->cfg.control_socket;
	if (ino != NODE_ROOT_INO || !value || strcmp(name, SBFS_XATTR_CONTROL)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	size_t len = strlen(value);
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, value, len);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = req_fs(req);
	size_t len = sizeof SBFS_XATTR_CONTROL;
	if (ino != NODE_ROOT_INO || !fs->cfg.control_socket)
		len = 0;
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, SBFS_XATTR_CONTROL, len);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	(void)ino;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(req, ENOTSUP);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino;
	(void)name;
	fuse_reply_err(req, ENOTSUP);
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
