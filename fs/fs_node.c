/* What the fs operations share: name checks, entries, attributes fetched
 * and recorded, guest paths, spool pins, kernel notifications. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_node.h"

int fs_check_alive(const struct fs *fs)
{
	return sb_backend_is_dead(fs->b) ? -EIO : 0;
}

int fs_check_name(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || strchr(name, '/'))
		return -EINVAL;
	if (len > NAME_MAX_BYTES)
		return -ENAMETOOLONG;
	return 0;
}

void fs_fill_entry(const struct fs *fs, const struct node *n,
		   struct fs_entry *e)
{
	memset(e, 0, sizeof *e);
	e->ino = n->ino;
	fs_node_stat(n, &e->attr);
	struct timespec now = fs_now();
	/* Attributes we know to be stale are shown but not cached. */
	e->attr_timeout = fs_attr_fresh(fs, n, &now) ? fs->cfg.attr_timeout : 0;
	/* A name of a file with several is asked again at each use: the
	 * kernel holds each name as its own inode, so it takes a rename of
	 * one onto another for a move (rename_planned). Not where the names
	 * show one node (link_pending.h): the kernel then sees one inode and
	 * does nothing itself. */
	e->entry_timeout = fs_attr_linked(n) && !n->alias ? 0 : fs->cfg.attr_timeout;
}

void fs_record_attr(struct fs *fs, struct node *n, uint64_t since, struct stat *st,
		    const char *link)
{
	fs_map_attr(fs, st);
	struct timespec exp = fs_cache_expiry(fs, fs->cfg.attr_timeout, since);
	node_set_attr(&fs->t, n, st, link, &exp);
}

/* Attributes of a locally made node (mkdir, create, symlink) without a
 * round trip to ask the sandbox what it just did. */
void fs_record_new(struct fs *fs, struct node *n, mode_t mode, off_t size,
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
	fs_record_attr(fs, n, fs->changes, &st, link);
	n->attr_made_here = true;
}

/* The mount changed an entry of directory ino (table lock held). */
void fs_entries_changed(struct fs *fs, uint64_t ino)
{
	struct node *d = node_by_ino(&fs->t, ino);
	if (d)
		node_entries_changed(d);
}

/* How many times a stat overtaken by the mount's own change of the
 * directory is asked again before the table's view is answered as it is. */
#define REFRESH_ATTEMPTS 3

/* The guest path of name in directory dir (a guest path): malloc'd, or
 * NULL with *err. */
static char *join_guest_path(const char *dir, const char *name, int *err)
{
	char *p;
	if (asprintf(&p, "%s/%s", strcmp(dir, "/") ? dir : "", name) < 0) {
		*err = -ENOMEM;
		return NULL;
	}
	return p;
}

/* Directory n's subdirectories may have changed behind the mount (a
 * report or a coherence point: links_stale): where
 * its stat counts no links, a listing counts them (apply_listing); one
 * that fails leaves the count for the next stat. Table lock held; n again,
 * or NULL with *err once it has gone. */
static struct node *recount_links(struct fs *fs, struct node *n, int *err)
{
	n->links_stale = false;
	if (!n->nlink_untold || !S_ISDIR(n->st.st_mode))
		return n;
	uint64_t ino = n->ino;
	int r = fs_load_listing(fs, ino);
	n = node_by_ino(&fs->t, ino);
	if (!n)
		*err = -ENOENT;
	else if (r < 0)
		n->links_stale = true;
	return n;
}

/* n's stat told no owner (docker's archive stat) and none was told since
 * the sandbox may have changed it: a listing of its directory tells it,
 * and its siblings' (apply_listing). One that fails leaves the owner shown
 * for the next stat. Table lock held; n again, or NULL with *err. */
static struct node *retell_owner(struct fs *fs, struct node *n, int *err)
{
	n->owner_stale = false;
	uint64_t ino = n->ino;
	int r = fs_load_listing(fs, n->parent->ino);
	n = node_by_ino(&fs->t, ino);
	if (!n)
		*err = -ENOENT;
	else if (r < 0)
		n->owner_stale = true;
	return n;
}

