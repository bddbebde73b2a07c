/* Namespace operations that find or make names: lookup, forget, getattr,
 * readlink, mkdir, symlink, mknod, link. Pattern of each: take the table
 * lock, look at the cache, copy what the backend call needs, drop the lock
 * for the (slow) call, take it again to record the result. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_node.h"
#include "link_pending.h"
#include "symlink_policy.h"
#include "writeback/writeback.h"

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

int fs_lookup(struct fs *fs, uint64_t parent, const char *name,
	      struct fs_entry *e)
{
	int err = fs_check_alive(fs);
	if (err == 0)
		err = fs_check_name(name);
	if (err < 0)
		return err;
	struct timespec now = fs_now();
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	/* an alias (link_pending.h): its file's node, however old its
	 * attributes are, as the sandbox has no such name yet */
	struct alias_dissolved was = {0};
	struct node *shown = n ? link_pending_shown(fs, n, &was) : NULL;
	if (!p) {
		err = -ENOENT;
	} else if (shown) {
		n = shown;
	} else if (n && fs_attr_fresh(fs, n, &now)) {
		/* cached */
	} else if (node_list_fresh(&fs->t, p, &now) &&
		   (!n || n->seen_mark != p->list_mark)) {
		err = -ENOENT; /* the fresh listing does not name it */
	} else if (lookups_scan(fs, p, &now)) {
		/* One listing answers the next names asked too. */
		note_remote_lookup(fs, parent);
		err = fs_load_listing(fs, parent);
		p = node_by_ino(&fs->t, parent);
		n = p && err == 0 ? node_child(&fs->t, p, name) : NULL;
		if (err == -EAGAIN && p) {
			/* The directory keeps changing: ask for this name. */
			err = 0;
			n = fs_refresh_attr(fs, p, name, node_child(&fs->t, p, name), &err);
		} else if (err == 0 && (!n || !p || n->seen_mark != p->list_mark)) {
			err = -ENOENT;
		}
	} else {
		n = fs_refresh_attr(fs, p, name, n, &err);
		note_remote_lookup(fs, parent);
	}
	if (was.name_ino)
		n = link_pending_rejoin(fs, err == 0 ? n : NULL, &was);
	if (err == 0 && n) {
		n->nlookup++;
		fs_fill_entry(fs, n, e);
	}
	table_unlock(fs);
	return err;
}

void fs_forget(struct fs *fs, uint64_t ino, uint64_t nlookup)
{
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	if (n && ino != NODE_ROOT_INO) {
		n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
		/* A name that is gone: nothing reads its cached copy again,
		 * which would hold spool space until the cache's budget. */
		if (n->nlookup == 0 && !n->parent) {
			fs_file_forget(fs, n);
			n = node_by_ino(&fs->t, ino); /* released with it */
		}
		if (n && n->nlookup == 0)
			node_forgotten(&fs->t, n);
	}
	table_unlock(fs);
}

int fs_getattr(struct fs *fs, uint64_t ino, struct stat *st, double *timeout)
{
	*timeout = fs->cfg.attr_timeout;
	if (ino == NODE_ROOT_INO && sb_backend_is_dead(fs->b)) {
		/* The root stays reachable so sbexec and `sbfs status` can
		 * find the daemon and say why everything else fails. */
		table_lock(fs);
		fs_node_stat(fs->t.root, st);
		table_unlock(fs);
		st->st_uid = fs->uid;
		st->st_gid = fs->gid;
		*timeout = 0;
		return 0;
	}
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	struct timespec now = fs_now();
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	if (!n)
		err = -ENOENT;
	else if (!fs_attr_fresh(fs, n, &now) && !node_removed(n))
		n = fs_refresh_attr(fs, NULL, NULL, n, &err);
	if (n && err == 0) {
		fs_node_stat(n, st);
		if (fs_attr_linked(n) && !(n->file && n->file->dirty))
			*timeout = 0;
	}
	table_unlock(fs);
	return err;
}

