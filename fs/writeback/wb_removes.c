#include "wb_removes.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/timespec.h"
#include "fs/core/fs_internal.h"
#include "wb_removes_queue.h"

/* One backend call at most this many entries / path bytes: the shell
 * fallback then runs one guest command per call. */
#define WBR_BATCH 2048
#define WBR_BATCH_BYTES (80 * 1024)
/* Failures kept for `sbfs status` (the count goes on). */
#define WBR_FAILURES_KEPT 64

struct failure {
	char *path;
	const char *what;           /* "mkdir", "remove" */
	int err;
	bool reported;
};

struct wb_removes {
	struct fs *fs;
	/* In the lock order (fs/core/lock_order.h) after the file locks: the
	 * drain lock, then this lock, then the table lock. */
	pthread_mutex_t lock;       /* q, failures, counters, stop */
	pthread_mutex_t drain_lock; /* one drain at a time, held across its calls */
	pthread_cond_t work;        /* CLOCK_MONOTONIC */
	struct rmq q;
	atomic_size_t outstanding;  /* queued + being removed: the fast path */
	struct timespec last_push;
	bool stop;
	pthread_t th;
	bool th_started;
	struct sb_call_hooks hooks;
	struct failure fail[WBR_FAILURES_KEPT];
	size_t nfail;               /* kept, oldest first */
	size_t unreported;
	uint64_t removed, made, failed;
	uint64_t pushed, taken;     /* entries ever queued / taken to land */
};

/* ---- failures ---- */

/* The parent's cached listing and attributes go (table only: this may run
 * inside a request the kernel holds the directory's lock for), so the next
 * lookup or readdir asks the sandbox and the kept file shows again. */
/* The mount-relative path ("/d/f") of a guest path, malloc'd; NULL when
 * it is not below the workdir. */
static char *mount_relative(const struct fs *fs, const char *guest_path)
{
	size_t wl = strlen(fs->workdir);
	while (wl > 1 && fs->workdir[wl - 1] == '/')
		wl--;
	if (strncmp(guest_path, fs->workdir, wl) != 0 ||
	    (wl > 1 && guest_path[wl] != '/' && guest_path[wl] != '\0'))
		return NULL;
	return strdup(guest_path[wl > 1 ? wl : 0] ? guest_path + (wl > 1 ? wl : 0) : "/");
}

/* The node of guest path's parent directory, or NULL. Table lock held. */
static struct node *parent_node(struct fs *fs, const char *guest_path)
{
	char *rel = mount_relative(fs, guest_path);
	if (!rel)
		return NULL;
	char *slash = strrchr(rel, '/');
	if (slash)
		*slash = '\0';
	struct node *n = fs->t.root;
	char *save = NULL;
	for (char *c = strtok_r(rel, "/", &save); c && n; c = strtok_r(NULL, "/", &save))
		n = node_child(&fs->t, n, c);
	free(rel);
	return n;
}

static void forget_parent(struct fs *fs, const char *guest_path)
{
	table_lock(fs);
	struct node *n = parent_node(fs, guest_path);
	if (n) {
		n->list_set = false;
		node_forget_attr(n);
	}
	table_unlock(fs);
}

/* The removes landed (struct node's landed), before the queue forgets
 * them: a listing of their parents is either still filtered or sees the
 * count move. */
static void note_landed(struct fs *fs, const struct rmq_entry *e, size_t k)
{
	table_lock(fs);
	for (size_t i = 0; i < k; i++) {
		struct node *p = parent_node(fs, e[i].path);
		if (p)
			p->landed++;
	}
	table_unlock(fs);
}

static void record_failure(struct wb_removes *r, const struct rmq_entry *e,
			   int err)
{
	const char *path = e->path;
	const char *what = e->make ? "mkdir" : "remove";
	if (e->make)
		sb_warn("write-back: queued mkdir of %s failed in the sandbox: %s "
			"(what was written below it stays here; its uploads fail "
			"and are reported)", path, strerror(-err));
	else
		sb_warn("write-back: queued %s of %s failed in the sandbox: %s (the "
			"sandbox keeps it; it shows in the mount again)",
			e->is_dir ? "rmdir" : "unlink", path, strerror(-err));
	if (!e->make)
		forget_parent(r->fs, path);
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	if (r->nfail == WBR_FAILURES_KEPT) {
		if (!r->fail[0].reported)
			r->unreported--;
		free(r->fail[0].path);
		memmove(r->fail, r->fail + 1, (WBR_FAILURES_KEPT - 1) * sizeof *r->fail);
		r->nfail--;
	}
	char *rel = mount_relative(r->fs, path);
	r->fail[r->nfail++] = (struct failure){
		.path = rel ? rel : strdup(path), .what = what, .err = err,
	};
	r->unreported++;
	r->failed++;
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
}

