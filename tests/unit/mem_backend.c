#include "tests/unit/mem_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mnode {
	char *name;
	struct stat st;
	char *data;       /* regular files */
	char *link;       /* symlinks */
	struct mnode *parent, *kids, *next;
};

struct mfault {
	enum sb_call kind;
	char *path;
	int err;
	unsigned times;
};

#define MEM_FAULTS 16

/* mem_after: what runs once the next call of kind has its answer. */
struct mafter {
	enum sb_call kind;
	void (*fn)(void *arg);
	void *arg;
};

struct mem {
	pthread_mutex_t lock;
	struct mnode *root;
	ino_t next_ino;
	long tick;        /* mtimes: one second per change, never equal */
	struct mfault faults[MEM_FAULTS];
	struct mafter after;
	enum mem_hold hold_reads; /* mem_hold_reads; hold_cv with lock */
	pthread_cond_t hold_cv;
	char *log;
	size_t log_len;
	bool no_inodes;   /* mem_tell_no_inodes */
	bool owner_names; /* mem_tell_owner_names */
};

static struct mem *mem_of(struct sb_backend *b) { return b->priv; }

/* ---- the tree (m->lock held) ---- */

static struct mnode *node_new(struct mem *m, const char *name, mode_t mode)
{
	struct mnode *n = calloc(1, sizeof *n);
	n->name = strdup(name);
	n->st.st_mode = mode;
	n->st.st_ino = ++m->next_ino;
	n->st.st_dev = 42;
	n->st.st_nlink = S_ISDIR(mode) ? 2 : 1;
	n->st.st_uid = MEM_GUEST_UID;
	n->st.st_gid = MEM_GUEST_GID;
	n->st.st_mtim.tv_sec = ++m->tick;
	n->st.st_ctim = n->st.st_atim = n->st.st_mtim;
	return n;
}

static void node_free(struct mnode *n)
{
	while (n->kids) {
		struct mnode *k = n->kids;
		n->kids = k->next;
		node_free(k);
	}
	free(n->name);
	free(n->data);
	free(n->link);
	free(n);
}

static struct mnode *kid(struct mnode *d, const char *name, size_t len)
{
	for (struct mnode *k = d->kids; k; k = k->next)
		if (strlen(k->name) == len && memcmp(k->name, name, len) == 0)
			return k;
	return NULL;
}

/* The node at path, or NULL; *parent: the directory that would hold it
 * and *leaf its last name, when every component before it exists. */
static struct mnode *walk(struct mem *m, const char *path,
			  struct mnode **parent, const char **leaf)
{
	struct mnode *n = m->root;
	const char *p = path;
	if (parent)
		*parent = NULL;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			return n;
		size_t len = strcspn(p, "/");
		const char *rest = p + len;
		while (*rest == '/')
			rest++;
		if (!n || !S_ISDIR(n->st.st_mode))
			return NULL;
		struct mnode *k = kid(n, p, len);
		if (!*rest) {
			if (parent) {
				*parent = n;
				*leaf = p;
			}
			return k;
		}
		n = k;
		p = rest;
	}
}

static void attach(struct mnode *d, struct mnode *n)
{
	n->parent = d;
	n->next = d->kids;
	d->kids = n;
	if (S_ISDIR(n->st.st_mode))
		d->st.st_nlink++;
}

static void detach(struct mnode *n)
{
	struct mnode **pp = &n->parent->kids;
	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	if (S_ISDIR(n->st.st_mode))
		n->parent->st.st_nlink--;
	n->parent = NULL;
	n->next = NULL;
}

static void touch(struct mem *m, struct mnode *n)
{
	n->st.st_mtim.tv_sec = ++m->tick;
	n->st.st_mtim.tv_nsec = 0;
	n->st.st_ctim = n->st.st_mtim;
}

static void log_line(struct mem *m, const char *what, const char *a,
		     const char *b)
{
	char *line;
	int len = asprintf(&line, "%s %s%s%s\n", what, a, b ? " " : "", b ? b : "");
	if (len < 0)
		return;
	m->log = realloc(m->log, m->log_len + (size_t)len + 1);
	memcpy(m->log + m->log_len, line, (size_t)len + 1);
	m->log_len += (size_t)len;
	free(line);
}