struct node *fs_refresh_attr(struct fs *fs, struct node *parent,
			     const char *name, struct node *n, int *err)
{
	for (int attempt = 1;; attempt++) {
		struct node *dir = name ? parent : n->parent;
		char *path;
		if (!name) {
			path = fs_node_guest_path(fs, n, err);
		} else {
			char *d = fs_node_guest_path(fs, parent, err);
			path = d ? join_guest_path(d, name, err) : NULL;
			free(d);
		}
		if (!path)
			return NULL;
		uint64_t dino = dir ? dir->ino : 0, nino = n ? n->ino : 0;
		uint64_t since = fs->changes, landed = n ? n->landed : 0;
		uint64_t dir_changes = dir ? dir->entry_changes : 0;
		table_unlock(fs);
		struct stat st;
		char *link = NULL;
		int r = sb_stat(fs->b, path, &st, &link);
		free(path);
		table_lock(fs);
		/* The nodes may have gone while unlocked: look them up again. */
		dir = dino ? node_by_ino(&fs->t, dino) : NULL;
		n = nino ? node_by_ino(&fs->t, nino) : NULL;
		if (name)
			parent = dir;
		/* An upload landed meanwhile: the answer may predate it, and
		 * what the node shows (recorded by the upload) is newer. */
		if (n && n->landed != landed) {
			free(link);
			return n;
		}
		/* The mount changed the directory meanwhile (a rename over
		 * the name, an unlink, a create): the answer may be of a file
		 * the name no longer holds, or the node no longer has that
		 * path. Asked again, of what the name or the node is now. */
		if (dir && dir->entry_changes != dir_changes) {
			free(link);
			if (name)
				n = node_child(&fs->t, dir, name);
			if (attempt < REFRESH_ATTEMPTS && (name || n))
				continue;
			/* overtaken for good: what the table shows, its
			 * attributes the mount's */
			if (!n)
				*err = -ENOENT;
			return n;
		}
		if (r < 0) {
			if (r == -ENOENT && n && n->parent &&
			    (!n->file || n->file->retained))
				node_detach(&fs->t, n);
			free(link);
			*err = r;
			return NULL;
		}
		if (!n) {
			if (!parent || !name ||
			    (!parent->parent && parent->ino != NODE_ROOT_INO)) {
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
		bool owner_untold = st.st_uid == SB_ID_UNTOLD || st.st_gid == SB_ID_UNTOLD;
		if (!n->file || !n->file->dirty)
			fs_record_attr(fs, n, since, &st, link);
		free(link);
		if (owner_untold && (!n->owner_told || n->owner_stale) && n->parent) {
			n = retell_owner(fs, n, err);
			if (!n)
				return NULL;
		}
		return n->links_stale ? recount_links(fs, n, err) : n;
	}
}

/* Runs a path operation on node ino: copies its guest path under the lock
 * and calls fn without it. */
char *fs_path_of(struct fs *fs, uint64_t ino, int *err)
{
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	char *p = n ? fs_node_guest_path(fs, n, err) : NULL;
	if (!n)
		*err = -ENOENT;
	table_unlock(fs);
	return p;
}

char *fs_child_path_of(struct fs *fs, uint64_t parent, const char *name,
			   int *err)
{
	*err = fs_check_name(name);
	if (*err < 0)
		return NULL;
	char *dir = fs_path_of(fs, parent, err);
	char *p = dir ? join_guest_path(dir, name, err) : NULL;
	free(dir);
	if (p && strlen(p) >= PATH_MAX_BYTES) {
		free(p);
		*err = -ENAMETOOLONG;
		return NULL;
	}
	return p;
}

int fs_check_new_name(struct fs *fs, uint64_t parent, const char *name)
{
	int err;
	char *p = fs_child_path_of(fs, parent, name, &err);
	free(p);
	return p ? 0 : err;
}

/* Takes a reference to n's spool for an operation that needs it without
 * the table lock. */

/* The spool of an open handle, pinned for use without the table lock. */
struct file_state *fs_handle_file(struct fs *fs, uint64_t fh,
				  struct node **np)
{
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, fh);
	struct file_state *f = n ? fs_pin_file(fs, n) : NULL;
	table_unlock(fs);
	*np = n;
	return f;
}

/* ---- kernel notifications ---- */

void fs_notify_inode(struct fs *fs, uint64_t ino, int64_t off, int64_t len)
{
	fs_lock_check_none("an inode notification");
	if (fs->notify.inode)
		fs->notify.inode(fs->notify.arg, ino, off, len);
}

void fs_notify_entry(struct fs *fs, uint64_t parent, const char *name,
		     bool is_dir)
{
	fs_lock_check_none("an entry notification");
	if (fs->notify.entry)
		fs->notify.entry(fs->notify.arg, parent, name, is_dir);
}

void fs_send_before(struct fs *fs, const struct fs_later *later)
{
	if (later->inval_attrs && later->inval_attrs_before)
		fs_notify_inode(fs, later->inval_attrs, -1, 0);
}

void fs_send_later(struct fs *fs, const struct fs_later *later)
{
	/* Offset -1: attributes only, the page cache is left to the next
	 * open. */
	if (later->inval_attrs)
		fs_notify_inode(fs, later->inval_attrs, -1, 0);
	for (size_t i = 0; i < sizeof later->inval_names / sizeof later->inval_names[0]; i++)
		if (later->inval_names[i].parent)
			fs_notify_entry(fs, later->inval_names[i].parent,
					later->inval_names[i].name, false);
}

uint64_t fs_listing_exec_mark(struct fs *fs, const struct node *dir)
{
	/* watched: a listing no reported change forgot is current once the
	 * last command's changes are in */
	return atomic_load(&fs->watched) ? atomic_load(&fs->settled_exec_mark)
					 : dir->list_exec_mark;
}

bool fs_name_known_absent(struct fs *fs, struct node *dir, const char *name)
{
	struct timespec now = fs_now();
	if (!node_list_fresh(&fs->t, dir, &now) || node_child(&fs->t, dir, name))
		return false;
	uint64_t mark = fs_listing_exec_mark(fs, dir);
	return mark != SB_EXEC_BUSY && mark == sb_exec_quiet_mark(fs->b);
}
