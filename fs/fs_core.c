#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/log.h"
#include "fs_internal.h"
#include "wb_journal.h"
#include "writeback.h"

struct timespec fs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

void fs_cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

struct timespec fs_expiry(double seconds)
{
	struct timespec ts = fs_now();
	if (seconds <= 0)
		return ts;
	long long ns = (long long)(seconds * 1e9);
	ts.tv_sec += ns / 1000000000LL;
	ts.tv_nsec += ns % 1000000000LL;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

char *fs_guest_path(const struct fs *fs, const char *relpath)
{
	char *p;
	if (strcmp(relpath, "/") == 0 || relpath[0] == '\0')
		return strdup(fs->workdir);
	if (asprintf(&p, "%s%s", strcmp(fs->workdir, "/") == 0 ? "" : fs->workdir,
		     relpath) < 0)
		return NULL;
	return p;
}

char *fs_node_guest_path(const struct fs *fs, const struct node *n, int *err)
{
	char *rel = node_path(n);
	if (!rel) {
		/* A node without a path was removed under us. */
		*err = n->parent || n->ino == NODE_ROOT_INO ? -ENOMEM : -ENOENT;
		return NULL;
	}
	char *g = fs_guest_path(fs, rel);
	free(rel);
	if (!g)
		*err = -ENOMEM;
	return g;
}

void fs_map_attr(const struct fs *fs, struct stat *st)
{
	mode_t type = st->st_mode & S_IFMT;
	if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK) {
		st->st_mode = S_IFREG | (st->st_mode & 07777);
		st->st_size = 0;
	}
	if (!fs->cfg.idmap_none) {
		if (st->st_uid == fs->b->guest_uid)
			st->st_uid = fs->uid;
		if (st->st_gid == fs->b->guest_gid)
			st->st_gid = fs->gid;
	}
	/* A directory's unknown count is node_set_attr's to keep. */
	if (st->st_nlink == 0 && !S_ISDIR(st->st_mode))
		st->st_nlink = 1;
	st->st_blksize = 4096;
	if (st->st_blocks == 0)
		st->st_blocks = (st->st_size + 511) / 512;
}

/* A chown's ids, from the mount's terms to the sandbox's: under idmap=user
 * the mounting user is the sandbox's user (-1, "unchanged", stays). */
void fs_unmap_owner(const struct fs *fs, uid_t *uid, gid_t *gid)
{
	if (fs->cfg.idmap_none)
		return;
	if (*uid != (uid_t)-1 && *uid == fs->uid)
		*uid = fs->b->guest_uid;
	if (*gid != (gid_t)-1 && *gid == fs->gid)
		*gid = fs->b->guest_gid;
}

bool fs_attr_fresh(const struct fs *fs, const struct node *n,
		   const struct timespec *now)
{
	return (n->file && n->file->dirty && n->attr_set) ||
	       node_attr_fresh(&fs->t, n, now);
}

void fs_node_stat(const struct node *n, struct stat *st)
{
	*st = n->st;
	st->st_ino = n->ino;
	if (n->file && n->file->dirty) {
		st->st_size = n->file->size;
		st->st_blocks = (n->file->size + 511) / 512;
		st->st_mode = (st->st_mode & S_IFMT) | n->file->mode;
		st->st_mtim = n->file->mtime;
		st->st_ctim = n->file->mtime;
	}
	/* Removed but still open (or still someone's cwd): no name links
	 * to it any more. */
	if (node_removed(n))
		st->st_nlink = 0;
}

int fs_upload_locked(struct fs *fs, struct node *n, struct file_state *f,
		     const char *guest_path)
{
	if (!f->dirty || f->unlinked)
		return 0;
	int r = file_state_upload(f, fs->b, guest_path);
	if (r < 0) {
		sb_warn("upload of %s failed: %s (kept locally; retried at the "
			"next sync, sbexec or unmount)", guest_path, strerror(-r));
		return r;
	}
	/* The node shows the uploaded size before the spool stops being
	 * authoritative, so no lookup sees the old size in between. The
	 * attributes are recorded already expired: the sandbox gave the file
	 * its own mtime, and the next stat shows that one from then on (an
	 * editor compares mtimes across its reads and writes). */
	wb_forget(fs, f);
	table_lock(fs);
	struct stat st;
	fs_node_stat(n, &st);
	struct timespec now = fs_now();
	node_set_attr(&fs->t, n, &st, NULL, &now);
	f->dirty = false;
	table_unlock(fs);
	return 0;
}

