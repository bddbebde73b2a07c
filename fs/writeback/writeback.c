#include "writeback.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "util/timespec.h"
#include "fs/core/fs_internal.h"
#include "fs/core/spool_budget.h"
#include "wb_journal.h"
#include "wb_park.h"
#include "wb_removes.h"

#define WB_WORKERS 4
/* One batch: at most this many files or bytes (a bigger file goes alone).
 * Big files spread over the workers; small ones share one call. */
#define WB_BATCH_FILES 512
#define WB_BATCH_BYTES ((off_t)8 * 1024 * 1024)
/* While a batch is in flight, another worker waits for this many files
 * (or WB_BATCH_BYTES) before it starts one: a create loop then costs one
 * call per round trip, not one per file. */
#define WB_BATCH_MIN 64
/* A closed file waits this long before a worker takes it: the rename that
 * usually follows a temp file's close (git, editors) then finds it still
 * pending and costs nothing, and a create loop fills bigger batches.
 * Barriers do not wait for it. */
#define WB_HOLD_MS 30

struct wb {
	struct fs *fs;
	/* The queue lock: after the file locks, before the table lock
	 * (fs/core/lock_order.h); never held across a backend call. */
	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	uint64_t *q;        /* inodes, oldest first */
	struct timespec *qt;/* when each was queued (CLOCK_MONOTONIC) */
	size_t qn, qcap;
	off_t q_bytes;
	size_t in_flight;
	off_t in_flight_bytes;
	unsigned draining;  /* barriers waiting: start batches at once */
	bool stop;
	pthread_t th[WB_WORKERS];
	int nth;
	/* The paths rwlock: after the spool-full lock, before the file locks
	 * (fs/core/lock_order.h). */
	pthread_rwlock_t paths;
	struct wb_journal *j;
	uint64_t uploaded, failed;
	struct wb_removes *rm; /* queued removes; NULL: removes are synchronous */
};

/* ---- queue (wb->lock) ---- */

