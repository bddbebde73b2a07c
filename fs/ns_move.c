/* Namespace operations that take names away or move them: unlink, rmdir,
 * rename. In write-back mode a remove may be queued (wb_removes.h) and a
 * file still waiting for its first upload is renamed here only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "coherence.h"
#include "fs_node.h"
#include "link_pending.h"
#include "writeback/wb_removes.h"
#include "writeback/writeback.h"

/* Files below dir still waiting for their upload (queued by write-back,
 * or new and open), or names waiting for their link (link_pending.h): not
 * in the sandbox yet, but dir is not empty. Table lock held. */
static bool pending_upload_below(const struct node *dir)
{
	for (const struct node *c = dir->children; c; c = c->next_sibling)
		if ((c->file && c->file->dirty && !c->file->unlinked) || c->alias_of)
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
		.list_exec_mark = fs_listing_exec_mark(fs, dir),
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

/* What a remove found under the table lock before its call. */
struct remove_plan {
	uint64_t ino;          /* the node removed, 0 if not cached */
	struct file_state *f;  /* its spool, pinned */
	bool pending_below;    /* a directory with uploads still to land */
	bool queue;            /* write-back may queue the remove */
	uint64_t file_dev, file_ino; /* a file with other names: which */
};

static struct remove_plan plan_remove(struct fs *fs, uint64_t parent,
				      const char *name, bool is_dir)
{
	struct remove_plan pl = {0};
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	pl.ino = n ? n->ino : 0;
	pl.f = n ? fs_pin_file(fs, n) : NULL;
	pl.pending_below = is_dir && n && pending_upload_below(n);
	/* Write-back queues the remove (wb_removes.h): a file (one with other
	 * names with its identity, which a backend that reports no inodes
	 * cannot give), a directory only when it is known empty; otherwise
	 * the sandbox answers now, after the queued removes it depends on
	 * (the dispatcher lands them ahead of the call). */
	struct timespec now = fs_now();
	bool linked = n && !is_dir && n->st.st_nlink > 1;
	if (linked) {
		pl.file_dev = n->guest_dev;
		pl.file_ino = n->guest_ino;
	}
	pl.queue = fs->wb && n &&
		   (is_dir ? known_empty(fs, n, &now) : !linked || pl.file_ino);
	table_unlock(fs);
	return pl;
}

/* Removes path in the sandbox (or queues it), ordered with the file's
 * uploads. */
static int remove_in_sandbox(struct fs *fs, const struct remove_plan *pl,
			     const char *path, bool is_dir)
{
	struct file_state *f = pl->f;
	int err;
	/* Holding the spool's lock orders the removal after an upload in
	 * flight and keeps one from starting after it. */
	if (f)
		file_lock(f);
	if (f)
		keep_open_content(fs, f, path);
	if (f && !f->remote_exists)
		err = 0; /* created here and never uploaded: nothing to remove */
	else if (!pl->queue || wb_queue_remove(fs, path, is_dir, pl->file_dev,
					       pl->file_ino) < 0)
		err = sb_remove(fs->b, path, is_dir);
	else
		err = 0;
	if (f && (err == 0 || err == -ENOENT)) {
		f->unlinked = true;
		wb_forget(fs, f); /* a queued upload is cancelled */
	}
	if (f)
		file_unlock(f);
	return err;
}

/* A name of a file with other names goes (an unlink, a rename over it):
 * which file, taken under the table lock before its node goes, so the
 * other names lose a link after it (fs_same_file_relinked). */
struct linked_name {
	bool linked;
	dev_t dev;
	ino_t ino;
};

static struct linked_name linked_name_of(const struct node *n)
{
	bool linked = n && !S_ISDIR(n->st.st_mode) && n->st.st_nlink > 1;
	return (struct linked_name){.linked = linked,
				    .dev = linked ? n->guest_dev : 0,
				    .ino = linked ? n->guest_ino : 0};
}

/* Table lock NOT held. */
static void linked_name_gone(struct fs *fs, struct linked_name g)
{
	if (g.linked)
		fs_same_file_relinked(fs, g.dev, g.ino, -1, true);
}

/* The name is gone (err 0) or was already (-ENOENT): the node goes, and
 * other names of a hard-linked file lose a link. */
static void record_remove(struct fs *fs, uint64_t parent, const char *name,
			  bool is_dir, uint64_t ino, int err)
{
	struct linked_name gone = {0};
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	if (p && err == 0)
		node_entries_changed(p);
	if (p && err == 0 && is_dir)
		node_subdirs_changed(p, -1);
	if (n && (!ino || n->ino == ino)) {
		if (!is_dir)
			gone = linked_name_of(n);
		node_detach(&fs->t, n);
	}
	table_unlock(fs);
	linked_name_gone(fs, gone);
}

static int remove_child(struct fs *fs, uint64_t parent, const char *name,
			bool is_dir)
{
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	/* A name whose link waits goes without a call (link_pending.h). */
	int alias = is_dir ? 0 : link_pending_name_goes(fs, parent, name, true);
	if (alias)
		return 0;
	char *path = fs_child_path_of(fs, parent, name, &err);
	if (!path)
		return err;
	struct remove_plan pl = plan_remove(fs, parent, name, is_dir);
	if (pl.pending_below)
		err = -ENOTEMPTY;
	else
		err = remove_in_sandbox(fs, &pl, path, is_dir);
	free(path);
	if (!pl.pending_below && (err == 0 || err == -ENOENT))
		record_remove(fs, parent, name, is_dir, pl.ino, err);
	if (pl.f)
		fs_unpin_file(fs, pl.ino);
	return err;
}

int fs_unlink(struct fs *fs, uint64_t parent, const char *name)
{
	return remove_child(fs, parent, name, false);
}

int fs_rmdir(struct fs *fs, uint64_t parent, const char *name)
{
	return remove_child(fs, parent, name, true);
}

/* What a rename found under the table lock before its calls. */
struct rename_plan {
	uint64_t nino, oino;      /* the node moved and the one replaced */
	struct node *n;
	struct file_state *f, *of; /* their spools, pinned */
	bool subtree;             /* n has cached children */
	bool old_is_dir, moved_dir;
	bool old_not_empty;
	/* both names are links to one file: rename(2) then does nothing */
	bool same_file;
};

/* Write-back: a file still waiting for its first upload is renamed here
 * only, and uploaded under its new name (an editor's or git's write-temp-
 * then-rename costs no call). Its lock keeps a worker from uploading it
 * under the old name meanwhile. A file the rename replaces loses its own
 * pending upload. Only when the name it replaces is not in the sandbox
 * (nothing there, or a file of ours never uploaded): an upload writes
 * into what a name holds, and through a symlink there, so a symlink or
 * file the sandbox has must be replaced by the sandbox's rename. Returns
 * false when the rename must go to the sandbox. */
static bool rename_pending(struct fs *fs, const struct rename_plan *pl,
			   uint64_t newparent, const char *newname, int *err)
{
	struct file_state *f = pl->f, *of = pl->of;
	if (pl->oino && pl->oino != pl->nino && !of)
		return false; /* the sandbox's: a symlink, or a file not open */
	file_lock(f);
	if (!f->dirty || f->remote_exists || f->unlinked) {
		file_unlock(f);
		return false;
	}
	if (of) {
		file_lock(of);
		if (of->remote_exists && !of->unlinked) {
			file_unlock(of);
			file_unlock(f);
			return false;
		}
		of->unlinked = true;
		wb_forget(fs, of);
	}
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, pl->nino);
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
	table_unlock(fs);
	if (*err == 0)
		wb_renamed(fs, f, rel);
	free(rel);
	if (of)
		file_unlock(of);
	file_unlock(f);
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

static struct rename_plan plan_rename(struct fs *fs, uint64_t parent,
				      const char *name, uint64_t newparent,
				      const char *newname)
{
	struct rename_plan pl = {0};
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	pl.n = n;
	pl.subtree = n && n->children;
	pl.f = n ? fs_pin_file(fs, n) : NULL;
	pl.nino = n ? n->ino : 0;
	struct node *np = node_by_ino(&fs->t, newparent);
	struct node *old = np ? node_child(&fs->t, np, newname) : NULL;
	pl.of = old && old != n ? fs_pin_file(fs, old) : NULL;
	pl.oino = old ? old->ino : 0;
	pl.old_is_dir = old && S_ISDIR(old->st.st_mode);
	pl.same_file = n && old && old != n && n->guest_ino &&
		       fs_node_names_file(old, n->guest_dev, n->guest_ino);
	pl.moved_dir = n && old != n && S_ISDIR(n->st.st_mode);
	/* The sandbox's copy of a directory whose files are still pending
	 * upload (queued, or new and still open in the default mode) may be
	 * empty: the rename would succeed there and replace them. The kernel
	 * checks the types; emptiness is ours to know. */
	pl.old_not_empty = pl.old_is_dir && old != n && pending_upload_below(old);
	table_unlock(fs);
	return pl;
}

/* Renames in the sandbox, after what it must have first: pending data
 * below a directory, the file's own pending upload. */
static int rename_in_sandbox(struct fs *fs, const struct rename_plan *pl,
			     uint64_t parent, const char *name,
			     uint64_t newparent, const char *newname,
			     unsigned flags)
{
	int err = 0;
	if (pl->subtree) {
		char msg[256] = "";
		err = fs_flush_dirty(fs, msg, sizeof msg);
	}
	if (pl->f && err == 0)
		err = fs_upload_file(fs, pl->n, pl->f);
	char *from = err == 0 ? fs_child_path_of(fs, parent, name, &err) : NULL;
	char *to = from ? fs_child_path_of(fs, newparent, newname, &err) : NULL;
	/* A replaced file's queued upload must not land after the rename
	 * (a link to the same file is not replaced: nothing happens). */
	struct file_state *of = pl->same_file ? NULL : pl->of;
	if (of)
		file_lock(of);
	if (of && to && !(flags & RENAME_NOREPLACE))
		keep_open_content(fs, of, to);
	if (from && to)
		err = sb_rename(fs->b, from, to, flags & RENAME_NOREPLACE);
	if (of && err == 0) {
		of->unlinked = true;
		wb_forget(fs, of);
	}
	if (of)
		file_unlock(of);
	free(from);
	free(to);
	return err;
}

/* The sandbox renamed: the node moves (or what it replaced goes). */
static int record_rename(struct fs *fs, const struct rename_plan *pl,
			 uint64_t parent, const char *name,
			 uint64_t newparent, const char *newname)
{
	int err = 0;
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, parent);
	struct node *np = node_by_ino(&fs->t, newparent);
	struct node *n = p ? node_child(&fs->t, p, name) : NULL;
	struct node *old = np ? node_child(&fs->t, np, newname) : NULL;
	if (old && old != n && old->file)
		old->file->unlinked = true;
	/* The name replaced was one of a file's several: the others lose a
	 * link, as with an unlink (where no stat tells counts, nothing else
	 * would lower them). */
	struct linked_name gone = old && old != n && !pl->same_file && !pl->old_is_dir
					  ? linked_name_of(old)
					  : (struct linked_name){0};
	fs_entries_changed(fs, parent);
	fs_entries_changed(fs, newparent);
	if (pl->moved_dir)
		rename_subdir_counts(p, np, pl->old_is_dir);
	if (n && np) {
		err = node_move(&fs->t, n, np, newname);
		n->seen_mark = np->list_mark;
		/* A rename changes the node's ctime only; the times are the
		 * call's, as the parents' are. */
		n->st.st_ctim = np->st.st_ctim;
	} else if (old) {
		node_detach(&fs->t, old);
	}
	table_unlock(fs);
	linked_name_gone(fs, gone);
	return err;
}