int fs_upload_file(struct fs *fs, struct node *n, struct file_state *f)
{
	file_lock(f);
	int r = 0;
	if (f->dirty && !f->unlinked) {
		table_lock(fs);
		char *path = fs_node_guest_path(fs, n, &r);
		table_unlock(fs);
		if (path)
			r = fs_upload_locked(fs, n, f, path);
		free(path);
	}
	file_unlock(f);
	return r;
}

/* Budget of the spools kept as a read cache after their last close. */
#define RETAINED_MAX_FILES 4096
#define RETAINED_MAX_BYTES ((off_t)512 * 1024 * 1024)

static void retained_unlink(struct fs *fs, struct file_state *f)
{
	if (!f->retained)
		return;
	if (f->lru_prev)
		f->lru_prev->lru_next = f->lru_next;
	else
		fs->retained_head = f->lru_next;
	if (f->lru_next)
		f->lru_next->lru_prev = f->lru_prev;
	else
		fs->retained_tail = f->lru_prev;
	f->lru_prev = f->lru_next = NULL;
	f->retained = false;
	fs->retained_count--;
	fs->retained_bytes -= f->size;
}

static void drop_spool(struct fs *fs, struct node *n)
{
	struct file_state *f = n->file;
	retained_unlink(fs, f);
	if (!f->unlinked) {
		/* Remember what the page cache holds so the next open can
		 * keep it if the sandbox's copy did not change. */
		n->cached_content = true;
		n->cached_size = f->size;
		n->cached_mtime = n->st.st_mtim;
	}
	n->file = NULL;
	file_state_free(f);
	node_release_if_unused(&fs->t, n);
}

void fs_file_reuse(struct fs *fs, struct file_state *f)
{
	retained_unlink(fs, f);
}

void fs_file_forget(struct fs *fs, struct node *n)
{
	if (n->file && n->file->retained && n->file->pins == 0)
		drop_spool(fs, n);
}

void fs_file_unref(struct fs *fs, struct node *n)
{
	struct file_state *f = n->file;
	if (!f || f->handles > 0 || f->pins > 0 || f->retained)
		return;
	if (f->dirty && !f->unlinked)
		return; /* pending upload: kept until it lands */
	if (f->unlinked || !n->parent || f->present.n == 0 ||
	    f->size > RETAINED_MAX_BYTES / 4) {
		drop_spool(fs, n);
		return;
	}
	f->owner = n;
	f->retained = true;
	f->lru_prev = NULL;
	f->lru_next = fs->retained_head;
	if (fs->retained_head)
		fs->retained_head->lru_prev = f;
	fs->retained_head = f;
	if (!fs->retained_tail)
		fs->retained_tail = f;
	fs->retained_count++;
	fs->retained_bytes += f->size;
	while (fs->retained_tail && fs->retained_tail != f &&
	       (fs->retained_count > RETAINED_MAX_FILES ||
		fs->retained_bytes > RETAINED_MAX_BYTES))
		drop_spool(fs, fs->retained_tail->owner);
}

int fs_init(struct fs *fs, struct sb_backend *b, const struct fs_config *cfg)
{
	memset(fs, 0, sizeof *fs);
	fs->b = b;
	fs->cfg = *cfg;
	fs->workdir = strdup(b->spec.workdir ? b->spec.workdir : SB_DEFAULT_WORKDIR);
	fs->uid = getuid();
	fs->gid = getgid();
	if (!fs->workdir)
		return -ENOMEM;
	int rc = node_table_init(&fs->t, 0755);
	fs->t.max_nodes = cfg->max_nodes;
	return rc;
}

static void free_files(struct node *n, void *arg)
{
	(void)arg;
	if (n->file) {
		file_state_free(n->file);
		n->file = NULL;
	}
}

void fs_destroy(struct fs *fs)
{
	if (fs->t.root) {
		/* Detached nodes may hold spools too: walk the inode hash. */
		for (size_t i = 0; i < fs->t.nbuckets; i++)
			for (struct node *n = fs->t.by_ino[i]; n; n = n->ino_next)
				free_files(n, NULL);
		node_table_destroy(&fs->t);
	}
	free(fs->workdir);
	fs->workdir = NULL;
}

/* ---- coherence ---- */

struct node_list {
	struct node **v;
	size_t n, cap;
};

static void list_push(struct node_list *l, struct node *n)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct node **v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return; /* under memory pressure a pass skips nodes */
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = n;
}

