#include "spool_budget.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "fs_internal.h"

/* Tries after the first, while something was given back: another caller
 * (a fetch under way, a journal copy) may take the room before the next
 * try. */
#define SPOOL_FULL_TRIES 8

void fs_raise_open_files_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	rlim_t want = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = want;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

void spool_budget_init(struct spool_budget *sb)
{
	struct rlimit rl;
	sb->fd_budget = SIZE_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		sb->fd_budget = rl.rlim_cur / 2;
	pthread_mutex_init(&sb->full, NULL);
}

void spool_budget_destroy(struct spool_budget *sb)
{
	pthread_mutex_destroy(&sb->full);
}

/* ---- the read cache ---- */

static void kept_unlink(struct spool_budget *sb, struct file_state *f)
{
	if (!f->retained)
		return;
	if (f->lru_prev)
		f->lru_prev->lru_next = f->lru_next;
	else
		sb->kept_head = f->lru_next;
	if (f->lru_next)
		f->lru_next->lru_prev = f->lru_prev;
	else
		sb->kept_tail = f->lru_prev;
	f->lru_prev = f->lru_next = NULL;
	f->retained = false;
	sb->kept_count--;
	sb->kept_bytes -= f->size;
}

static void drop_spool(struct fs *fs, struct node *n)
{
	struct file_state *f = n->file;
	kept_unlink(&fs->spool, f);
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
	kept_unlink(&fs->spool, f);
}

void fs_file_forget(struct fs *fs, struct node *n)
{
	if (n->file && n->file->retained && n->file->pins == 0)
		drop_spool(fs, n);
}

/* Makes room in the read cache: its oldest spool goes, or, while a call
 * holds it pinned, leaves the cache (the unpin decides again). */
static void drop_oldest_kept(struct fs *fs)
{
	struct file_state *old = fs->spool.kept_tail;
	if (old->pins > 0)
		kept_unlink(&fs->spool, old);
	else
		drop_spool(fs, old->owner);
}

/* Every spool kept only as a read cache goes. How many left the cache.
 * Table lock held. */
static size_t drop_kept(struct fs *fs)
{
	size_t dropped = 0;
	for (; fs->spool.kept_tail; dropped++)
		drop_oldest_kept(fs);
	return dropped;
}

void fs_file_unref(struct fs *fs, struct node *n)
{
	struct spool_budget *sb = &fs->spool;
	struct file_state *f = n->file;
	if (!f || f->handles > 0 || f->pins > 0)
		return;
	if (f->retained) {
		/* The cached copy of a name that is gone would hold its
		 * spool's disk space until the cache's budget pushed it out. */
		if (f->unlinked)
			drop_spool(fs, n);
		return;
	}
	if (f->dirty && !f->unlinked)
		return; /* pending upload: kept until it lands */
	if (f->unlinked || !n->parent || f->present.n == 0 ||
	    f->size > FS_RETAINED_MAX_FILE_BYTES ||
	    file_state_live() > sb->fd_budget) {
		drop_spool(fs, n);
		return;
	}
	f->owner = n;
	f->retained = true;
	f->lru_prev = NULL;
	f->lru_next = sb->kept_head;
	if (sb->kept_head)
		sb->kept_head->lru_prev = f;
	sb->kept_head = f;
	if (!sb->kept_tail)
		sb->kept_tail = f;
	sb->kept_count++;
	sb->kept_bytes += f->size;
	while (sb->kept_tail && sb->kept_tail != f &&
	       (sb->kept_count > FS_RETAINED_MAX_FILES ||
		file_state_live() > sb->fd_budget ||
		sb->kept_bytes > FS_RETAINED_MAX_BYTES))
		drop_oldest_kept(fs);
}

struct file_state *spool_new(struct fs *fs, off_t size, mode_t mode,
			     bool remote_exists)
{
	for (int tries = 0;; tries++) {
		struct file_state *f = file_state_new(fs->cfg.spool_dir, size,
						      mode, remote_exists);
		int e = errno;
		if (f || tries > 0 || !spool_full_error(-e) || e == ENOSPC)
			return f;
		/* Out of descriptors: the read cache holds many. */
		if (drop_kept(fs) == 0) {
			errno = e;
			return NULL;
		}
	}
}