/* A planned failure for this call, consumed; 0 if none. */
static int fault(struct mem *m, enum sb_call kind, const char *path)
{
	for (int i = 0; i < MEM_FAULTS; i++) {
		struct mfault *f = &m->faults[i];
		if (f->times == 0 || f->kind != kind ||
		    (f->path && (!path || strcmp(f->path, path) != 0)))
			continue;
		f->times--;
		return f->err;
	}
	return 0;
}

/* Makes a new entry under path's parent. */
static int make(struct mem *m, const char *path, mode_t mode,
		struct mnode **out)
{
	struct mnode *d;
	const char *leaf;
	if (walk(m, path, &d, &leaf))
		return -EEXIST;
	if (!d)
		return -ENOENT;
	*out = node_new(m, leaf, mode);
	attach(d, *out);
	touch(m, d);
	return 0;
}

static int make(struct mem *m, const char *path, mode_t mode,
		struct mnode **out);

/* Makes every missing directory of path. */
static void make_dirs(struct mem *m, const char *path)
{
	char *dir = strdup(path);
	for (char *c = dir + 1;; c++) {
		if (*c != '/' && *c != '\0')
			continue;
		char keep = *c;
		*c = '\0';
		struct mnode *x;
		if (!walk(m, dir, NULL, NULL))
			make(m, dir, S_IFDIR | 0755, &x);
		*c = keep;
		if (!keep)
			break;
	}
	free(dir);
}

static int set_data(struct mem *m, const char *path, const char *data,
		    size_t size, mode_t mode, bool mkparents)
{
	struct mnode *n = walk(m, path, NULL, NULL);
	if (!n && mkparents) {
		char *dir = strdup(path);
		char *slash = strrchr(dir, '/');
		if (slash && slash != dir) {
			*slash = '\0';
			make_dirs(m, dir);
		}
		free(dir);
	}
	if (n && S_ISDIR(n->st.st_mode))
		return -EISDIR;
	if (!n) {
		int r = make(m, path, S_IFREG | (mode & 07777), &n);
		if (r < 0)
			return r;
	}
	free(n->data);
	n->data = malloc(size + 1);
	memcpy(n->data, data, size);
	n->data[size] = '\0';
	n->st.st_size = (off_t)size;
	touch(m, n);
	return 0;
}

/* ---- ops ---- */

/* The planned mem_after for a call of kind that has its answer, taken
 * and run without the lock (it may call the backend itself). */
static void run_after(struct mem *m, enum sb_call kind)
{
	pthread_mutex_lock(&m->lock);
	struct mafter a = m->after;
	bool due = a.fn && a.kind == kind;
	if (due)
		m->after.fn = NULL;
	pthread_mutex_unlock(&m->lock);
	if (due)
		a.fn(a.arg);
}

#define ENTER(kind, path)                                  \
	const enum sb_call kind_ = (kind);                 \
	struct mem *m = mem_of(b);                         \
	pthread_mutex_lock(&m->lock);                      \
	int r = fault(m, (kind), (path));                  \
	if (r < 0) {                                       \
		pthread_mutex_unlock(&m->lock);            \
		return r;                                  \
	}

#define LEAVE()                                            \
	pthread_mutex_unlock(&m->lock);                    \
	run_after(m, kind_);                               \
	return r

static int op_create(struct sb_backend *b, const struct sb_spec *spec)
{
	(void)spec;
	struct mem *m = calloc(1, sizeof *m);
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->hold_cv, NULL);
	/* the sandbox's inode numbers are not the mount's: a stat telling
	 * the node's own number is taken for the mount's view (node_set_attr) */
	m->next_ino = 100000;
	m->root = node_new(m, "", S_IFDIR | 0755);
	struct mnode *w;
	make(m, SB_DEFAULT_WORKDIR, S_IFDIR | 0755, &w);
	b->priv = m;
	b->guest_uid = MEM_GUEST_UID;
	b->guest_gid = MEM_GUEST_GID;
	snprintf(b->id, sizeof b->id, "mem");
	return 0;
}

static void op_release(struct sb_backend *b)
{
	struct mem *m = mem_of(b);
	if (!m)
		return;
	node_free(m->root);
	for (int i = 0; i < MEM_FAULTS; i++)
		free(m->faults[i].path);
	free(m->log);
	pthread_cond_destroy(&m->hold_cv);
	pthread_mutex_destroy(&m->lock);
	free(m);
	b->priv = NULL;
}

static int op_destroy(struct sb_backend *b)
{
	(void)b;
	return 0;
}

