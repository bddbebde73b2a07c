/* Directory operations (opendir, readdir, releasedir, fsyncdir), the
 * cached listings they and lookups share, and what concerns the file
 * system as a whole: statfs and the root's control attribute. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_node.h"
#include "writeback/writeback.h"

struct dir_entry {
	char *name;
	uint64_t ino;
	struct stat st;
};

struct fs_dir {
	struct dir_entry *v;
	size_t n;
};

static void dir_handle_free(struct fs_dir *d)
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
	if (c->alias_of)
		return !c->alias_landed; /* its link waits (link_pending.h) */
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
	uint64_t changes;	/* fs->changes: changes the watch reported */
};

/* Replaces the cached listing of directory node p with list, fetched
 * while the table was unlocked. Table lock held. */
static void apply_listing(struct fs *fs, struct node *p,
			  const struct sb_dirlist *list,
			  const struct listing_start *before)
{
	uint64_t mark = ++p->list_mark;
	struct timespec exp = fs_cache_expiry(fs, fs->cfg.attr_timeout, before->changes);
	struct timespec now = fs_now();
	p->list_gen = before->gen;
	p->list_exec_mark = before->exec_mark;
	for (size_t i = 0; i < list->n; i++) {
		struct sb_dirent *d = &list->v[i];
		if (fs_check_name(d->name) < 0 || strcmp(d->name, ".") == 0 ||
		    strcmp(d->name, "..") == 0)
			continue; /* never trust a name the sandbox sends */
		struct node *c = node_child_get(&fs->t, p, d->name);
		if (!c)
			break;
		c->seen_mark = mark;
		if (!c->file || !c->file->dirty) {
			bool ids_told = d->st.st_uid != SB_ID_UNTOLD &&
					d->st.st_gid != SB_ID_UNTOLD;
			/* untold ids: node_set_attr shows what was told
			 * before, until the stat its expired attributes
			 * make the mount ask */
			fs_map_attr(fs, &d->st);
			/* a directory whose count only a listing of its own
			 * tells again, this one telling none: asked at its
			 * next stat */
			bool recount = c->links_stale && S_ISDIR(d->st.st_mode);
			if (recount && d->st.st_nlink)
				c->links_stale = recount = false;
			node_set_attr(&fs->t, c, &d->st, d->link_target,
				      ids_told && !recount ? &exp : &now);
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
	/* Where the sandbox does not count a directory's links, a listing
	 * does: the subdirectories an sbexec made or moved count too. */
	p->links_stale = false;
	if (p->nlink_untold && S_ISDIR(p->st.st_mode)) {
		nlink_t links = 2;
		for (c = p->children; c; c = c->next_sibling)
			links += S_ISDIR(c->st.st_mode);
		p->st.st_nlink = links;
	}
	p->list_set = true;
	p->list_expires = fs_cache_expiry(fs, fs->cfg.dir_timeout, before->changes);
}

int fs_load_listing(struct fs *fs, uint64_t ino)
{
	for (int try = 0; try < LISTING_TRIES; try++) {
		int err = 0;
		struct node *p = node_by_ino(&fs->t, ino);
		char *path = p ? fs_node_guest_path(fs, p, &err) : NULL;
		if (!path)
			return p ? err : -ENOENT;
		uint64_t changes = p->entry_changes;
		uint64_t landed = p->landed;
		struct listing_start before = {
			.first_uploads = file_state_first_uploads(),
			.gen = fs->t.gen,
			.exec_mark = sb_exec_quiet_mark(fs->b),
			.changes = fs->changes,
		};
		table_unlock(fs);
		struct sb_dirlist list = {0};
		err = sb_list_dir(fs->b, path, &list);
		free(path);
		table_lock(fs);
		p = node_by_ino(&fs->t, ino);
		if (err == 0 && !p)
			err = -ENOENT;
		if (err == 0 && (p->entry_changes != changes ||
				 p->landed != landed)) {
			/* It may predate a change of ours. */
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

/* The snapshot of directory p's entries. Table lock held. */
static int snapshot_dir(struct node_table *t, struct node *p, struct fs_dir *d)
{
	size_t n = 0;
	for (struct node *c = p->children; c; c = c->next_sibling)
		n++;
	d->v = calloc(n + 2, sizeof *d->v);
	if (!d->v)
		return -ENOMEM;
	for (struct node *c = p->children; c; c = c->next_sibling) {
		struct dir_entry *e = &d->v[d->n];
		e->name = strdup(c->name);
		if (!e->name)
			break;
		const struct node *shown = node_shown(t, c);
		e->ino = shown->ino;
		fs_node_stat(shown, &e->st);
		d->n++;
	}
	return 0;
}

int fs_opendir(struct fs *fs, uint64_t ino, struct fs_dir **dp,
	       struct fs_later *later)
{
	*dp = NULL;
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	struct timespec now = fs_now();
	struct fs_dir *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	table_lock(fs);
	struct node *p = node_by_ino(&fs->t, ino);
	nlink_t links = p ? p->st.st_nlink : 0;
	if (!p)
		err = -ENOENT;
	else if (!node_list_fresh(&fs->t, p, &now))
		err = fs_load_listing(fs, ino);
	if (err == -EAGAIN)
		err = 0; /* kept changing: what the nodes know, uncached */
	p = node_by_ino(&fs->t, ino);
	if (p && p->st.st_nlink != links)
		later->inval_attrs = ino;
	if (err == 0 && p) {
		err = snapshot_dir(&fs->t, p, d);
		p->open_dirs++;
	} else if (err == 0) {
		err = -ENOENT;
	}
	table_unlock(fs);
	if (err < 0) {
		dir_handle_free(d);
		return err;
	}
	*dp = d;
	return 0;
}

void fs_readdir(struct fs *fs, uint64_t ino, struct fs_dir *d, off_t off,
		bool plus, fs_dirent_fn fn, void *ctx)
{
	/* Offsets: 0 ".", 1 "..", 2+i the i-th child. */
	table_lock(fs);
	for (off_t i = off; i < (off_t)d->n + 2; i++) {
		const char *name;
		struct fs_entry e;
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
			if (plus && n)
				fs_fill_entry(fs, n, &e);
		}
		if (!fn(ctx, name, &e, i + 1))
			break;
		/* The kernel now holds a reference to the inode. */
		if (plus && n)
			n->nlookup++;
	}
	table_unlock(fs);
}

void fs_releasedir(struct fs *fs, uint64_t ino, struct fs_dir *d)
{
	dir_handle_free(d);
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	if (n && n->open_dirs > 0) {
		n->open_dirs--;
		node_release_if_unused(&fs->t, n);
	}
	table_unlock(fs);
}

void fs_fsyncdir(struct fs *fs)
{
	/* Directory operations are synchronous, but for write-back's queued
	 * removes: they land now (a failure is reported at the next sync). */
	wb_drain_removes(fs);
}

int fs_statfs(struct fs *fs, struct statvfs *st)
{
	int err = fs_check_alive(fs);
	if (err < 0)
		return err;
	struct timespec now = fs_now();
	table_lock(fs);
	bool cached = fs->statfs_valid && fs->statfs_gen == fs->t.gen &&
		      (now.tv_sec < fs->statfs_expires.tv_sec ||
		       (now.tv_sec == fs->statfs_expires.tv_sec &&
			now.tv_nsec < fs->statfs_expires.tv_nsec));
	uint64_t gen = fs->t.gen;
	*st = fs->statfs_cache;
	table_unlock(fs);
	if (cached)
		return 0;
	err = sb_statfs(fs->b, fs->workdir, st);
	if (err < 0)
		return err;
	table_lock(fs);
	fs->statfs_cache = *st;
	fs->statfs_expires = fs_expiry(fs->cfg.attr_timeout);
	fs->statfs_gen = gen;
	fs->statfs_valid = true;
	table_unlock(fs);
	return 0;
}
