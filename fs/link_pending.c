#include "link_pending.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "fs_node.h"
#include "writeback/writeback.h"

/* n may take a deferred link to np/newname: a regular file with one name
 * whose node holds its spool, and that name known absent. Table lock. */
static bool may_defer(struct fs *fs, struct node *n, struct node *np,
		      const char *newname)
{
	return n && np && n->parent && S_ISREG(n->st.st_mode) && n->file &&
	       !fs_attr_linked(n) && !node_alias(&fs->t, n) &&
	       node_shown(&fs->t, n) == n && S_ISDIR(np->st.st_mode) &&
	       fs_name_known_absent(fs, np, newname);
}

/* The file has never reached the sandbox: nothing there to link yet.
 * f->lock held. */
static bool never_uploaded(const struct file_state *f)
{
	return f->dirty && !f->remote_exists && !f->unlinked;
}

/* s, at parent p's name, becomes n's alias: n's attributes and identity
 * (the mount's own until the sandbox tells one), so a stat, a listing or
 * a remove of either name counts both. Table lock held. */
static void become_alias(struct fs *fs, struct node *s, struct node *p,
			 struct node *n, bool landed)
{
	if (!n->guest_ino) {
		n->guest_ino = n->ino;
		n->guest_dev = NODE_DEV_OURS;
	}
	struct stat st;
	fs_node_stat(n, &st);
	st.st_ino = 0; /* no identity from this: it is set below */
	struct timespec exp = fs_cache_expiry(fs, fs->cfg.attr_timeout, fs->changes);
	node_set_attr(&fs->t, s, &st, NULL, &exp);
	s->guest_ino = n->guest_ino;
	s->guest_dev = n->guest_dev;
	s->seen_mark = p->list_mark;
	s->alias_of = n->ino;
	s->alias_landed = landed;
	n->alias = s->ino;
}

/* n moves to np/newname; an alias of it takes its old name. Table lock
 * held. 0 or -ENOMEM (nothing changed). */
static int move_leaving_alias(struct fs *fs, struct node *n, struct node *np,
			      const char *newname, bool landed)
{
	struct node *p = n->parent;
	char *oldname = strdup(n->name);
	if (!oldname || node_move(&fs->t, n, np, newname) < 0) {
		free(oldname);
		return -ENOMEM;
	}
	n->seen_mark = np->list_mark;
	struct node *s = node_child_get(&fs->t, p, oldname);
	if (!s)
		node_move(&fs->t, n, p, oldname);
	else
		become_alias(fs, s, p, n, landed);
	free(oldname);
	/* The hook sits below this layer's reach (core/fs.h); installed
	 * with the first alias, under the lock fs_record_upload reads it. */
	fs->upload_recorded = link_pending_land;
	return s ? 0 : -ENOMEM;
}

int link_pending_defer(struct fs *fs, uint64_t ino, uint64_t newparent,
		       const char *newname, struct fs_entry *e)
{
	if (!fs->wb)
		return 0;
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	struct node *np = node_by_ino(&fs->t, newparent);
	struct file_state *f = may_defer(fs, n, np, newname) ? fs_pin_file(fs, n) : NULL;
	table_unlock(fs);
	if (!f)
		return 0;
	/* The file's lock keeps a worker from uploading it meanwhile: the
	 * upload then lands under the new name and links the old one. */
	file_lock(f);
	bool deferred = false;
	char *rel = NULL;
	table_lock(fs);
	n = node_by_ino(&fs->t, ino);
	np = node_by_ino(&fs->t, newparent);
	if (never_uploaded(f) && may_defer(fs, n, np, newname) && n->file == f) {
		n->st.st_nlink = 2;
		deferred = move_leaving_alias(fs, n, np, newname, false) == 0;
		if (!deferred)
			n->st.st_nlink = 1;
	}
	if (deferred) {
		node_entries_changed(np);
		n->st.st_ctim = np->st.st_ctim;
		rel = node_path(n);
		n->nlookup++;
		fs_fill_entry(fs, n, e);
	}
	table_unlock(fs);
	if (deferred)
		wb_renamed(fs, f, rel);
	free(rel);
	file_unlock(f);
	fs_unpin_file(fs, ino);
	return deferred;
}