/* The dispatcher's in-guest read script (shell_read): argv is sh -c
 * SCRIPT sh PATH SKIP COUNT SEGMENT, in 64 KiB blocks; the answer is the
 * identity line, then per segment before the end of file its bytes and
 * the identity line again. */
static int read_script(struct sb_backend *b, const struct sb_exec_req *req,
		       struct sb_exec_result *res)
{
	ENTER(SB_CALL_READ, req->argv[4]);
	struct mnode *n = walk(m, req->argv[4], NULL, NULL);
	if (!n)
		res->exit_code = 100;
	else if (S_ISDIR(n->st.st_mode))
		res->exit_code = 102;
	else if (!S_ISREG(n->st.st_mode))
		res->exit_code = 101;
	if (res->exit_code) {
		LEAVE();
	}
	off_t skip = (off_t)strtoull(req->argv[5], NULL, 10) * 65536;
	off_t count = (off_t)strtoull(req->argv[6], NULL, 10) * 65536;
	off_t seg = (off_t)strtoull(req->argv[7], NULL, 10) * 65536;
	char ident[128];
	int len = snprintf(ident, sizeof ident, "%jd %ju %ld.%09ld %ld\n",
			   (intmax_t)n->st.st_size, (uintmax_t)n->st.st_ino,
			   (long)n->st.st_mtim.tv_sec, n->st.st_mtim.tv_nsec,
			   (long)n->st.st_ctim.tv_sec);
	off_t size = n->st.st_size;
	off_t end = skip + count < size ? skip + count : size;
	size_t got = end > skip ? (size_t)(end - skip) : 0;
	char *copy = malloc(got + 1);
	if (got)
		memcpy(copy, n->data + skip, got);
	/* Output goes out without the lock: the sink may take fs locks. */
	pthread_mutex_unlock(&m->lock);
	r = req->on_stdout ? req->on_stdout(req->cb_arg, ident, (size_t)len) : 0;
	for (off_t at = skip; r == 0 && at < end && req->on_stdout; at += seg) {
		size_t part = (size_t)(at + seg < end ? seg : end - at);
		r = req->on_stdout(req->cb_arg, copy + (at - skip), part);
		if (r == 0)
			r = req->on_stdout(req->cb_arg, ident, (size_t)len);
		pthread_mutex_lock(&m->lock);
		while (m->hold_reads == MEM_HOLD_AT_END ||
		       (m->hold_reads == MEM_HOLD_BETWEEN && at + seg < end))
			pthread_cond_wait(&m->hold_cv, &m->lock);
		pthread_mutex_unlock(&m->lock);
	}
	free(copy);
	return r;
}

static int op_exec(struct sb_backend *b, const struct sb_exec_req *req,
		   struct sb_exec_result *res)
{
	const char *const *a = req->argv;
	if (a[0] && a[1] && a[2] && strcmp(a[0], "sh") == 0 &&
	    strstr(a[2], "dd ibs=65536") && a[3] && a[4] && a[5] && a[6] && a[7])
		return read_script(b, req, res);
	res->exit_code = 127; /* no other command runs here */
	return 0;
}

/* Gives the file a time of its own (the tick), as remote vendors do: the
 * mtime asked for is not kept. */
static int op_write_file(struct sb_backend *b, struct sb_upload *u)
{
	const char *path = u->path;
	int fd = u->fd;
	off_t size = u->size;
	mode_t mode = u->mode;
	ENTER(SB_CALL_WRITE, path);
	char *buf = malloc((size_t)size + 1);
	ssize_t got = size ? pread(fd, buf, (size_t)size, 0) : 0;
	if (got != size)
		r = -EIO;
	else
		r = set_data(m, path, buf, (size_t)size, mode, true);
	free(buf);
	if (r == 0)
		log_line(m, "write", path, NULL);
	LEAVE();
}

/* What a stat, listing or link tells of n. m->lock held. */
static struct stat told(const struct mem *m, const struct mnode *n)
{
	struct stat st = n->st;
	if (m->no_inodes && !S_ISDIR(st.st_mode)) {
		st.st_ino = 0;
		st.st_nlink = 0;
	}
	return st;
}

