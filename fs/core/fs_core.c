#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../util/log.h"
#include "fs_internal.h"

struct timespec fs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

struct timespec fs_cache_expiry(const struct fs *fs, double ttl, uint64_t since)
{
	if (atomic_load(&fs->watched) && !fs->cfg.timeouts_set && fs->changes == since)
		return fs_expiry(FS_WATCHED_TTL_S);
	return fs_expiry(ttl);
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
	/* An unknown link count (0) is node_set_attr's to keep. */
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

bool fs_attr_linked(const struct node *n)
{
	return !S_ISDIR(n->st.st_mode) && n->st.st_nlink > 1;
}

bool fs_node_names_file(const struct node *n, dev_t dev, ino_t ino)
{
	return !S_ISDIR(n->st.st_mode) && n->guest_ino == ino && n->guest_dev == dev;
}

static void forget_other_name(struct node *n, void *arg)
{
	const struct node *c = arg; /* the name the change went through */
	if (n != c && fs_node_names_file(n, c->guest_dev, c->guest_ino) &&
	    !(n->file && n->file->dirty))
		node_forget_attr(n);
}

void fs_other_names_changed(struct fs *fs, struct node *n)
{
	if (!fs_attr_linked(n) || !n->guest_ino)
		return;
	node_walk(fs->t.root, forget_other_name, n);
}

void fs_landed(struct node *n)
{
	n->landed++;
	if (n->parent)
		n->parent->landed++;
}

bool fs_attr_fresh(const struct fs *fs, const struct node *n,
		   const struct timespec *now)
{
	if (n->file && n->file->dirty && n->attr_set)
		return true;
	return !fs_attr_linked(n) && node_attr_fresh(&fs->t, n, now);
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
		st->st_ctim = n->file->ctime;
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
	bool mtime_set;
	int r = file_state_upload(f, fs->b, guest_path, &mtime_set);
	if (r < 0) {
		sb_warn("upload of %s failed: %s (kept locally; retried at the "
			"next sync, sbexec or unmount)", guest_path, strerror(-r));
		return r;
	}
	fs_record_upload(fs, n, f, mtime_set);
	return 0;
}

void fs_record_upload(struct fs *fs, struct node *n, struct file_state *f,
		      bool mtime_set)
{
	if (fs->upload_landed)
		fs->upload_landed(fs, f);
	/* The node shows the uploaded size before the spool stops being
	 * authoritative, so no lookup sees the old size in between. When the
	 * sandbox's copy got our mtime too, what we show stays cached;
	 * otherwise the attributes are recorded already expired and the next
	 * stat shows the sandbox's mtime from then on (an editor compares
	 * mtimes across its reads and writes). */
	table_lock(fs);
	fs_landed(n);
	struct stat st;
	fs_node_stat(n, &st);
	struct timespec exp = mtime_set ? fs_cache_expiry(fs, fs->cfg.attr_timeout, fs->changes)
					: fs_now();
	node_set_attr(&fs->t, n, &st, NULL, &exp);
	fs_other_names_changed(fs, n);
	if (mtime_set) {
		f->remote_mtime = f->mtime;
		f->identity_known = true;
		f->adoptable = false;
	}
	f->dirty = false;
	void (*recorded)(struct fs *, struct node *, struct file_state *) = fs->upload_recorded;
	table_unlock(fs);
	if (recorded)
		recorded(fs, n, f);
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

/* Makes room in the read cache: its oldest spool goes, or, while a call
 * holds it pinned, leaves the cache (the unpin decides again). */
static void drop_oldest_retained(struct fs *fs)
{
	struct file_state *old = fs->retained_tail;
	if (old->pins > 0)
		retained_unlink(fs, old);
	else
		drop_spool(fs, old->owner);
}

size_t fs_drop_read_caches_locked(struct fs *fs)
{
	size_t dropped = 0;
	for (; fs->retained_tail; dropped++)
		drop_oldest_retained(fs);
	return dropped;
}

size_t fs_drop_read_caches(struct fs *fs)
{
	table_lock(fs);
	size_t dropped = fs_drop_read_caches_locked(fs);
	table_unlock(fs);
	return dropped;
}

void fs_file_unref(struct fs *fs, struct node *n)
{
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
	    file_state_live() > fs->spool_fd_budget) {
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
	       (fs->retained_count > FS_RETAINED_MAX_FILES ||
		file_state_live() > fs->spool_fd_budget ||
		fs->retained_bytes > FS_RETAINED_MAX_BYTES))
		drop_oldest_retained(fs);
}

int fs_init(struct fs *fs, struct sb_backend *b, const struct fs_config *cfg)
{
	memset(fs, 0, sizeof *fs);
	fs->b = b;
	fs->cfg = *cfg;
	fs->workdir = strdup(b->spec.workdir ? b->spec.workdir : SB_DEFAULT_WORKDIR);
	fs->uid = cfg->owner_uid >= 0 ? (uid_t)cfg->owner_uid : getuid();
	fs->gid = cfg->owner_gid >= 0 ? (gid_t)cfg->owner_gid : getgid();
	if (!fs->workdir)
		return -ENOMEM;
	/* The other half of the descriptors is for the backend's
	 * connections and pipes, and the commands reads and sbexec run. */
	struct rlimit rl;
	fs->spool_fd_budget = SIZE_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		fs->spool_fd_budget = rl.rlim_cur / 2;
	pthread_mutex_init(&fs->spool_full, NULL);
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
		pthread_mutex_destroy(&fs->spool_full);
	}
	free(fs->workdir);
	fs->workdir = NULL;
}