int fs_readlink(struct fs *fs, uint64_t ino, char **shown)
{
	*shown = NULL;
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	struct timespec now = fs_now();
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	char *target = NULL, *rel = n ? node_path(n) : NULL;
	if (n && n->link_target && fs_attr_fresh(fs, n, &now))
		target = strdup(n->link_target);
	table_unlock(fs);
	if (!n || !rel)
		err = -ENOENT;
	if (err == 0 && !target) {
		char *path = fs_path_of(fs, ino, &err);
		if (path)
			err = sb_readlink(fs->b, path, &target);
		free(path);
	}
	if (err == 0 && !target)
		err = -ENOMEM;
	/* Never resolved here; shown only in a form that, followed by the
	 * host kernel, stays inside the mount (symlink_policy.h). */
	if (err == 0) {
		err = symlink_policy_view(fs->workdir, rel, target, shown);
		if (err < 0 && err != -ENOMEM)
			symlink_policy_log_refusal(rel, target, err);
	}
	free(rel);
	free(target);
	return err;
}

/* What the sandbox looked like before a creating call, as far as the
 * caches go: a new directory's empty listing dates from then. */
struct before_create {
	uint64_t gen, exec_mark;
};

#define NOT_A_DIR ((struct before_create){0}) /* no listing to date */

static struct before_create before_create(struct fs *fs)
{
	table_lock(fs);
	struct before_create bc = {.gen = fs->t.gen,
				   .exec_mark = sb_exec_quiet_mark(fs->b)};
	table_unlock(fs);
	return bc;
}

/* Common tail of mkdir/symlink/mknod: records the new child. */
static int new_child(struct fs *fs, uint64_t parent, const char *name,
		     mode_t mode, off_t size, const char *link,
		     struct before_create bc, struct fs_entry *e)
{
	int err = 0;
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child_get(&fs->t, p, name) : NULL;
	if (p)
		node_entries_changed(p);
	if (p && n && S_ISDIR(mode))
		node_subdirs_changed(p, 1);
	if (n) {
		fs_record_new(fs, n, mode, size, link);
		n->seen_mark = p->list_mark;
		if (S_ISDIR(mode)) {
			/* A new directory is empty: lookups inside it need
			 * no round trip. */
			n->list_set = true;
			n->list_gen = bc.gen;
			n->list_exec_mark = bc.exec_mark;
			n->list_expires = fs_cache_expiry(fs, fs->cfg.dir_timeout, fs->changes);
		}
		n->nlookup++;
		fs_fill_entry(fs, n, e);
	} else {
		err = p ? -ENOMEM : -ENOENT;
	}
	table_unlock(fs);
	return err;
}

int fs_mkdir(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	     struct fs_entry *e)
{
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	char *path = fs_child_path_of(fs, parent, name, &err);
	struct before_create bc = before_create(fs);
	/* Write-back queues it where the name is known absent (the queue
	 * lands before anything on or below it reaches the sandbox). */
	bool queue = false;
	if (path && fs->wb) {
		table_lock(fs);
		struct node *p = node_by_ino(&fs->t, parent);
		queue = p && fs_name_known_absent(fs, p, name);
		table_unlock(fs);
	}
	if (path)
		err = queue && wb_queue_mkdir(fs, path, mode & 07777) == 0
			      ? 0
			      : sb_mkdir(fs->b, path, mode & 07777);
	free(path);
	if (err < 0)
		return err;
	return new_child(fs, parent, name, S_IFDIR | (mode & 07777), 4096,
			 NULL, bc, e);
}

int fs_symlink(struct fs *fs, const char *target, uint64_t parent,
	       const char *name, struct fs_entry *e)
{
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	char *path = fs_child_path_of(fs, parent, name, &err);
	if (path)
		err = sb_symlink(fs->b, target, path);
	free(path);
	if (err < 0)
		return err;
	return new_child(fs, parent, name, S_IFLNK | 0777,
			 (off_t)strlen(target), target, NOT_A_DIR, e);
}

int fs_mknod(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	     struct fs_entry *e)
{
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	if (!S_ISREG(mode))
		return -EPERM; /* FIFOs and devices would be the host's */
	char *path = fs_child_path_of(fs, parent, name, &err);
	if (path) {
		/* An empty upload creates the file with its mode. */
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		struct sb_upload u = {.path = path, .fd = fd, .mode = mode & 07777,
				      .mtime = {.tv_nsec = UTIME_OMIT}};
		err = fd < 0 ? -errno : sb_write_file(fs->b, &u);
		if (fd >= 0)
			close(fd);
	}
	free(path);
	if (err < 0)
		return err;
	return new_child(fs, parent, name, S_IFREG | (mode & 07777), 0, NULL,
			 NOT_A_DIR, e);
}