static int op_chown(struct sb_backend *b, const char *path, uid_t uid,
		    gid_t gid)
{
	ENTER(SB_CALL_CHOWN, path);
	struct mnode *n = walk(m, path, NULL, NULL);
	if (!n) {
		r = -ENOENT;
	} else {
		if (uid != (uid_t)-1)
			n->st.st_uid = uid;
		if (gid != (gid_t)-1)
			n->st.st_gid = gid;
	}
	LEAVE();
}

static int op_list_dir(struct sb_backend *b, const char *path,
		       struct sb_dirlist *out)
{
	ENTER(SB_CALL_LIST, path);
	struct mnode *d = walk(m, path, NULL, NULL);
	if (!d)
		r = -ENOENT;
	else if (!S_ISDIR(d->st.st_mode))
		r = -ENOTDIR;
	for (struct mnode *k = d && r == 0 ? d->kids : NULL; k; k = k->next) {
		struct sb_dirent *e = sb_dirlist_add(out, k->name);
		if (!e) {
			r = -ENOMEM;
			break;
		}
		e->st = told(m, k);
		if (m->owner_names)
			e->st.st_uid = e->st.st_gid = SB_ID_UNTOLD;
		e->link_target = k->link ? strdup(k->link) : NULL;
	}
	LEAVE();
}

static int op_stat(struct sb_backend *b, const char *path, struct stat *st,
		   char **link_target)
{
	ENTER(SB_CALL_STAT, path);
	struct mnode *n = walk(m, path, NULL, NULL);
	if (!n) {
		r = -ENOENT;
	} else {
		*st = told(m, n);
		if (link_target)
			*link_target = n->link ? strdup(n->link) : NULL;
	}
	LEAVE();
}

static int mkdir_locked(struct mem *m, const char *path, mode_t mode)
{
	struct mnode *n;
	int r = make(m, path, S_IFDIR | (mode & 07777), &n);
	if (r == 0)
		log_line(m, "mkdir", path, NULL);
	return r;
}

static int op_mkdir(struct sb_backend *b, const char *path, mode_t mode)
{
	ENTER(SB_CALL_MKDIR, path);
	r = mkdir_locked(m, path, mode);
	LEAVE();
}

/* The other entries of a linked file (op_link) lose a link. */
static void unlinked_from(struct mnode *d, const struct mnode *gone)
{
	for (struct mnode *k = d->kids; k; k = k->next) {
		if (S_ISDIR(k->st.st_mode))
			unlinked_from(k, gone);
		else if (k != gone && k->st.st_ino == gone->st.st_ino && k->st.st_nlink > 1)
			k->st.st_nlink--;
	}
}

static int remove_locked(struct mem *m, const char *path, bool is_dir)
{
	struct mnode *n = walk(m, path, NULL, NULL);
	if (!n)
		return -ENOENT;
	if (is_dir && !S_ISDIR(n->st.st_mode))
		return -ENOTDIR;
	if (!is_dir && S_ISDIR(n->st.st_mode))
		return -EISDIR;
	if (is_dir && n->kids)
		return -ENOTEMPTY;
	struct mnode *d = n->parent;
	if (!is_dir && n->st.st_nlink > 1)
		unlinked_from(m->root, n);
	detach(n);
	node_free(n);
	touch(m, d);
	log_line(m, "remove", path, NULL);
	return 0;
}

static int op_remove(struct sb_backend *b, const char *path, bool is_dir)
{
	ENTER(SB_CALL_REMOVE, path);
	r = remove_locked(m, path, is_dir);
	LEAVE();
}

static int op_ns_many(struct sb_backend *b, struct sb_ns_change *v, size_t n)
{
	ENTER(v[0].make ? SB_CALL_MKDIR : SB_CALL_REMOVE, NULL);
	for (size_t i = 0; i < n; i++) {
		v[i].rc = fault(m, v[i].make ? SB_CALL_MKDIR : SB_CALL_REMOVE, v[i].path);
		if (v[i].rc == 0 && v[i].make)
			v[i].rc = mkdir_locked(m, v[i].path, v[i].mode);
		else if (v[i].rc == 0)
			v[i].rc = remove_locked(m, v[i].path, v[i].is_dir);
		if (v[i].rc < 0 && r == 0)
			r = v[i].rc;
	}
	LEAVE();
}

