/* The coherence points: where the mount and the sandbox are made to agree
 * (flush everything, forget what is cached, report, save what could not be
 * uploaded). Above both the fs core and write-back: the control server and
 * unmount call these; the core and the queue never call back up. */
#include "coherence.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "fs_node.h"
#include "writeback/wb_journal.h"
#include "writeback/writeback.h"

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
	bool reported; /* a change the watch reported (fs_changed) */
};

/* ino 0: no inode to notify; parent 0: no name. */
static void push_inval(struct inval_list *l, uint64_t ino, uint64_t parent,
		       const char *name, bool is_dir)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct inval *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return;
		l->v = v;
		l->cap = cap;
	}
	struct inval *e = &l->v[l->n];
	e->ino = ino;
	e->parent = parent;
	e->name = parent ? strdup(name) : NULL;
	e->is_dir = is_dir;
	if (parent && !e->name)
		return;
	l->n++;
}

static void collect_inval(struct node *n, void *arg)
{
	struct inval_list *l = arg;
	/* A dirty file's attributes are the mount's until it is uploaded:
	 * forgotten, it would be asked of a sandbox that has not got it. */
	if (l->forget && !(n->file && n->file->dirty))
		node_forget_attr(n);
	/* What the sandbox changed may include its subdirectories: where
	 * its stat counts no links, only a listing tells them again. */
	if (S_ISDIR(n->st.st_mode))
		n->links_stale = true;
	n->owner_stale = true;
	/* The sandbox may have rewritten any file: cached content goes,
	 * whatever its size and mtime say. */
	if (n->file) {
		n->file->adoptable = false;
		if (l->reported && n->file->handles > 0)
			n->file->reported_while_open = true;
		else
			n->file->invalidated = true;
	}
	n->cached_content = false;
	/* An alias's name the kernel holds with its file's inode
	 * (link_pending.h): the name goes, so the next lookup asks. */
	if (n->alias_of && n->parent)
		push_inval(l, 0, n->parent->ino, n->name, false);
	if (n->nlookup == 0)
		return;
	push_inval(l, n->ino, n->parent ? n->parent->ino : 0,
		   n->parent ? n->name : NULL, S_ISDIR(n->st.st_mode));
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

/* Tells the kernel, and frees l. Outside the table lock: the kernel may
 * call back into us while it processes a notification. */
static void send_invals(struct fs *fs, struct inval_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i].ino)
			fs_notify_inode(fs, l->v[i].ino, 0, 0);
		if (l->v[i].name)
			fs_notify_entry(fs, l->v[i].parent, l->v[i].name,
					l->v[i].is_dir);
	}
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
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

	send_invals(fs, &l);
	/* What the kernel has forgotten is only a cache now stale: it goes,
	 * so a refresh gives the memory back. */
	table_lock(fs);
	node_table_evict(&fs->t, 0);
	table_unlock(fs);
}

/* Whether st (a stat of n's path now) is of the object n shows: the same
 * type and, where the mount learnt it, the same inode in the sandbox. */
static bool same_object(const struct node *n, const struct stat *st)
{
	return (st->st_mode & S_IFMT) == (n->st.st_mode & S_IFMT) &&
	       (!n->guest_ino || (n->guest_ino == st->st_ino && n->guest_dev == st->st_dev));
}

/* Whether st shows what n shows, n's attributes being fresh. */
static bool shows_same(const struct fs *fs, const struct node *n, const struct stat *raw)
{
	struct stat st = *raw;
	fs_map_attr(fs, &st);
	if ((st.st_mode & 07777) != (n->st.st_mode & 07777) ||
	    (st.st_uid != SB_ID_UNTOLD && st.st_uid != n->st.st_uid) ||
	    (st.st_gid != SB_ID_UNTOLD && st.st_gid != n->st.st_gid))
		return false;
	/* A directory's size and times move with its entries, whose own
	 * changes are reported by name; a node the mount made had its
	 * times guessed. */
	if (S_ISDIR(st.st_mode))
		return true;
	return st.st_size == n->st.st_size && st.st_nlink == n->st.st_nlink &&
	       (n->attr_made_here || (st.st_mtim.tv_sec == n->st.st_mtim.tv_sec &&
				      st.st_mtim.tv_nsec == n->st.st_mtim.tv_nsec));
}