/* The alias s of n goes without a call: its link never landed. Table
 * lock held. */
static void drop_alias(struct node_table *t, struct node *n, struct node *s)
{
	struct node *p = s->parent;
	s->alias_of = 0;
	n->alias = 0;
	if (p) {
		node_entries_changed(p);
		n->st.st_ctim = p->st.st_ctim;
	}
	n->st.st_nlink = 1;
	/* One name again: the identity become_alias gave it goes, or the
	 * sandbox's inode, once told, would look like another file's. */
	if (n->guest_dev == NODE_DEV_OURS && n->guest_ino == n->ino)
		n->guest_ino = n->guest_dev = 0;
	node_detach(t, s);
}

/* Records the sandbox's link of n to its alias s (rc 0, st the new
 * name's stat), or drops the alias when the link failed. Table lock. */
static void record_landed(struct fs *fs, struct node *n, struct node *s, int rc,
			  struct stat *st, const char *target)
{
	if (rc < 0) {
		drop_alias(&fs->t, n, s);
		return;
	}
	s->alias_landed = true;
	/* a listing answered after this names the alias (struct node) */
	fs_landed(s);
	if (st->st_nlink == 0)
		st->st_nlink = 2;
	struct stat copy = *st;
	fs_record_attr(fs, s, fs->changes, st, target);
	fs_record_attr(fs, n, fs->changes, &copy, target);
	/* without an inode from the stat, the mount's identity stays */
	s->guest_ino = n->guest_ino;
	s->guest_dev = n->guest_dev;
}

void link_pending_land(struct fs *fs, struct node *n, struct file_state *f)
{
	(void)f; /* held: an unlink or a swap of the names waits for this */
	int err = 0;
	table_lock(fs);
	struct node *s = node_alias(&fs->t, n);
	if (!s || s->alias_landed) {
		table_unlock(fs);
		return;
	}
	uint64_t sino = s->ino;
	char *from = fs_node_guest_path(fs, n, &err);
	char *to = from ? fs_node_guest_path(fs, s, &err) : NULL;
	table_unlock(fs);
	struct stat st;
	char *target = NULL;
	int rc = to ? sb_link(fs->b, from, to, &st, &target) : err ? err : -ENOENT;
	table_lock(fs);
	s = node_alias(&fs->t, n);
	if (s && s->ino == sino)
		record_landed(fs, n, s, rc, &st, target);
	table_unlock(fs);
	if (rc < 0)
		sb_warn("write-back: the hard link %s to %s could not be made in the "
			"sandbox: %s (that name is gone; the file stays under %s)",
			to ? to : "(its old name)", from ? from : "?", strerror(-rc),
			from ? from : "its other name");
	free(target);
	free(from);
	free(to);
}

int link_pending_settle_ino(struct fs *fs, uint64_t ino)
{
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	struct node *s = n ? node_alias(&fs->t, n) : NULL;
	struct file_state *f = s && !s->alias_landed ? fs_pin_file(fs, n) : NULL;
	table_unlock(fs);
	if (!f)
		return 0;
	/* Under the paths lock, as a worker's upload: a directory renamed
	 * meanwhile would move a name between the upload and the link. */
	wb_paths_read_lock(fs);
	int err = fs_upload_file(fs, n, f); /* the link lands with it */
	wb_paths_unlock(fs);
	table_lock(fs);
	s = node_alias(&fs->t, n);
	bool waits = s && !s->alias_landed;
	table_unlock(fs);
	fs_unpin_file(fs, ino);
	return err < 0 ? err : waits ? -EIO : 0;
}

/* The file node behind name c: c's own when it has an alias, the one it
 * shows when it is one; 0 otherwise. Table lock held. */
static uint64_t file_behind(struct fs *fs, struct node *c)
{
	if (!c)
		return 0;
	struct node *n = node_shown(&fs->t, c);
	return n != c ? n->ino : node_alias(&fs->t, c) ? c->ino : 0;
}