static int op_rename(struct sb_backend *b, const char *from, const char *to,
		     bool noreplace)
{
	ENTER(SB_CALL_RENAME, from);
	struct mnode *n = walk(m, from, NULL, NULL), *d;
	const char *leaf;
	struct mnode *old = walk(m, to, &d, &leaf);
	if (!n) {
		r = -ENOENT;
	} else if (!d) {
		r = -ENOENT;
	} else if (old && noreplace) {
		r = -EEXIST;
	} else if (old && old != n) {
		if (S_ISDIR(old->st.st_mode) && old->kids)
			r = -ENOTEMPTY;
		else if (S_ISDIR(old->st.st_mode) != S_ISDIR(n->st.st_mode))
			r = S_ISDIR(old->st.st_mode) ? -EISDIR : -ENOTDIR;
		if (r == 0) {
			detach(old);
			node_free(old);
		}
	}
	if (r == 0 && old != n) {
		struct mnode *from_dir = n->parent;
		detach(n);
		free(n->name);
		n->name = strdup(leaf);
		attach(d, n);
		touch(m, from_dir);
		touch(m, d);
		n->st.st_ctim.tv_sec = m->tick;
		log_line(m, "rename", from, to);
	}
	LEAVE();
}

static int op_chmod(struct sb_backend *b, const char *path, mode_t mode)
{
	ENTER(SB_CALL_CHMOD, path);
	struct mnode *n = walk(m, path, NULL, NULL);
	if (!n)
		r = -ENOENT;
	else
		n->st.st_mode = (n->st.st_mode & S_IFMT) | (mode & 07777);
	if (n)
		log_line(m, "chmod", path, NULL);
	LEAVE();
}

static int op_truncate(struct sb_backend *b, const char *path, off_t size)
{
	ENTER(SB_CALL_TRUNCATE, path);
	struct mnode *n = walk(m, path, NULL, NULL);
	if (!n) {
		r = -ENOENT;
	} else if (!S_ISREG(n->st.st_mode)) {
		r = -EINVAL;
	} else {
		n->data = realloc(n->data, (size_t)size + 1);
		if (size > n->st.st_size)
			memset(n->data + n->st.st_size, 0,
			       (size_t)(size - n->st.st_size));
		n->data[size] = '\0';
		n->st.st_size = size;
		touch(m, n);
		log_line(m, "truncate", path, NULL);
	}
	LEAVE();
}

static int op_utimens(struct sb_backend *b, const char *path,
		      const struct timespec ts[2])
{
	ENTER(SB_CALL_UTIMENS, path);
	struct mnode *n = walk(m, path, NULL, NULL);
	if (!n)
		r = -ENOENT;
	for (int i = 0; n && i < 2; i++) {
		struct timespec *t = i ? &n->st.st_mtim : &n->st.st_atim;
		if (ts[i].tv_nsec == UTIME_NOW)
			*t = (struct timespec){++m->tick, 0};
		else if (ts[i].tv_nsec != UTIME_OMIT)
			*t = ts[i];
	}
	if (n)
		log_line(m, "utimens", path, NULL);
	LEAVE();
}

static int op_symlink(struct sb_backend *b, const char *target,
		      const char *linkpath)
{
	ENTER(SB_CALL_SYMLINK, linkpath);
	struct mnode *n;
	r = make(m, linkpath, S_IFLNK | 0777, &n);
	if (r == 0) {
		n->link = strdup(target);
		n->st.st_size = (off_t)strlen(target);
		log_line(m, "symlink", linkpath, target);
	}
	LEAVE();
}

/* A second entry with the first's inode number and a copy of its
 * content: enough for tests of which calls go where and what each name
 * holds once written; a write through one name does not show through the
 * other here (the e2e suite checks that on real sandboxes). */
static int op_link(struct sb_backend *b, const char *from, const char *to,
		   struct stat *st)
{
	ENTER(SB_CALL_LINK, to);
	struct mnode *n = walk(m, from, NULL, NULL), *copy = NULL;
	if (!n)
		r = -ENOENT;
	else if (S_ISDIR(n->st.st_mode))
		r = -EPERM;
	else
		r = make(m, to, n->st.st_mode, &copy);
	if (r == 0) {
		n->st.st_nlink++;
		copy->st = n->st;
		if (n->data) {
			copy->data = malloc((size_t)n->st.st_size + 1);
			memcpy(copy->data, n->data, (size_t)n->st.st_size + 1);
		}
		*st = told(m, copy);
		log_line(m, "link", from, to);
	}
	LEAVE();
}