void fs_changed(struct fs *fs, const char *relpath, const struct stat *st)
{
	char *dir = relpath ? strdup(relpath) : NULL;
	if (!dir) {
		table_lock(fs);
		fs->changes++;
		table_unlock(fs);
		fs_invalidate(fs, "");
		return;
	}
	/* A name the mount removed, its remove queued (write-back): the
	 * sandbox still has it, the mount rightly does not. Asked before the
	 * table lock, which comes after the queue's. */
	const struct sb_call_hooks *h = fs->b->hooks;
	if (st && h && h->gone) {
		char *rooted = NULL, *guest = NULL;
		if (asprintf(&rooted, "/%s", relpath) >= 0)
			guest = fs_guest_path(fs, rooted);
		if (guest && h->gone(h->arg, guest))
			st = NULL;
		free(guest);
		free(rooted);
	}
	struct inval_list l = {.forget = true, .reported = true};
	struct timespec now = fs_now();
	table_lock(fs);
	char *slash = strrchr(dir, '/');
	const char *name = slash ? slash + 1 : dir;
	if (slash)
		*slash = '\0';
	struct node *p = !*relpath ? NULL : node_at(fs, slash ? dir : "");
	struct node *n = !*relpath ? fs->t.root : p ? node_child(&fs->t, p, name) : NULL;
	/* The stat was taken before this lock: the mount may have changed
	 * the path since, so a report only ever makes the mount ask again,
	 * never tells it what to show. */
	if (n && n->file && n->file->dirty) {
		/* the mount's copy is what counts until it is uploaded; its
		 * upload's report then says what the sandbox holds */
	} else if (n && st && same_object(n, st)) {
		/* The same object, changed: its attributes and content, for
		 * the mount and the kernel (which may hold attributes the
		 * mount's have outlived). One whose fresh attributes show the
		 * same is the mount's own change coming back. */
		if (!fs_attr_fresh(fs, n, &now) || !shows_same(fs, n, st)) {
			fs->changes++;
			collect_inval(n, &l);
		}
	} else if (n || st) {
		/* Made, gone or replaced: the node and what is below it, and
		 * the listing that named it or not. */
		fs->changes++;
		if (n)
			node_walk(n, collect_inval, &l);
		else if (p && p->nlookup)
			push_inval(&l, 0, p->ino, name, false); /* a negative entry */
		if (p) {
			node_forget_attr(p);
			if ((n && S_ISDIR(n->st.st_mode)) || (st && S_ISDIR(st->st_mode)))
				p->links_stale = true;
			if (p->nlookup)
				push_inval(&l, p->ino, 0, NULL, true);
		}
	}
	table_unlock(fs);
	if (l.n)
		sb_debug("watch: %s changed (%s): %zu forgotten", relpath,
			 !st ? "gone" : !n ? "new" : "changed", l.n);
	send_invals(fs, &l);
	free(dir);
}

void fs_command_ended(struct fs *fs)
{
	if (atomic_load(&fs->watched)) {
		/* Read before the settle: the commands ended by then have
		 * all their changes queued for it. */
		uint64_t mark = sb_exec_quiet_mark(fs->b);
		if (sb_watch_settle(fs->b) == 0) {
			atomic_store(&fs->settled_exec_mark, mark);
			table_lock(fs);
			fs->statfs_valid = false; /* the command may have filled the disk */
			table_unlock(fs);
			return;
		}
	}
	fs_invalidate(fs, "");
}

void fs_watch_lost(struct fs *fs)
{
	atomic_store(&fs->watched, false);
	fs_invalidate(fs, "");
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
	json_object_set_new(obj, "watched", json_boolean(atomic_load(&fs->watched)));
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
	char src[PATH_MAX];
	/* Parked (wb_park.h): its journal entry is its content, fitted and
	 * made durable at its close. */
	if (f->fd < 0 && f->wb_journal && f->wb_seq > 0) {
		wb_journal_entry_path(f->wb_journal, f->wb_seq, src, sizeof src);
	} else {
		snprintf(src, sizeof src, "/proc/self/fd/%d", f->fd);
		int r = file_state_fit_spool(f);
		if (r < 0)
			return r;
	}
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