/* The other names of a hard-linked file: their cached link count (and
 * ctime) changed with a link or unlink elsewhere. */
struct same_file {
	dev_t dev;
	ino_t ino;
	int nlink_delta;
	bool keep; /* attributes stay cached, with a new ctime */
	struct timespec now;
	uint64_t *v;
	size_t n, cap;
};

static void collect_same_file(struct node *n, void *arg)
{
	struct same_file *s = arg;
	if (!fs_node_names_file(n, s->dev, s->ino))
		return;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		uint64_t *v = realloc(s->v, cap * sizeof *v);
		if (!v)
			return;
		s->v = v;
		s->cap = cap;
	}
	if (s->keep)
		n->st.st_ctim = s->now;
	else
		node_forget_attr(n);
	/* A spool being written keeps its attributes (they are ours until
	 * its upload): only the link count is the sandbox's to change. */
	long links = (long)n->st.st_nlink + s->nlink_delta;
	if (links >= 1)
		n->st.st_nlink = (nlink_t)links;
	s->v[s->n++] = n->ino;
}

void fs_same_file_relinked(struct fs *fs, dev_t dev, ino_t ino,
			   int nlink_delta, bool keep)
{
	if (ino == 0) /* a backend that does not report inodes */
		return;
	struct same_file s = {.dev = dev, .ino = ino, .nlink_delta = nlink_delta,
			      .keep = keep};
	clock_gettime(CLOCK_REALTIME, &s.now);
	table_lock(fs);
	node_walk(fs->t.root, collect_same_file, &s);
	table_unlock(fs);
	/* Outside the table lock: the kernel may call back into us. */
	for (size_t i = 0; i < s.n; i++)
		fs_notify_inode(fs, s.v[i], -1, 0);
	free(s.v);
}

/* A file still only in its spool (new, or written and not uploaded) is
 * uploaded first, so the new name shares what the old one shows. */
static int upload_before_link(struct fs *fs, uint64_t ino, const char *from)
{
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	struct file_state *f = n ? fs_pin_file(fs, n) : NULL;
	table_unlock(fs);
	if (!f)
		return n ? 0 : -ENOENT;
	file_lock(f);
	int err = f->dirty ? fs_upload_locked(fs, n, f, from) : 0;
	file_unlock(f);
	fs_unpin_file(fs, ino);
	return err;
}

/* Records the new name of a linked file: both names are one file, and
 * what the sandbox says of it now (st) holds for both. Table lock NOT
 * held. */
static int record_link(struct fs *fs, uint64_t ino, uint64_t newparent,
		       const char *newname, struct stat *st,
		       const char *target, struct fs_entry *e)
{
	int err = 0;
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, newparent);
	struct node *n = p ? node_child_get(&fs->t, p, newname) : NULL;
	struct node *old = node_by_ino(&fs->t, ino);
	if (p)
		node_entries_changed(p); /* a new name: its mtime and ctime */
	if (n) {
		/* A stat that tells no link count (nlink 0): one more name than
		 * the file had, as far as the mount knows. */
		if (st->st_nlink == 0 && old)
			st->st_nlink = (old->st.st_nlink ? old->st.st_nlink : 1) + 1;
		struct stat copy = *st;
		fs_record_attr(fs, n, fs->changes, st, target);
		if (old && old != n)
			fs_record_attr(fs, old, fs->changes, &copy, target);
		/* A stat that tells no inode: the two names still share one
		 * identity, the mount's, so an unlink or a rename over either
		 * lowers the other's count and a rename of one onto the other
		 * does nothing. */
		if (copy.st_ino == 0 && old && old != n) {
			if (!old->guest_ino) {
				old->guest_ino = old->ino;
				old->guest_dev = NODE_DEV_OURS;
			}
			n->guest_ino = old->guest_ino;
			n->guest_dev = old->guest_dev;
		}
		n->seen_mark = p->list_mark;
		n->nlookup++;
		fs_fill_entry(fs, n, e);
	} else {
		err = p ? -ENOMEM : -ENOENT;
	}
	table_unlock(fs);
	return err;
}

/* Write-back: a queued remove of another name of the file lands first,
 * or the link's answer would count that name. */