int link_pending_settle(struct fs *fs, uint64_t parent, const char *name)
{
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, parent);
	uint64_t ino = p ? file_behind(fs, node_child(&fs->t, p, name)) : 0;
	table_unlock(fs);
	return ino ? link_pending_settle_ino(fs, ino) : 0;
}

int link_pending_name_goes(struct fs *fs, uint64_t parent, const char *name,
			   bool unlink)
{
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, parent);
	uint64_t ino = p ? file_behind(fs, node_child(&fs->t, p, name)) : 0;
	struct node *n = ino ? node_by_ino(&fs->t, ino) : NULL;
	struct file_state *f = n ? fs_pin_file(fs, n) : NULL;
	table_unlock(fs);
	if (!ino)
		return 0;
	/* Under the file's lock: its upload and link are done or not begun. */
	if (f)
		file_lock(f);
	int gone = 0;
	char *rel = NULL;
	table_lock(fs);
	p = node_by_ino(&fs->t, parent);
	struct node *c = p ? node_child(&fs->t, p, name) : NULL;
	n = node_by_ino(&fs->t, ino);
	struct node *s = n ? node_alias(&fs->t, n) : NULL;
	if (s && c == n) {
		/* The file's own name goes: it takes the alias's name, and
		 * the alias this one, so the name left keeps the node the
		 * kernel holds for both. */
		struct node *sp = s->parent;
		char *sname = strdup(s->name);
		bool landed = s->alias_landed;
		s->alias_of = 0;
		n->alias = 0;
		if (sname && sp && move_leaving_alias(fs, n, sp, sname, landed) == 0) {
			rel = node_path(n);
			c = node_alias(&fs->t, n);
			s = c;
		} else {
			s = NULL;
		}
		free(sname);
	}
	if (unlink && s && c == s && !s->alias_landed) {
		drop_alias(&fs->t, n, s);
		gone = 1;
	}
	table_unlock(fs);
	if (f && rel)
		wb_renamed(fs, f, rel);
	free(rel);
	if (f) {
		file_unlock(f);
		fs_unpin_file(fs, ino);
	}
	return gone;
}

struct node *link_pending_shown(struct fs *fs, struct node *c,
				struct alias_dissolved *was)
{
	*was = (struct alias_dissolved){0};
	struct node *n = node_shown(&fs->t, c);
	if (n == c)
		return NULL;
	struct timespec now = fs_now();
	if (c->alias_landed && !node_attr_fresh(&fs->t, c, &now)) {
		*was = (struct alias_dissolved){.name_ino = c->ino, .file_ino = n->ino,
						.dev = c->guest_dev, .ino = c->guest_ino};
		c->alias_of = 0;
		n->alias = 0;
		/* whose file it names now, only the sandbox's answer tells */
		c->guest_ino = c->guest_dev = 0;
		return NULL;
	}
	return n;
}

struct node *link_pending_rejoin(struct fs *fs, struct node *shown,
				 const struct alias_dissolved *was)
{
	struct node *c = node_by_ino(&fs->t, was->name_ino);
	struct node *n = node_by_ino(&fs->t, was->file_ino);
	if (!c)
		return shown;
	if (!c->guest_ino) { /* the answer told no inode: as before */
		c->guest_dev = was->dev;
		c->guest_ino = was->ino;
		return shown;
	}
	if (shown != c || !n || n->alias || c->alias_of || node_alias(&fs->t, c) ||
	    S_ISDIR(c->st.st_mode) || c->guest_dev == NODE_DEV_OURS ||
	    !fs_node_names_file(n, c->guest_dev, c->guest_ino))
		return shown;
	c->alias_of = n->ino;
	c->alias_landed = true;
	n->alias = c->ino;
	/* the sandbox's answer is the newer one, but for what the mount
	 * wrote and has not uploaded yet */
	if (!n->file || !n->file->dirty) {
		struct stat st = c->st;
		st.st_ino = 0; /* the identity is already n's */
		node_set_attr(&fs->t, n, &st, c->link_target, &c->attr_expires);
	}
	return n;
}