static int queue_push(struct wb *w, uint64_t ino, off_t bytes)
{
	if (w->qn == w->qcap) {
		size_t cap = w->qcap ? w->qcap * 2 : 256;
		uint64_t *v = realloc(w->q, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		w->q = v;
		struct timespec *t = realloc(w->qt, cap * sizeof *t);
		if (!t)
			return -ENOMEM;
		w->qt = t;
		w->qcap = cap;
	}
	w->qt[w->qn] = fs_now();
	w->q[w->qn++] = ino;
	w->q_bytes += bytes;
	return 0;
}

/* When the i-th queued file has waited WB_HOLD_MS. */
static struct timespec ripe_at(const struct wb *w, size_t i)
{
	return timespec_after_ms(w->qt[i], WB_HOLD_MS);
}

static bool ripe(const struct wb *w, size_t i, const struct timespec *now)
{
	if (w->stop || w->draining)
		return true;
	struct timespec t = ripe_at(w, i);
	return now->tv_sec > t.tv_sec ||
	       (now->tv_sec == t.tv_sec && now->tv_nsec >= t.tv_nsec);
}

static bool batch_ready(const struct wb *w)
{
	if (w->qn == 0)
		return false;
	struct timespec now = fs_now();
	if (!ripe(w, 0, &now))
		return false;
	return w->stop || w->draining || w->in_flight == 0 ||
	       w->qn >= WB_BATCH_MIN || w->q_bytes >= WB_BATCH_BYTES;
}

/* Waits for work; wakes by itself when the oldest file ripens. */
static void wait_work(struct wb *w)
{
	struct timespec now = fs_now();
	if (w->qn > 0 && !ripe(w, 0, &now)) {
		/* CLOCK_MONOTONIC deadline: the condvar uses that clock. */
		struct timespec t = ripe_at(w, 0);
		pthread_cond_timedwait(&w->work, &w->lock, &t);
	} else {
		pthread_cond_wait(&w->work, &w->lock);
	}
}

/* ---- commit (close) ---- */

struct journal_add {
	struct wb_journal *j;
	struct file_state *f;
	const char *rel;
};

static int64_t journal_add_attempt(void *arg)
{
	struct journal_add *a = arg;
	return wb_journal_add(a->j, a->f->fd, a->rel, &a->f->wb_copied);
}

int wb_commit(struct fs *fs, struct node *n, struct file_state *f)
{
	struct wb *w = fs->wb;
	int r = 0;
	file_lock(f);
	if (!f->dirty || f->unlinked) {
		file_unlock(f);
		return 0;
	}
	table_lock(fs);
	char *rel = node_path(n);
	bool linked = fs_attr_linked(n);
	table_unlock(fs);
	/* Part of an existing file changed: the spool does not hold the rest,
	 * and a crash would leave only the changed bytes. Uploaded now. So is
	 * a file with other names: they show the sandbox's copy, which must
	 * hold what this name wrote once it is closed. */
	bool queue = rel && file_state_complete(f) && !linked;
	if (queue && file_state_fit_spool(f) < 0)
		queue = false;
	if (queue && f->wb_seq > 0 && (f->wb_durable || !f->wb_copied)) {
		queue = f->wb_durable || wb_journal_sync(w->j, f->fd) == 0;
	} else if (queue) {
		/* A new entry; one that was a copy goes once it is made, so
		 * the journal never holds neither. */
		int64_t old = f->wb_seq;
		/* A copy needs room the caches may hold. */
		struct journal_add ja = {w->j, f, rel};
		int64_t seq = spool_try_again(fs, f, journal_add_attempt, &ja);
		if (seq < 0) {
			sb_warn("write-back: cannot journal %s (%s): uploading it now",
				rel, strerror((int)-seq));
		} else {
			f->wb_seq = seq;
			if (old > 0)
				wb_journal_remove(w->j, old);
		}
		queue = seq > 0;
	}
	f->wb_durable = queue;
	free(rel);
	if (!queue) {
		file_unlock(f);
		return fs_upload_file(fs, n, f);
	}
	off_t size = f->size;
	f->wb_journal = w->j;
	wb_park(f, 1); /* this close's handle is the last */
	file_unlock(f);

	table_lock(fs);
	bool push = !f->wb_queued;
	if (push) {
		f->wb_queued = true;
		f->pins++; /* the queue's reference */
	}
	uint64_t ino = n->ino;
	table_unlock(fs);
	if (push) {
		fs_mutex_lock(&w->lock, FS_LOCK_WB_QUEUE);
		r = queue_push(w, ino, size);
		pthread_cond_signal(&w->work);
		fs_mutex_unlock(&w->lock, FS_LOCK_WB_QUEUE);
		if (r < 0) {
			table_lock(fs);
			f->wb_queued = false;
			f->pins--;
			table_unlock(fs);
			return fs_upload_file(fs, n, f);
		}
	}
	return 0;
}

/* ---- workers ---- */

struct item {
	uint64_t ino;
	struct node *n;
	struct file_state *f;
	bool locked;
	char *path;
	off_t size;
};

static void upload_batch(struct wb *w, struct item *v, size_t k)
{
	struct fs *fs = w->fs;
	struct sb_upload *up = calloc(k, sizeof *up);
	struct item **which = calloc(k, sizeof *which);
	size_t m = 0;
	fs_rwlock_rdlock(&w->paths, FS_LOCK_PATHS);
	for (size_t i = 0; i < k; i++) {
		struct item *it = &v[i];
		table_lock(fs);
		it->n = node_by_ino(&fs->t, it->ino);
		it->f = it->n ? it->n->file : NULL;
		table_unlock(fs);
		if (!it->f)
			continue;
		/* The first lock may wait; the others are tried, so a worker
		 * holding several never waits on a rename holding two. */
		if (i == 0)
			file_lock(it->f);
		else if (!file_trylock(it->f))
			continue; /* requeued below */
		/* Its spool could not be opened again: out of descriptors,
		 * the next batch takes it, as one not locked; otherwise its
		 * upload fails and waits for the next barrier. */
		int e = it->f->fd < 0 && it->f->dirty && !it->f->unlinked
				? wb_unpark(it->f) : 0;
		if (e == -EMFILE || e == -ENFILE) {
			file_unlock(it->f);
			continue;
		}
		it->locked = true;
		if (!it->f->dirty || it->f->unlinked)
			continue;
		int err = 0;
		table_lock(fs);
		it->path = fs_node_guest_path(fs, it->n, &err);
		table_unlock(fs);
		if (!it->path)
			continue;
		if (!up || !which || !file_state_complete(it->f)) {
			fs_upload_locked(fs, it->n, it->f, it->path);
			continue;
		}
		if (file_state_upload_prepare(it->f, fs->b, it->path) < 0)
			continue;
		up[m] = (struct sb_upload){
			.path = it->path, .fd = it->f->fd, .size = it->f->size,
			.mode = it->f->mode, .mtime = it->f->mtime,
		};
		which[m++] = it;
	}
	if (m > 0)
		sb_write_files(fs->b, up, m);
	size_t ok = 0, bad = 0;
	for (size_t i = 0; i < m; i++) {
		struct file_state *f = which[i]->f;
		int rc = up[i].rc;
		file_state_upload_done(f, &up[i], rc);
		if (rc == 0)
			rc = file_state_upload_times(f, fs->b, up[i].path, up[i].mtime_set);
		if (rc == 0) {
			fs_record_upload(fs, which[i]->n, f, up[i].mtime_set);
			ok++;
		} else {
			sb_warn("upload of %s failed: %s (kept locally; retried at "
				"the next sync, sbexec, fsync or unmount)",
				up[i].path, strerror(-rc));
			bad++;
		}
	}
	for (size_t i = 0; i < k; i++) {
		if (v[i].locked)
			file_unlock(v[i].f);
		free(v[i].path);
	}
	fs_rwlock_unlock(&w->paths, FS_LOCK_PATHS);
	free(up);
	free(which);

	/* The queue's references go; a file written again since (or not
	 * locked this time) goes back in the queue. */
	fs_mutex_lock(&w->lock, FS_LOCK_WB_QUEUE);
	table_lock(fs);
	for (size_t i = 0; i < k; i++) {
		struct node *n = node_by_ino(&fs->t, v[i].ino);
		struct file_state *f = n ? n->file : NULL;
		if (!f)
			continue;
		bool again = !v[i].locked && f->dirty && !f->unlinked;
		if (again && queue_push(w, v[i].ino, f->size) == 0)
			continue; /* keeps its reference */
		f->wb_queued = false;
		f->pins--;
		fs_file_unref(fs, n);
	}
	table_unlock(fs);
	w->uploaded += ok;
	w->failed += bad;
	fs_mutex_unlock(&w->lock, FS_LOCK_WB_QUEUE);
}

/* Files in one batch: each holds its spool's descriptor while the batch
 * runs (wb_park.h), so the workers together stay within the spools'
 * share of the descriptors (fs->spool.fd_budget). */
static size_t batch_files(const struct wb *w)
{
	/* Half the spools' share: open files and the read path need theirs. */
	size_t share = w->fs->spool.fd_budget / (2 * WB_WORKERS);
	return share < 1 ? 1 : share < WB_BATCH_FILES ? share : WB_BATCH_FILES;
}

static void *worker(void *arg)
{
	struct wb *w = arg;
	fs_mutex_lock(&w->lock, FS_LOCK_WB_QUEUE);
	for (;;) {
		while (!w->stop && !batch_ready(w))
			wait_work(w);
		if (w->qn == 0 && w->stop)
			break;
		/* Take the oldest files, within the batch's budget. */
		size_t k = 0, cap = batch_files(w);
		off_t bytes = 0;
		struct item *v = calloc(w->qn < cap ? w->qn : cap, sizeof *v);
		if (!v) {
			fs_mutex_unlock(&w->lock, FS_LOCK_WB_QUEUE);
			usleep(10000);
			fs_mutex_lock(&w->lock, FS_LOCK_WB_QUEUE);
			continue;
		}
		/* The oldest has ripened: the batch takes the younger ones
		 * too (a rename racing with that is still ordered, and paid). */
		table_lock(w->fs);
		while (k < w->qn && k < cap) {
			struct node *n = node_by_ino(&w->fs->t, w->q[k]);
			off_t sz = n && n->file ? n->file->size : 0;
			if (k > 0 && bytes + sz > WB_BATCH_BYTES)
				break;
			v[k].ino = w->q[k];
			bytes += sz;
			k++;
		}
		table_unlock(w->fs);
		memmove(w->q, w->q + k, (w->qn - k) * sizeof *w->q);
		memmove(w->qt, w->qt + k, (w->qn - k) * sizeof *w->qt);
		w->qn -= k;
		w->q_bytes = w->qn ? (w->q_bytes > bytes ? w->q_bytes - bytes : 0) : 0;
		w->in_flight += k;
		w->in_flight_bytes += bytes;
		if (batch_ready(w))
			pthread_cond_signal(&w->work);
		fs_mutex_unlock(&w->lock, FS_LOCK_WB_QUEUE);

		upload_batch(w, v, k);
		free(v);

		fs_mutex_lock(&w->lock, FS_LOCK_WB_QUEUE);
		w->in_flight -= k;
		w->in_flight_bytes -= bytes;
		pthread_cond_broadcast(&w->idle);
		pthread_cond_broadcast(&w->work);
	}
	fs_mutex_unlock(&w->lock, FS_LOCK_WB_QUEUE);
	return NULL;
}

/* ---- barriers, status ---- */

void wb_drain(struct fs *fs)
{
	struct wb *w = fs->wb;
	if (!w)
		return;
	wbr_drain(w->rm);
	fs_mutex_lock(&w->lock, FS_LOCK_WB_QUEUE);
	w->draining++;
	pthread_cond_broadcast(&w->work);
	while (w->qn > 0 || w->in_flight > 0)
		pthread_cond_wait(&w->idle, &w->lock);
	w->draining--;
	fs_mutex_unlock(&w->lock, FS_LOCK_WB_QUEUE);
	wbr_drain(w->rm); /* what was queued meanwhile */
}

void wb_drain_removes(struct fs *fs)
{
	if (fs->wb)
		wbr_drain(fs->wb->rm);
}

int wb_queue_remove(struct fs *fs, const char *guest_path, bool is_dir,
		    uint64_t dev, uint64_t ino)
{
	return fs->wb ? wbr_queue(fs->wb->rm, guest_path, is_dir,
				  (struct rmq_file){dev, ino})
		      : -EAGAIN;
}

int wb_queue_mkdir(struct fs *fs, const char *guest_path, mode_t mode)
{
	return fs->wb ? wbr_queue_mkdir(fs->wb->rm, guest_path, mode) : -EAGAIN;
}

void wb_drain_removes_of(struct fs *fs, uint64_t dev, uint64_t ino)
{
	if (fs->wb && ino)
		wbr_drain_file(fs->wb->rm, (struct rmq_file){dev, ino});
}

int wb_report_removes(struct fs *fs, char *msg, size_t msglen)
{
	return fs->wb ? wbr_report(fs->wb->rm, msg, msglen) : 0;
}

/* Write-back's share of the spool budget (spool_budget.h,
 * give_back_queued): the files removed while they waited, which a worker
 * would let go WB_HOLD_MS later. */
static size_t give_back_queued(struct fs *fs)
{
	struct wb *w = fs->wb;
	size_t freed = 0;
	if (w) {
		fs_mutex_lock(&w->lock, FS_LOCK_WB_QUEUE);
		table_lock(fs);
		size_t k = 0;
		for (size_t i = 0; i < w->qn; i++) {
			struct node *n = node_by_ino(&fs->t, w->q[i]);
			struct file_state *f = n ? n->file : NULL;
			if (f && f->unlinked) {
				w->q_bytes -= w->q_bytes > f->size ? f->size : w->q_bytes;
				f->wb_queued = false;
				f->pins--; /* the queue's reference */
				fs_file_unref(fs, n);
				freed++;
				continue;
			}
			w->q[k] = w->q[i];
			w->qt[k++] = w->qt[i];
		}
		w->qn = k;
		table_unlock(fs);
		pthread_cond_broadcast(&w->idle);
		fs_mutex_unlock(&w->lock, FS_LOCK_WB_QUEUE);
	}
	return freed;
}

void wb_forget(struct fs *fs, struct file_state *f)
{
	if (fs->wb && f->wb_seq > 0) {
		wb_journal_remove(fs->wb->j, f->wb_seq);
		f->wb_seq = 0;
		f->wb_durable = f->wb_copied = false;
	}
}

void wb_renamed(struct fs *fs, struct file_state *f, const char *relpath)
{
	if (fs->wb && f->wb_seq > 0 && relpath)
		wb_journal_rename(fs->wb->j, f->wb_seq, relpath);
}

void wb_paths_write_lock(struct fs *fs)
{
	if (fs->wb)
		fs_rwlock_wrlock(&fs->wb->paths, FS_LOCK_PATHS);
}

void wb_paths_read_lock(struct fs *fs)
{
	if (fs->wb)
		fs_rwlock_rdlock(&fs->wb->paths, FS_LOCK_PATHS);
}

void wb_paths_unlock(struct fs *fs)
{
	if (fs->wb)
		fs_rwlock_unlock(&fs->wb->paths, FS_LOCK_PATHS);
}

struct failed_count {
	size_t n;
	off_t bytes;
};

static void count_failed(struct node *n, void *arg)
{
	struct failed_count *c = arg;
	if (n->file && n->file->dirty && !n->file->unlinked &&
	    n->file->upload_error) {
		c->n++;
		c->bytes += n->file->size;
	}
}

void wb_status(struct fs *fs, json_t *obj)
{
	struct wb *w = fs->wb;
	if (!w)
		return;
	struct failed_count fc = {0};
	fs_mutex_lock(&w->lock, FS_LOCK_WB_QUEUE);
	size_t qn = w->qn, inf = w->in_flight;
	off_t qb = w->q_bytes, ib = w->in_flight_bytes;
	uint64_t up = w->uploaded;
	fs_mutex_unlock(&w->lock, FS_LOCK_WB_QUEUE);
	table_lock(fs);
	node_walk(fs->t.root, count_failed, &fc);
	table_unlock(fs);
	uint64_t jn, jf;
	wb_journal_counts(w->j, &jn, &jf);
	json_t *o = json_pack(
		"{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"queued", (json_int_t)qn, "queued_bytes", (json_int_t)qb,
		"in_flight", (json_int_t)inf, "in_flight_bytes", (json_int_t)ib,
		"failed", (json_int_t)fc.n, "failed_bytes", (json_int_t)fc.bytes,
		"uploaded", (json_int_t)up, "journal_entries", (json_int_t)jn,
		"journal_fsyncs", (json_int_t)jf);
	wbr_status(w->rm, o);
	json_object_set_new(obj, "writeback", o);
}

/* ---- lifecycle ---- */

int wb_start(struct fs *fs, const char *name, char *err, size_t errlen)
{
	struct wb *w = calloc(1, sizeof *w);
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	w->fs = fs;
	w->j = wb_journal_open(fs->cfg.spool_dir, name, err, errlen);
	if (!w->j) {
		free(w);
		return -1;
	}
	pthread_mutex_init(&w->lock, NULL);
	cond_init_monotonic(&w->work);
	pthread_cond_init(&w->idle, NULL);
	pthread_rwlock_init(&w->paths, NULL);
	fs->wb = w;
	fs->upload_landed = wb_forget;
	fs->spool.give_back_queued = give_back_queued;
	for (int i = 0; i < WB_WORKERS; i++)
		if (pthread_create(&w->th[w->nth], NULL, worker, w) == 0)
			w->nth++;
	if (w->nth == 0) {
		snprintf(err, errlen, "cannot start the write-back workers");
		wb_stop(fs, false);
		return -1;
	}
	w->rm = wbr_start(fs);
	if (!w->rm)
		sb_warn("write-back: cannot start the remove queue: removes go to the sandbox one by one");
	return 0;
}

/* At the stop no call runs, and what never landed was saved from the
 * journal: a parked file stays without a descriptor. */
static void forget_journal(struct node *n, void *arg)
{
	(void)arg;
	if (n->file)
		n->file->wb_journal = NULL;
}

void wb_stop(struct fs *fs, bool keep)
{
	struct wb *w = fs->wb;
	if (!w)
		return;
	fs_mutex_lock(&w->lock, FS_LOCK_WB_QUEUE);
	w->stop = true;
	pthread_cond_broadcast(&w->work);
	fs_mutex_unlock(&w->lock, FS_LOCK_WB_QUEUE);
	for (int i = 0; i < w->nth; i++)
		pthread_join(w->th[i], NULL);
	/* After the workers: their uploads drain it through the hooks. */
	wbr_stop(w->rm);
	w->rm = NULL;
	/* No file may open an entry of the journal once it is gone. */
	table_lock(fs);
	node_walk(fs->t.root, forget_journal, NULL);
	table_unlock(fs);
	wb_journal_close(w->j, keep);
	fs->wb = NULL;
	fs->upload_landed = NULL;
	pthread_rwlock_destroy(&w->paths);
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->idle);
	pthread_mutex_destroy(&w->lock);
	free(w->q);
	free(w->qt);
	free(w);
}