/* ---- giving back ---- */

bool spool_full_error(int64_t err)
{
	return err == -ENOSPC || err == -EMFILE || err == -ENFILE;
}

/* The clean open spools, pinned: their nodes' inodes in *inos. How many
 * (fewer when memory ran short). Table lock held. */
static size_t pin_clean_open(struct fs *fs, uint64_t **inos,
			     struct file_state ***files)
{
	size_t n = 0, cap = 0;
	*inos = NULL;
	*files = NULL;
	for (size_t i = 0; i < fs->t.nbuckets; i++) {
		for (struct node *nd = fs->t.by_ino[i]; nd; nd = nd->ino_next) {
			struct file_state *f = nd->file;
			if (!f || f->handles == 0 || f->dirty)
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 16;
				uint64_t *vi = realloc(*inos, cap * sizeof *vi);
				if (vi)
					*inos = vi;
				struct file_state **vf = realloc(*files, cap * sizeof *vf);
				if (vf)
					*files = vf;
				if (!vi || !vf)
					return n;
			}
			f->pins++;
			(*inos)[n] = nd->ino;
			(*files)[n++] = f;
		}
	}
	return n;
}

struct file_state *fs_pin_file(struct fs *fs, struct node *n)
{
	struct file_state *f = n->file;
	if (f)
		f->pins++;
	(void)fs;
	return f;
}

void fs_unpin_file(struct fs *fs, uint64_t ino)
{
	table_lock(fs);
	struct node *n = node_by_ino(&fs->t, ino);
	if (n && n->file) {
		n->file->pins--;
		fs_file_unref(fs, n);
	}
	table_unlock(fs);
}

/* Every clean open spool gives back what reads fetched into it; held's
 * lock is the caller's, and with it held the others' are only tried.
 * How many gave something back or newly fetch a window at a time. No
 * table lock held. */
static size_t give_back_fetched(struct fs *fs, struct file_state *held)
{
	uint64_t *inos;
	struct file_state **files;
	table_lock(fs);
	size_t n = pin_clean_open(fs, &inos, &files);
	table_unlock(fs);
	size_t changed = 0;
	for (size_t i = 0; i < n; i++) {
		struct file_state *f = files[i];
		bool locked = true;
		if (held && f != held)
			locked = file_trylock(f);
		else if (!held)
			file_lock(f);
		if (locked) {
			bool was_tight = f->spool_tight;
			if (file_state_drop_fetched(f) == 0 || !was_tight)
				changed++;
			if (f != held)
				file_unlock(f);
		}
		fs_unpin_file(fs, inos[i]);
	}
	free(inos);
	free(files);
	return changed;
}

bool spool_give_back(struct fs *fs, int err, struct file_state *held)
{
	size_t changed = 0;
	if (fs->spool.give_back_queued)
		changed += fs->spool.give_back_queued(fs);
	table_lock(fs);
	changed += drop_kept(fs);
	table_unlock(fs);
	if (err == -ENOSPC)
		changed += give_back_fetched(fs, held);
	if (changed > 0)
		atomic_fetch_add(&fs->spool.given, 1);
	return changed > 0;
}

int64_t spool_try_again(struct fs *fs, struct file_state *held,
			int64_t (*attempt)(void *arg), void *arg)
{
	uint64_t seen = atomic_load(&fs->spool.given);
	int64_t r = attempt(arg);
	if (!spool_full_error(r))
		return r;
	if (!held)
		fs_mutex_lock(&fs->spool.full, FS_LOCK_SPOOL_FULL);
	for (int tries = 0; spool_full_error(r) && tries < SPOOL_FULL_TRIES; tries++) {
		/* Another call gave back since this one's attempt (while it
		 * waited for the lock): that room is tried first; giving back
		 * now may find nothing left to give. */
		if (atomic_load(&fs->spool.given) == seen &&
		    !spool_give_back(fs, (int)r, held))
			break;
		seen = atomic_load(&fs->spool.given);
		r = attempt(arg);
	}
	if (!held)
		fs_mutex_unlock(&fs->spool.full, FS_LOCK_SPOOL_FULL);
	return r;
}