static void drain_removes_of(struct fs *fs, uint64_t ino)
{
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	uint64_t dev = n ? n->guest_dev : 0, file = n ? n->guest_ino : 0;
	table_unlock(fs);
	wb_drain_removes_of(fs, dev, file);
}

/* The new name of a file whose spool holds the sandbox's copy whole
 * starts with a copy of it: git writes each object under a temporary name,
 * links it to its final one and removes the first, and a reader of the
 * object then needs no fetch. Opens check the copy's identity against the
 * attributes like any kept spool's, and drop it while the file has two
 * names; a coherence point or a reported change while the copy is made
 * (which could not mark it invalid) drops it at once. Table lock NOT held. */
static void share_content_with_link(struct fs *fs, uint64_t ino, uint64_t new_ino)
{
	table_lock(fs);
	struct node *old = node_by_ino(&fs->t, ino);
	struct file_state *f = old ? fs_pin_file(fs, old) : NULL;
	uint64_t gen = fs->t.gen, changes = fs->changes;
	table_unlock(fs);
	if (!f)
		return;
	file_lock(f);
	struct file_state *c = file_state_cloneable(f) && f->size <= FS_RETAINED_MAX_FILE_BYTES
				       ? file_state_clone(f, fs->cfg.spool_dir)
				       : NULL;
	file_unlock(f);
	fs_unpin_file(fs, ino);
	if (!c)
		return;
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, new_ino);
	if (n && !n->file && S_ISREG(n->st.st_mode) && n->st.st_size == c->size &&
	    fs->t.gen == gen && fs->changes == changes) {
		n->file = c;
		c = NULL;
		fs_file_unref(fs, n); /* kept as a read cache, within its budget */
	}
	table_unlock(fs);
	file_state_free(c);
}

/* The file's other names count the new one too. Where the stat tells
 * no inode, they are the names the mount's own links gave one identity
 * (record_link), and the count the old name's plus one, taken before
 * they move: inode 0 would name every file the sandbox told none of.
 * Table lock NOT held. */
static void relink_others(struct fs *fs, uint64_t ino, struct stat *st)
{
	dev_t dev = st->st_dev;
	ino_t file = st->st_ino;
	if (file == 0) {
		table_lock(fs);
		struct node *old = node_by_ino(&fs->t, ino);
		dev = old ? old->guest_dev : 0;
		file = old ? old->guest_ino : 0;
		if (st->st_nlink == 0 && old)
			st->st_nlink = (old->st.st_nlink ? old->st.st_nlink : 1) + 1;
		table_unlock(fs);
	}
	if (file)
		fs_same_file_relinked(fs, dev, file, 1, false);
}

int fs_link(struct fs *fs, uint64_t ino, uint64_t newparent,
	    const char *newname, struct fs_entry *e, struct fs_later *later)
{
	int err = fs_check_alive(fs);
	if (err == 0)
		err = fs_check_new_name(fs, newparent, newname);
	if (err < 0)
		return err;
	int deferred = link_pending_defer(fs, ino, newparent, newname, e);
	if (deferred) {
		later->inval_attrs = ino;
		return 0;
	}
	err = link_pending_settle_ino(fs, ino);
	if (err < 0)
		return err;
	char *from = fs_path_of(fs, ino, &err);
	char *to = from ? fs_child_path_of(fs, newparent, newname, &err) : NULL;
	if (to)
		err = upload_before_link(fs, ino, from);
	if (to && err == 0)
		drain_removes_of(fs, ino);
	struct stat st;
	char *target = NULL;
	if (to && err == 0)
		err = sb_link(fs->b, from, to, &st, &target);
	free(from);
	free(to);
	if (err == 0) {
		relink_others(fs, ino, &st);
		err = record_link(fs, ino, newparent, newname, &st, target, e);
		if (err == 0)
			share_content_with_link(fs, ino, e->ino);
	}
	free(target);
	/* The kernel keeps the old name's link count otherwise: told before
	 * the reply, or the caller's next stat may still find it cached (a
	 * notice sent only after the reply raced it: fsdiff saw nlink 1),
	 * and again after it, since the reply updates that inode's ctime. */
	if (err == 0) {
		later->inval_attrs = ino;
		later->inval_attrs_before = true;
	}
	return err;
}