static int rename_planned(struct fs *fs, const struct rename_plan *pl,
			  uint64_t parent, const char *name,
			  uint64_t newparent, const char *newname,
			  unsigned flags, struct fs_later *later)
{
	if (pl->old_not_empty)
		return -ENOTEMPTY;
	int err = 0;
	if (fs->wb && pl->f && !pl->subtree && !flags && !pl->old_is_dir &&
	    rename_pending(fs, pl, newparent, newname, &err))
		return err;
	/* Below a directory, no worker may upload by the old paths
	 * meanwhile. */
	bool paths_locked = pl->subtree && fs->wb;
	if (paths_locked) {
		wb_drain(fs);
		wb_paths_write_lock(fs);
	}
	/* Two names of one file: rename(2) does nothing and succeeds (a
	 * sandbox's mv would refuse, "are the same file"). The identity is
	 * fresh: such names are never served from a cache. The kernel, which
	 * holds each name as its own inode, moves its entry as for any
	 * rename once the reply comes: both names are asked again then. */
	if (pl->same_file) {
		err = 0;
		if (later) {
			later->inval_names[0].parent = parent;
			later->inval_names[0].name = name;
			later->inval_names[1].parent = newparent;
			later->inval_names[1].name = newname;
		}
	} else {
		err = rename_in_sandbox(fs, pl, parent, name, newparent, newname, flags);
	}
	if (err == 0 && !pl->same_file)
		err = record_rename(fs, pl, parent, name, newparent, newname);
	if (paths_locked)
		wb_paths_unlock(fs);
	return err;
}

int fs_rename(struct fs *fs, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, unsigned flags,
	      struct fs_later *later)
{
	int err = fs_check_alive(fs);
	if (err == 0 && (flags & ~RENAME_NOREPLACE))
		err = -EINVAL;
	if (err == 0)
		err = fs_check_new_name(fs, newparent, newname);
	if (err == 0)
		err = link_pending_settle(fs, parent, name);
	if (err == 0)
		err = link_pending_settle(fs, newparent, newname);
	if (err == 0)
		link_pending_name_goes(fs, newparent, newname, false);
	if (err < 0)
		return err;
	struct rename_plan pl = plan_rename(fs, parent, name, newparent, newname);
	err = rename_planned(fs, &pl, parent, name, newparent, newname, flags,
			     later);
	if (pl.f)
		fs_unpin_file(fs, pl.nino);
	if (pl.of)
		fs_unpin_file(fs, pl.oino);
	return err;
}