static void collect_dirty(struct node *n, void *arg)
{
	if (n->file && n->file->dirty && !n->file->unlinked) {
		n->file->pins++;
		list_push(arg, n);
	}
}

int fs_flush_all(struct fs *fs, char *msg, size_t msglen)
{
	/* Write-back: the queue drains first; what failed there is retried
	 * below and reported like a failed close. */
	wb_drain(fs);
	return fs_flush_dirty(fs, msg, msglen);
}

int fs_flush_dirty(struct fs *fs, char *msg, size_t msglen)
{
	struct node_list l = {0};
	table_lock(fs);
	node_walk(fs->t.root, collect_dirty, &l);
	table_unlock(fs);

	int first = 0;
	size_t failed = 0, named = 0;
	for (size_t i = 0; i < l.n; i++) {
		int r = fs_upload_file(fs, l.v[i], l.v[i]->file);
		if (r < 0) {
			/* Every failed file is named while the message has
			 * room; the rest are counted. */
			table_lock(fs);
			char *p = node_path(l.v[i]);
			table_unlock(fs);
			size_t used = msg && msglen ? strlen(first ? msg : "") : 0;
			char one[320];
			snprintf(one, sizeof one, "%s%s: %s", first ? "; " : "",
				 p ? p : "?", strerror(-r));
			free(p);
			if (msg && msglen && used + strlen(one) + 24 < msglen) {
				snprintf(msg + used, msglen - used, "%s", one);
				named++;
			}
			if (!first)
				first = r;
			failed++;
		}
	}
	table_lock(fs);
	for (size_t i = 0; i < l.n; i++) {
		l.v[i]->file->pins--;
		fs_file_unref(fs, l.v[i]);
	}
	table_unlock(fs);
	free(l.v);
	if (failed > named && msg && msglen) {
		size_t used = strlen(msg);
		snprintf(msg + used, msglen - used, " (and %zu more)", failed - named);
	}
	return first;
}

struct inval {
	uint64_t ino, parent;
	char *name;
	bool is_dir;
};

struct inval_list {
	struct inval *v;
	size_t n, cap;
	bool forget; /* drop our cache entries too (a subtree refresh) */
};

static void collect_inval(struct node *n, void *arg)
{
	struct inval_list *l = arg;
	if (l->forget)
		node_forget_attr(n);
	/* The sandbox may have rewritten any file: cached content goes,
	 * whatever its size and mtime say. */
	if (n->file) {
		n->file->adoptable = false;
		n->file->invalidated = true;
	}
	n->cached_content = false;
	if (n->nlookup == 0)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct inval *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return;
		l->v = v;
		l->cap = cap;
	}
	struct inval *e = &l->v[l->n];
	e->ino = n->ino;
	e->parent = n->parent ? n->parent->ino : 0;
	e->name = n->parent ? strdup(n->name) : NULL;
	e->is_dir = S_ISDIR(n->st.st_mode);
	if (n->parent && !e->name)
		return;
	l->n++;
}

static struct node *node_at(struct fs *fs, const char *relpath)
{
	struct node *n = fs->t.root;
	char *copy = strdup(relpath), *save = NULL;
	if (!copy)
		return NULL;
	for (char *c = strtok_r(copy, "/", &save); c && n;
	     c = strtok_r(NULL, "/", &save))
		n = node_child(&fs->t, n, c);
	free(copy);
	return n;
}

void fs_invalidate(struct fs *fs, const char *relpath)
{
	struct inval_list l = {0};
	table_lock(fs);
	struct node *top = fs->t.root;
	if (relpath && relpath[0] && strcmp(relpath, "/") != 0) {
		top = node_at(fs, relpath);
		l.forget = true;
	} else {
		fs->t.gen++;
	}
	if (top)
		node_walk(top, collect_inval, &l);
	table_unlock(fs);

	/* Outside the table lock: the kernel may call back into us while it
	 * processes a notification. */
	for (size_t i = 0; i < l.n; i++) {
		fs_notify_inode(fs, l.v[i].ino, 0, 0);
		if (l.v[i].name)
			fs_notify_entry(fs, l.v[i].parent, l.v[i].name,
					l.v[i].is_dir);
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].name);
	free(l.v);
	/* What the kernel has forgotten is only a cache now stale: it goes,
	 * so a refresh gives the memory back. */
	table_lock(fs);
	node_table_evict(&fs->t, 0);
	table_unlock(fs);
}