/* ---- drain ---- */

static void land(struct wb_removes *r, struct rmq_entry *e, size_t k)
{
	struct sb_ns_change *v = calloc(k, sizeof *v);
	if (v) {
		for (size_t i = 0; i < k; i++)
			v[i] = (struct sb_ns_change){.path = e[i].path, .is_dir = e[i].is_dir,
						     .make = e[i].make, .mode = e[i].mode};
		sb_ns_many(r->fs->b, v, k);
	}
	size_t removed = 0, made = 0;
	for (size_t i = 0; i < k; i++) {
		int rc = v ? v[i].rc : -ENOMEM;
		/* Already gone, or there (a command did it too): what was
		 * asked. */
		if (rc == 0 || rc == (e[i].make ? -EEXIST : -ENOENT))
			*(e[i].make ? &made : &removed) += 1;
		else
			record_failure(r, &e[i], rc);
	}
	free(v);
	note_landed(r->fs, e, k);
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	r->removed += removed;
	r->made += made;
	rmq_done(&r->q, e, k);
	atomic_fetch_sub(&r->outstanding, k);
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
}

/* Lands what was queued when it was called, no more: removes queued
 * meanwhile (an rm -rf going on) wait for the next batch rather than
 * making this one a stream of small calls. */
void wbr_drain(struct wb_removes *r)
{
	if (!r || atomic_load(&r->outstanding) == 0)
		return;
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	uint64_t target = r->pushed;
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	fs_mutex_lock(&r->drain_lock, FS_LOCK_RM_DRAIN);
	for (;;) {
		struct rmq_entry *e = NULL;
		size_t k = 0;
		fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
		if (r->taken < target) {
			uint64_t want = target - r->taken;
			k = rmq_take(&r->q, want < WBR_BATCH ? (size_t)want : WBR_BATCH,
				     WBR_BATCH_BYTES, &e);
			r->taken += k;
		}
		fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
		if (k == 0)
			break;
		land(r, e, k);
	}
	fs_mutex_unlock(&r->drain_lock, FS_LOCK_RM_DRAIN);
}

/* ---- hooks (struct sb_call_hooks) ---- */

/* The queue lands before a call that could conflict with or observe it
 * (rmq_call_waits); calls on other names go ahead of it. */
static void hook_before(void *arg, enum sb_call kind, const char *path,
			const char *to)
{
	struct wb_removes *r = arg;
	if (atomic_load(&r->outstanding) == 0)
		return;
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	bool waits = rmq_call_waits(&r->q, kind, path, to);
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	if (waits)
		wbr_drain(r);
}

static bool hook_drain(void *arg)
{
	struct wb_removes *r = arg;
	if (atomic_load(&r->outstanding) == 0)
		return false;
	wbr_drain(r);
	return true;
}

static bool hook_gone(void *arg, const char *path)
{
	struct wb_removes *r = arg;
	if (atomic_load(&r->outstanding) == 0)
		return false;
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	bool gone = rmq_gone(&r->q, path);
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	return gone;
}

static void hook_filter(void *arg, const char *dir, struct sb_dirlist *l)
{
	struct wb_removes *r = arg;
	if (atomic_load(&r->outstanding) == 0)
		return;
	size_t k = 0;
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	for (size_t i = 0; i < l->n; i++) {
		if (rmq_gone_in(&r->q, dir, l->v[i].name)) {
			free(l->v[i].name);
			free(l->v[i].link_target);
			continue;
		}
		l->v[k++] = l->v[i];
	}
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	l->n = k;
}

/* ---- queue, background drain ---- */

bool wbr_rmdir_can_queue(const struct wbr_dir_view *d)
{
	return !d->has_children && !d->pending_upload && d->list_fresh &&
	       d->list_exec_mark != SB_EXEC_BUSY &&
	       d->list_exec_mark == d->exec_mark;
}

/* mode: a mkdir's (make), else unused. */
static int queue(struct wb_removes *r, const char *path, bool is_dir, bool make,
		 mode_t mode, struct rmq_file linked)
{
	if (!r)
		return -EAGAIN;
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	int rc = r->stop ? -EAGAIN
		 : make ? rmq_push_mkdir(&r->q, path, mode)
		 : linked.ino ? rmq_push_linked(&r->q, path, linked)
			      : rmq_push(&r->q, path, is_dir);
	if (rc == 0) {
		r->pushed++;
		atomic_fetch_add(&r->outstanding, 1);
		clock_gettime(CLOCK_MONOTONIC, &r->last_push);
		/* The drainer wakes when there is a first entry to time, or
		 * enough for a batch now; otherwise its timer finds the rest. */
		size_t p = rmq_pending(&r->q);
		if (p == 1 || p >= WBR_DRAIN_AT)
			pthread_cond_signal(&r->work);
	}
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	return rc;
}

