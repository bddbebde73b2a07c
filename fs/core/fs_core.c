#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "fs_internal.h"
#include "spool_budget.h"

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
	spool_budget_init(&fs->spool);
	int rc = node_table_init(&fs->t, 0755);
	fs->t.max_nodes = cfg->max_nodes;
	struct stat shown = {.st_uid = b->guest_uid, .st_gid = b->guest_gid};
	fs_map_attr(fs, &shown);
	fs->t.untold_uid = shown.st_uid;
	fs->t.untold_gid = shown.st_gid;
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
		spool_budget_destroy(&fs->spool);
	}
	free(fs->workdir);
	fs->workdir = NULL;
}