static void collect_pending(struct node *n, void *arg)
{
	json_t *arr = arg;
	if (!n->file || !n->file->dirty || n->file->unlinked)
		return;
	char *p = node_path(n);
	json_t *o = json_object();
	json_object_set_new(o, "path", json_string(p ? p : "?"));
	json_object_set_new(o, "bytes", json_integer(n->file->size));
	json_object_set_new(o, "open", json_boolean(n->file->handles > 0));
	if (n->file->upload_error)
		json_object_set_new(o, "error",
				    json_string(strerror(-n->file->upload_error)));
	json_array_append_new(arr, o);
	free(p);
}

void fs_status(struct fs *fs, json_t *obj)
{
	json_t *pending = json_array();
	table_lock(fs);
	node_walk(fs->t.root, collect_pending, pending);
	size_t nodes = fs->t.count, max_nodes = fs->t.max_nodes;
	uint64_t evicted = fs->t.evicted;
	table_unlock(fs);
	json_object_set_new(obj, "pending_uploads", pending);
	wb_status(fs, obj);
	json_object_set_new(obj, "pid", json_integer(getpid()));
	json_object_set_new(obj, "workdir", json_string(fs->workdir));
	json_object_set_new(obj, "cached_nodes", json_integer((json_int_t)nodes));
	json_object_set_new(obj, "max_nodes", json_integer((json_int_t)max_nodes));
	json_object_set_new(obj, "evicted_nodes", json_integer((json_int_t)evicted));
	if (fs->cfg.log_path)
		json_object_set_new(obj, "log", json_string(fs->cfg.log_path));
}

struct unsaved_list {
	struct node_list l;
	size_t pending; /* more than l.n when memory ran out: named as lost */
};

static void collect_unsaved(struct node *n, void *arg)
{
	struct unsaved_list *u = arg;
	if (n->file && n->file->dirty && !n->file->unlinked) {
		u->pending++;
		list_push(&u->l, n);
	}
}

/* Appends item to a ", "-joined list. */
static void list_append(FILE *f, size_t *count, const char *item)
{
	if (f)
		fprintf(f, "%s%s", (*count)++ ? ", " : "", item);
}

/* One pending file to dir: its spool, cut to the file's size, linked (or
 * copied) to its mount-relative path. t.lock held. */
static int save_one(struct node *n, const char *rel, const char *dir,
		    char *saved_as, size_t len)
{
	struct file_state *f = n->file;
	char src[64];
	snprintf(src, sizeof src, "/proc/self/fd/%d", f->fd);
	if (ftruncate(f->fd, f->size) < 0)
		return -errno;
	return unsaved_save(AT_FDCWD, src, false, rel, dir, saved_as, len);
}

void fs_save_pending(struct fs *fs, const char *dir, struct fs_save_report *rep)
{
	struct unsaved_list u = {0};
	struct node_list *l = &u.l;
	memset(rep, 0, sizeof *rep);
	size_t saved_len = 0, lost_len = 0, ns = 0, nl = 0;
	FILE *saved = open_memstream(&rep->saved_paths, &saved_len);
	FILE *lost = open_memstream(&rep->lost_paths, &lost_len);
	table_lock(fs);
	node_walk(fs->t.root, collect_unsaved, &u);
	for (size_t i = 0; i < l->n; i++) {
		char *rel = node_path(l->v[i]);
		char where[PATH_MAX] = "";
		int r = rel ? save_one(l->v[i], rel, dir, where, sizeof where) : -ENOMEM;
		if (r == 0) {
			sb_err("unsaved: %s kept as %s", rel, where);
			list_append(saved, &ns, rel);
			rep->saved++;
		} else {
			sb_err("unsaved: %s could not be saved in %s (%s): its data is lost",
			       rel ? rel : "?", dir, strerror(-r));
			char one[PATH_MAX + 128];
			snprintf(one, sizeof one, "%s (%s)", rel ? rel : "?", strerror(-r));
			list_append(lost, &nl, one);
			rep->lost++;
		}
		free(rel);
	}
	if (u.pending > l->n) {
		char one[96];
		snprintf(one, sizeof one, "%zu more (out of memory)", u.pending - l->n);
		sb_err("unsaved: %s: their data is lost", one);
		list_append(lost, &nl, one);
		rep->lost += u.pending - l->n;
	}
	table_unlock(fs);
	free(l->v);
	if (saved)
		fclose(saved);
	if (lost)
		fclose(lost);
}

void fs_save_report_free(struct fs_save_report *rep)
{
	free(rep->saved_paths);
	free(rep->lost_paths);
	memset(rep, 0, sizeof *rep);
}