int wbr_queue(struct wb_removes *r, const char *path, bool is_dir,
	      struct rmq_file linked)
{
	return queue(r, path, is_dir, false, 0, linked);
}

int wbr_queue_mkdir(struct wb_removes *r, const char *path, mode_t mode)
{
	return queue(r, path, true, true, mode, (struct rmq_file){0});
}

void wbr_drain_file(struct wb_removes *r, struct rmq_file file)
{
	if (!r || atomic_load(&r->outstanding) == 0)
		return;
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	bool queued = rmq_names_file(&r->q, file);
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	if (queued)
		wbr_drain(r);
}

static bool reached(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec ||
	       (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void *drainer(void *arg)
{
	struct wb_removes *r = arg;
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	while (!r->stop) {
		if (rmq_pending(&r->q) == 0) {
			pthread_cond_wait(&r->work, &r->lock);
			continue;
		}
		/* Idle for WBR_IDLE_MS since the last queued remove, or
		 * enough waiting that a batch is due anyway. */
		struct timespec due = timespec_after_ms(r->last_push, WBR_IDLE_MS);
		if (rmq_pending(&r->q) < WBR_DRAIN_AT && !reached(&due)) {
			pthread_cond_timedwait(&r->work, &r->lock, &due);
			continue;
		}
		fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
		wbr_drain(r);
		fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	}
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	return NULL;
}

/* ---- report, status ---- */

int wbr_report(struct wb_removes *r, char *msg, size_t msglen)
{
	if (!r)
		return 0;
	int first = 0;
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	for (size_t i = 0; i < r->nfail; i++) {
		struct failure *f = &r->fail[i];
		if (f->reported)
			continue;
		f->reported = true;
		if (!first)
			first = f->err;
		if (!msg || !msglen)
			continue;
		size_t used = strlen(msg);
		char one[400];
		snprintf(one, sizeof one, "%s%s of %s failed in the sandbox: %s%s",
			 used ? "; " : "", f->what, f->path ? f->path : "?",
			 strerror(-f->err), strcmp(f->what, "mkdir") == 0 ? "" : " (kept there)");
		if (used + strlen(one) + 1 < msglen)
			snprintf(msg + used, msglen - used, "%s", one);
	}
	r->unreported = 0;
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	return first;
}

void wbr_status(struct wb_removes *r, json_t *wb)
{
	if (!r || !json_is_object(wb))
		return;
	json_t *arr = json_array();
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	size_t queued = atomic_load(&r->outstanding);
	uint64_t removed = r->removed, made = r->made, failed = r->failed;
	for (size_t i = 0; i < r->nfail; i++)
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:b}",
			"path", r->fail[i].path ? r->fail[i].path : "?",
			"call", r->fail[i].what,
			"error", strerror(-r->fail[i].err),
			"reported", r->fail[i].reported));
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	json_object_set_new(wb, "removes_queued", json_integer((json_int_t)queued));
	json_object_set_new(wb, "removes_done", json_integer((json_int_t)removed));
	json_object_set_new(wb, "mkdirs_done", json_integer((json_int_t)made));
	json_object_set_new(wb, "removes_failed", json_integer((json_int_t)failed));
	json_object_set_new(wb, "failed_removes", arr);
}

/* ---- lifecycle ---- */

struct wb_removes *wbr_start(struct fs *fs)
{
	struct wb_removes *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->fs = fs;
	rmq_init(&r->q);
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->drain_lock, NULL);
	cond_init_monotonic(&r->work);
	if (pthread_create(&r->th, NULL, drainer, r) != 0) {
		wbr_stop(r);
		return NULL;
	}
	r->th_started = true;
	r->hooks = (struct sb_call_hooks){
		.before = hook_before, .drain = hook_drain, .gone = hook_gone,
		.filter = hook_filter,
		.arg = r,
	};
	fs->b->hooks = &r->hooks;
	return r;
}

void wbr_stop(struct wb_removes *r)
{
	if (!r)
		return;
	fs_mutex_lock(&r->lock, FS_LOCK_RM_QUEUE);
	r->stop = true;
	pthread_cond_signal(&r->work);
	fs_mutex_unlock(&r->lock, FS_LOCK_RM_QUEUE);
	if (r->th_started)
		pthread_join(r->th, NULL);
	wbr_drain(r);
	if (r->fs->b->hooks == &r->hooks)
		r->fs->b->hooks = NULL;
	for (size_t i = 0; i < r->nfail; i++)
		free(r->fail[i].path);
	rmq_free(&r->q);
	pthread_cond_destroy(&r->work);
	pthread_mutex_destroy(&r->drain_lock);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