static int op_readlink(struct sb_backend *b, const char *path, char **target)
{
	ENTER(SB_CALL_READLINK, path);
	struct mnode *n = walk(m, path, NULL, NULL);
	if (!n)
		r = -ENOENT;
	else if (!n->link)
		r = -EINVAL;
	else
		*target = strdup(n->link);
	LEAVE();
}

static const struct sb_backend_ops mem_ops = {
	.name = "mem",
	.summary = "an in-memory tree (unit tests)",
	.create = op_create,
	.exec = op_exec,
	.destroy = op_destroy,
	.release = op_release,
	.write_file = op_write_file,
	.list_dir = op_list_dir,
	.stat = op_stat,
	.mkdir = op_mkdir,
	.remove = op_remove,
	.rename = op_rename,
	.chmod = op_chmod,
	.chown = op_chown,
	.truncate = op_truncate,
	.utimens = op_utimens,
	.symlink = op_symlink,
	.readlink = op_readlink,
	.link = op_link,
	.ns_many = op_ns_many,
};

/* ---- test side ---- */

struct sb_backend *mem_backend_new(void)
{
	struct sb_spec spec;
	sb_spec_init(&spec);
	char err[256];
	return sb_backend_create(&mem_ops, &spec, false, err, sizeof err);
}

void mem_backend_free(struct sb_backend *b)
{
	sb_backend_free(b);
}

int mem_put(struct sb_backend *b, const char *path, const char *data)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	int r = set_data(m, path, data, strlen(data), 0644, true);
	pthread_mutex_unlock(&m->lock);
	return r;
}

int mem_mkdirs(struct sb_backend *b, const char *path)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	make_dirs(m, path);
	struct mnode *n = walk(m, path, NULL, NULL);
	pthread_mutex_unlock(&m->lock);
	return n && S_ISDIR(n->st.st_mode) ? 0 : -ENOTDIR;
}

int mem_remove(struct sb_backend *b, const char *path)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	struct mnode *n = walk(m, path, NULL, NULL);
	int r = n ? remove_locked(m, path, S_ISDIR(n->st.st_mode)) : -ENOENT;
	pthread_mutex_unlock(&m->lock);
	return r;
}

char *mem_get(struct sb_backend *b, const char *path)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	struct mnode *n = walk(m, path, NULL, NULL);
	char *d = n && S_ISREG(n->st.st_mode) ? strdup(n->data ? n->data : "") : NULL;
	pthread_mutex_unlock(&m->lock);
	return d;
}

bool mem_exists(struct sb_backend *b, const char *path)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	bool e = walk(m, path, NULL, NULL) != NULL;
	pthread_mutex_unlock(&m->lock);
	return e;
}

void mem_fail(struct sb_backend *b, enum sb_call kind, const char *path,
	      int err, unsigned times)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < MEM_FAULTS; i++) {
		struct mfault *f = &m->faults[i];
		if (f->times)
			continue;
		free(f->path);
		*f = (struct mfault){.kind = kind, .err = err, .times = times,
				     .path = path ? strdup(path) : NULL};
		break;
	}
	pthread_mutex_unlock(&m->lock);
}

void mem_after(struct sb_backend *b, enum sb_call kind, void (*fn)(void *arg),
	       void *arg)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	m->after = (struct mafter){.kind = kind, .fn = fn, .arg = arg};
	pthread_mutex_unlock(&m->lock);
}

void mem_hold_reads(struct sb_backend *b, enum mem_hold hold)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	m->hold_reads = hold;
	pthread_cond_broadcast(&m->hold_cv);
	pthread_mutex_unlock(&m->lock);
}

void mem_tell_no_inodes(struct sb_backend *b)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	m->no_inodes = true;
	pthread_mutex_unlock(&m->lock);
}

void mem_tell_owner_names(struct sb_backend *b)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	m->owner_names = true;
	pthread_mutex_unlock(&m->lock);
}

const char *mem_log(struct sb_backend *b)
{
	struct mem *m = mem_of(b);
	return m->log ? m->log : "";
}

void mem_log_clear(struct sb_backend *b)
{
	struct mem *m = mem_of(b);
	pthread_mutex_lock(&m->lock);
	free(m->log);
	m->log = NULL;
	m->log_len = 0;
	pthread_mutex_unlock(&m->lock);
}

unsigned long mem_calls(struct sb_backend *b, enum sb_call kind)
{
	return (unsigned long)atomic_load(&b->counters.calls[kind]);
}
