#include "file_state.h"
#include "spool_io.h"
#include "util/fd_copy.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_size_t live_spools;

size_t file_state_live(void)
{
	return atomic_load(&live_spools);
}

struct file_state *file_state_new(const char *spool_dir, off_t size,
				  mode_t mode, bool remote_exists)
{
	struct file_state *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->fd = spool_io()->open(spool_dir);
	if (f->fd < 0) {
		int e = errno;
		free(f);
		errno = e;
		return NULL;
	}
	atomic_fetch_add(&live_spools, 1);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->fetched, NULL);
	f->size = size;
	f->mode = mode & 07777;
	f->remote_exists = remote_exists;
	f->window = READ_WINDOW_MIN;
	f->window_cap = READ_WINDOW_MAX;
	f->link = READ_LINK_INIT;
	f->seq_next = -1;
	f->identity_known = remote_exists;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	f->ctime = f->mtime;
	return f;
}

void file_state_free(struct file_state *f)
{
	if (!f)
		return;
	/* Read-ahead still under way stops at its next chunk. */
	pthread_mutex_lock(&f->lock);
	atomic_fetch_add(&f->content_gen, 1);
	while (f->n_inflight > 0)
		pthread_cond_wait(&f->fetched, &f->lock);
	pthread_mutex_unlock(&f->lock);
	pthread_cond_destroy(&f->fetched);
	if (f->fd >= 0) /* -1: parked, its journal entry held it */
		spool_io()->close(f->fd);
	atomic_fetch_sub(&live_spools, 1);
	range_set_free(&f->present);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

bool file_state_cloneable(const struct file_state *f)
{
	return !f->dirty && !f->unlinked && f->remote_exists && f->identity_known &&
	       !atomic_load(&f->invalidated) && !f->reported_while_open &&
	       f->n_inflight == 0 &&
	       range_set_covers(&f->present, 0, f->size);
}

struct file_state *file_state_clone(const struct file_state *f,
				    const char *spool_dir)
{
	struct file_state *c = file_state_new(spool_dir, f->size, f->mode, true);
	if (!c)
		return NULL;
	int r = sb_fd_copy(c->fd, f->fd, f->size);
	if (r == 0 && f->size > 0)
		r = range_set_add(&c->present, 0, f->size);
	if (r < 0) {
		file_state_free(c);
		errno = -r;
		return NULL;
	}
	c->mtime = f->mtime;
	c->ctime = f->ctime;
	c->remote_mtime = f->remote_mtime;
	memcpy(c->ident, f->ident, sizeof c->ident);
	return c;
}

/* The content changed here: the mtime a utimens asked before no longer
 * holds (its atime does). */
static void changed_here(struct file_state *f)
{
	f->dirty = f->written = true;
	f->wb_durable = false;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	f->ctime = f->mtime;
	if (f->times_wanted_set) {
		f->times_wanted[1].tv_nsec = UTIME_OMIT;
		f->times_wanted_set = f->times_wanted[0].tv_nsec != UTIME_OMIT;
	}
}

static int pwrite_all(int fd, const char *buf, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t n = spool_io()->pwrite(fd, buf, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* ---- fetching ----
 * A fetch streams one range from the sandbox into the spool without
 * f->lock. Its range is registered in f->inflight first: planning treats it
 * as covered (nothing else fetches it) and local writes to it wait for it,
 * so its bytes never overwrite newer ones. It becomes present only if the
 * identity the guest reported is the spool's and no drop came meanwhile. */

/* Times a reader starts over after the sandbox's copy changed under it
 * before giving up with EIO. */
#define CHANGE_RETRIES 4

struct fetch {
	struct file_state *f;
	struct sb_backend *b;
	char *path;
	struct range r;
	uint64_t gen;
	struct timespec started;
	char expect[SB_IDENT_MAX]; /* f->ident when it started */
	char ident[SB_IDENT_MAX];  /* what the guest reported */
	off_t ident_size;
	size_t got;
	int result;
	/* Under f->lock: whether it ended, and fetch_end's outcome then;
	 * refs: its thread, and the reader waiting on it if it is one's own
	 * (the last one frees it). */
	bool ended;
	int outcome;
	int refs;
};

static int fetch_ident(void *arg, const char *ident, off_t size)
{
	struct fetch *fe = arg;
	if (atomic_load(&fe->f->content_gen) != fe->gen)
		return -ECANCELED;
	snprintf(fe->ident, sizeof fe->ident, "%s", ident);
	fe->ident_size = size;
	/* Another version than the spool's: nothing of it is wanted here. */
	if (fe->expect[0] && strcmp(fe->expect, fe->ident) != 0)
		return -ESTALE;
	return 0;
}

static int fetch_data(void *arg, off_t off, const char *d, size_t n)
{
	struct fetch *fe = arg;
	if (atomic_load(&fe->f->content_gen) != fe->gen)
		return -ECANCELED;
	return pwrite_all(fe->f->fd, d, n, off);
}

/* f->lock held. Whether what fe brought is of the spool's version (if
 * not, fetch_end adopts fe's). */
static bool of_spools_version(const struct file_state *f,
			      const struct fetch *fe)
{
	return f->ident[0] ? strcmp(f->ident, fe->ident) == 0
			   : f->dirty || fe->ident_size == f->size;
}

/* The bytes before end are of fe's version: present at once, for the
 * readers waiting on them, if that is the spool's (a window need not have
 * come whole before its first part is read). */
static int fetch_checked(void *arg, off_t end)
{
	struct fetch *fe = arg;
	struct file_state *f = fe->f;
	int r = 0;
	pthread_mutex_lock(&f->lock);
	if (atomic_load(&f->content_gen) != fe->gen) {
		r = -ECANCELED;
	} else if (of_spools_version(f, fe)) {
		if (!f->ident[0])
			memcpy(f->ident, fe->ident, sizeof f->ident);
		/* a retry of this read (dispatch.c) must bring this version
		 * or nothing: its bytes would land on these */
		memcpy(fe->expect, fe->ident, sizeof fe->expect);
		if (end > f->size)
			end = f->size;
		if (end > fe->r.start &&
		    (r = range_set_add(&f->present, fe->r.start, end)) == 0)
			pthread_cond_broadcast(&f->fetched);
	}
	pthread_mutex_unlock(&f->lock);
	return r;
}

/* f->lock held. Registers r as in flight; NULL when out of memory. */
static struct fetch *fetch_begin(struct file_state *f, struct sb_backend *b,
				 const char *path, struct range r)
{
	struct fetch *fe = calloc(1, sizeof *fe);
	if (!fe || !(fe->path = strdup(path))) {
		free(fe);
		return NULL;
	}
	fe->f = f;
	fe->b = b;
	fe->r = r;
	fe->gen = atomic_load(&f->content_gen);
	fe->refs = 1;
	clock_gettime(CLOCK_MONOTONIC, &fe->started);
	memcpy(fe->expect, f->ident, sizeof fe->expect);
	f->inflight[f->n_inflight++] = r;
	return fe;
}

static void fetch_free(struct fetch *fe)
{
	free(fe->path);
	free(fe);
}

/* Without f->lock. */
static void fetch_run(struct fetch *fe)
{
	struct sb_read_sink sink = {
		.ident = fetch_ident, .data = fetch_data, .checked = fetch_checked,
		.arg = fe};
	fe->result = sb_read_stream(fe->b, fe->path, fe->r.start,
				    (size_t)(fe->r.end - fe->r.start), &sink,
				    &fe->got);
	/* The file changed while dd read it: the same as a change seen
	 * between windows. */
	if (fe->result == -EAGAIN)
		fe->result = -ESTALE;
}

/* The fetched bytes go: the sandbox's copy is not the one they were of. */
static void drop_content(struct file_state *f)
{
	atomic_fetch_add(&f->content_gen, 1);
	range_set_clear(&f->present);
	f->ident[0] = '\0';
	f->seq_next = -1;
	f->window = READ_WINDOW_MIN;
}

/* f->lock held. The sandbox's copy is now the one named by fe's identity:
 * a clean spool starts over with it; a dirty one holds local writes on top
 * of the old copy, which must not be completed from the new one. */
static int adopt_version(struct file_state *f, const struct fetch *fe)
{
	if (f->dirty) {
		sb_warn("%s changed in the sandbox while it had unsaved changes "
			"here; not mixing the two versions", fe->path);
		return -EIO;
	}
	drop_content(f);
	memcpy(f->ident, fe->ident, sizeof f->ident);
	f->size = fe->ident_size;
	/* The node's attributes are old: the next the sandbox reports with
	 * this size name this content. */
	f->identity_known = false;
	f->adoptable = true;
	f->remote_changed = true;
	return 0;
}

/* f->lock held. Unregisters the fetch and records its outcome: 0, -ESTALE
 * (the sandbox's copy changed; the spool now follows the new one), or
 * -errno. */
static int fetch_end(struct file_state *f, struct fetch *fe)
{
	for (size_t i = 0; i < f->n_inflight; i++) {
		if (f->inflight[i].start == fe->r.start &&
		    f->inflight[i].end == fe->r.end) {
			f->inflight[i] = f->inflight[--f->n_inflight];
			break;
		}
	}
	pthread_cond_broadcast(&f->fetched);
	int r = fe->result;
	if (r == 0) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (long)(now.tv_sec - fe->started.tv_sec) * 1000 +
			  (now.tv_nsec - fe->started.tv_nsec) / 1000000;
		f->window_cap = read_window_cap_after(&f->link, f->window_cap,
						      fe->got, ms);
	}
	if (atomic_load(&f->content_gen) != fe->gen)
		return r == -ECANCELED || r == -ESTALE ? -ESTALE : r < 0 ? r : -ESTALE;
	if (r == -ESTALE) {
		/* Stopped at the identity line, or dd saw a change: a
		 * version other than the spool's has nothing in it yet. */
		if (fe->ident[0] && strcmp(fe->ident, f->ident) != 0) {
			int e = adopt_version(f, fe);
			if (e < 0)
				return e;
		}
		return -ESTALE;
	}
	if (r < 0)
		return r;
	bool changed = !of_spools_version(f, fe);
	if (changed) {
		if ((r = adopt_version(f, fe)) < 0)
			return r;
		/* What this fetch brought is of the adopted version. */
		r = -ESTALE;
	} else if (!f->ident[0]) {
		memcpy(f->ident, fe->ident, sizeof f->ident);
	}
	/* Past the sandbox's end of file the range reads as zeroes (the
	 * spool is sparse): present too. */
	off_t end = changed ? fe->r.start + (off_t)fe->got : fe->r.end;
	if (end > f->size)
		end = f->size;
	if (end > fe->r.start) {
		int e = range_set_add(&f->present, fe->r.start, end);
		if (e < 0)
			return e;
	}
	return r;
}

static void *fetch_thread(void *arg)
{
	struct fetch *fe = arg;
	struct file_state *f = fe->f;
	fetch_run(fe);
	pthread_mutex_lock(&f->lock);
	fe->outcome = fetch_end(f, fe);
	fe->ended = true;
	bool last = --fe->refs == 0;
	pthread_mutex_unlock(&f->lock);
	if (last)
		fetch_free(fe);
	return NULL;
}

/* Runs fe on a thread of its own; false when none could start. */
static bool fetch_spawn(struct fetch *fe)
{
	pthread_attr_t attr;
	pthread_t th;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	bool ok = pthread_create(&th, &attr, fetch_thread, fe) == 0;
	pthread_attr_destroy(&attr);
	return ok;
}

/* f->lock held. Read-ahead: its failures are left to the reader that
 * needs the range. */
static void fetch_async(struct file_state *f, struct sb_backend *b,
			const char *path, struct range r)
{
	struct fetch *fe = fetch_begin(f, b, path, r);
	if (fe && !fetch_spawn(fe)) {
		fe->result = -EAGAIN;
		(void)fetch_end(f, fe);
		fetch_free(fe);
	}
}

/* f->lock held; dropped while waiting. Fetches r for a reader that needs
 * [off, end) of it: returns 0 once that part is present, the rest still
 * coming (its segments are checked one by one), or fetch_end's outcome if
 * the fetch ended without bringing it. */
static int fetch_for_reader(struct file_state *f, struct sb_backend *b,
			    const char *path, struct range r, off_t off,
			    off_t end)
{
	struct fetch *fe = fetch_begin(f, b, path, r);
	if (!fe)
		return -ENOMEM;
	fe->refs = 2;
	if (!fetch_spawn(fe)) {
		/* no thread to spare: the reader runs it, and finds it ended */
		pthread_mutex_unlock(&f->lock);
		fetch_thread(fe);
		pthread_mutex_lock(&f->lock);
	}
	bool have;
	while (!(have = range_set_covers(&f->present, off, end < f->size ? end : f->size)) &&
	       !fe->ended)
		pthread_cond_wait(&f->fetched, &f->lock);
	int rc = have ? 0 : fe->outcome;
	if (--fe->refs == 0)
		fetch_free(fe);
	return rc;
}

static bool overlaps_inflight(const struct file_state *f, off_t start,
			      off_t end)
{
	for (size_t i = 0; i < f->n_inflight; i++)
		if (f->inflight[i].start < end && start < f->inflight[i].end)
			return true;
	return false;
}

/* f->lock held. Waits until no fetch writes into [start, end). */
static void wait_fetches(struct file_state *f, off_t start, off_t end)
{
	while (overlaps_inflight(f, start, end))
		pthread_cond_wait(&f->fetched, &f->lock);
}

/* f->lock held. Makes [off, *end) present, fetching what is missing (*end
 * is clipped when the file turns out shorter); ahead: read-ahead windows
 * to start past it. */
static int make_present(struct file_state *f, struct sb_backend *b,
			const char *path, off_t off, off_t *end,
			unsigned ahead, size_t window, size_t *next_window)
{
	unsigned changes = 0;
	for (;;) {
		if (*end > f->size)
			*end = f->size;
		if (off >= *end)
			return 0;
		bool covered = range_set_covers(&f->present, off, *end);
		size_t slots = READ_INFLIGHT_MAX - f->n_inflight;
		if (f->spool_tight) /* one window at a time (spool_tight) */
			slots = f->n_inflight ? 0 : 1;
		if (covered && (ahead == 0 || slots == 0))
			return 0;
		struct range plan[READ_INFLIGHT_MAX];
		struct read_plan_in in = {
			.present = &f->present,
			.inflight = f->inflight,
			.n_inflight = f->n_inflight,
			.off = covered ? *end : off,
			.end = *end,
			.size = f->size,
			.window = window,
			.max_window = f->window_cap,
			.ahead = ahead < slots ? ahead : (unsigned)slots,
		};
		size_t n = slots ? read_plan(&in, plan, slots, next_window) : 0;
		bool need_first = !covered && n > 0 && plan[0].start < *end;
		for (size_t i = need_first ? 1 : 0; i < n; i++)
			fetch_async(f, b, path, plan[i]);
		if (covered)
			return 0;
		ahead = 0; /* started now, if there was room */
		window = *next_window;
		if (!need_first) {
			/* What is missing is being fetched already. */
			pthread_cond_wait(&f->fetched, &f->lock);
			continue;
		}
		int r = fetch_for_reader(f, b, path, plan[0], off, *end);
		if (r == -ESTALE) {
			if (++changes > CHANGE_RETRIES) {
				if (!f->warned_changing)
					sb_warn("%s keeps changing in the sandbox "
						"while being read: reads of it fail "
						"with EIO until it holds still", path);
				f->warned_changing = true;
				return -EIO;
			}
			continue;
		}
		if (r < 0)
			return r;
	}
}

/* Sequential: at or just around where the last read ended (the kernel's
 * read-ahead sends neighbouring requests concurrently). */
static bool is_sequential(const struct file_state *f, off_t off)
{
	if (f->seq_next < 0)
		return false;
	off_t slack = (off_t)f->window;
	return off >= f->seq_next - slack && off <= f->seq_next + slack;
}

/* A window that fits in half the spool disk's room (at least the
 * smallest): its other half is for whatever else is written meanwhile. */
static size_t tight_window(const struct file_state *f, size_t w)
{
	int64_t room = spool_io()->room(f->fd);
	if (room < 0)
		return READ_WINDOW_MIN;
	uint64_t half = (uint64_t)room / 2;
	if (half < w)
		w = (size_t)half;
	return w < READ_WINDOW_MIN ? READ_WINDOW_MIN : w;
}

ssize_t file_state_read(struct file_state *f, struct sb_backend *b,
			const char *guest_path, char *buf, size_t len,
			off_t off)
{
	if (off >= f->size)
		return 0;
	if ((off_t)len > f->size - off)
		len = (size_t)(f->size - off);
	off_t end = off + (off_t)len;
	bool seq = is_sequential(f, off);
	bool covered = range_set_covers(&f->present, off, end);
	if (!covered || seq) {
		size_t w = seq ? f->window : READ_WINDOW_MIN;
		unsigned ahead = seq ? READ_INFLIGHT_MAX - 1 : 0;
		if (f->spool_tight) {
			ahead = 0;
			w = tight_window(f, w);
		}
		int r = make_present(f, b, guest_path, off, &end, ahead, w,
				     &f->window);
		if (r < 0)
			return r;
		if (off >= end)
			return 0;
		len = (size_t)(end - off);
	}
	if (!seq || end > f->seq_next)
		f->seq_next = end;
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(f->fd, buf + done, len - done, off + (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) {
			/* The spool is sparse up to size: beyond its end reads
			 * as zeroes. */
			memset(buf + done, 0, len - done);
			done = len;
			break;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int file_state_hold_whole(struct file_state *f, struct sb_backend *b,
			  const char *guest_path, off_t keep)
{
	if (f->dirty || !f->remote_exists || f->unlinked || keep <= 0)
		return 0;
	off_t end = keep < f->size ? keep : f->size;
	if (end > 0 && !range_set_covers(&f->present, 0, end)) {
		size_t w;
		int r = make_present(f, b, guest_path, 0, &end, 0,
				     READ_WINDOW_MAX, &w);
		if (r < 0)
			return r;
	}
	/* Asked, not taken from the spool's record: a spool that had
	 * fetched nothing took whatever copy of the same size its first
	 * fetch met. */
	if (!f->opened_known)
		return 0;
	struct stat st;
	/* no answer is no proof of a change: the write goes into the spool,
	 * and its upload says what became of it (a name the sandbox removed
	 * fails there, and the bytes are kept) */
	if (sb_stat(b, guest_path, &st, NULL) < 0)
		return 0;
	if (st.st_size == f->opened_size &&
	    st.st_mtim.tv_sec == f->opened_mtime.tv_sec)
		return 0;
	sb_warn("%s was replaced or changed in the sandbox while open here: a "
		"write made on the copy opened before is refused (EIO), not "
		"mixed into the new one; open the file again to write it",
		guest_path);
	return -EIO;
}

void file_state_opened(struct file_state *f, const struct stat *st)
{
	/* a dirty spool is the mount's own copy, not the node's: its upload
	 * names the copy (file_state_upload_done) */
	f->opened_known = st && f->remote_exists && !f->dirty;
	if (st) {
		f->opened_size = st->st_size;
		f->opened_mtime = st->st_mtim;
	}
}

void file_state_mtime_set_here(struct file_state *f, const struct timespec *mtime)
{
	if (mtime)
		f->opened_mtime = *mtime;
	else
		f->opened_known = false;
}

ssize_t file_state_write(struct file_state *f, const char *buf, size_t len,
			 off_t off)
{
	off_t end = off + (off_t)len;
	wait_fetches(f, off, end);
	int r = pwrite_all(f->fd, buf, len, off);
	if (r < 0)
		return r;
	/* A write past the end leaves a hole that reads as zeroes: the spool
	 * has it, nothing to fetch. */
	off_t from = off > f->size ? f->size : off;
	r = range_set_add(&f->present, from, end);
	if (r < 0)
		return r;
	if (end > f->size)
		f->size = end;
	changed_here(f);
	return (ssize_t)len;
}

int file_state_drop_fetched(struct file_state *f)
{
	if (f->dirty)
		return -ENOSPC; /* local writes are in the spool only */
	f->spool_tight = true;
	wait_fetches(f, 0, INT64_MAX);
	/* Blocks, not the present ranges: a fetch that failed half way
	 * (ENOSPC) wrote bytes that never became present. */
	struct stat st;
	if (fstat(f->fd, &st) < 0 || st.st_blocks == 0)
		return -ENOSPC;
	/* to a whole block past the end: a partly covered block is only
	 * zeroed, not given back */
	off_t len = st.st_size + st.st_blksize - st.st_size % st.st_blksize;
	const struct spool_io *io = spool_io();
	if (io->punch(f->fd, 0, len) < 0 &&
	    (io->truncate(f->fd, 0) < 0 || io->truncate(f->fd, st.st_size) < 0))
		return -errno;
	range_set_clear(&f->present);
	return 0;
}

int file_state_truncate(struct file_state *f, off_t size)
{
	wait_fetches(f, size < f->size ? size : f->size, INT64_MAX);
	if (spool_io()->truncate(f->fd, size) < 0)
		return -errno;
	range_set_clip(&f->present, size);
	if (size > f->size) {
		int r = range_set_add(&f->present, f->size, size);
		if (r < 0)
			return r;
	}
	f->size = size;
	changed_here(f);
	return 0;
}

int file_state_upload_prepare(struct file_state *f, struct sb_backend *b,
			      const char *guest_path)
{
	off_t end = f->size;
	if (f->remote_exists) {
		size_t w;
		int r = make_present(f, b, guest_path, 0, &end, 0,
				     READ_WINDOW_MAX, &w);
		if (r < 0)
			return f->upload_error = r;
	}
	/* A new file the sandbox never had: its gaps are holes. */
	int r = file_state_fit_spool(f);
	return r < 0 ? (f->upload_error = r) : 0;
}

int file_state_fit_spool(struct file_state *f)
{
	struct stat st;
	if (fstat(f->fd, &st) < 0)
		return -errno;
	if (st.st_size == f->size)
		return 0;
	if (spool_io()->truncate(f->fd, f->size) < 0)
		return -errno;
	/* the truncate moved the spool's times */
	if (f->times_wanted_set && futimens(f->fd, f->times_wanted) < 0)
		return -errno;
	return 0;
}

static atomic_uint_fast64_t first_uploads;

uint64_t file_state_first_uploads(void)
{
	return atomic_load(&first_uploads);
}

void file_state_upload_done(struct file_state *f, const struct sb_upload *u, int r)
{
	if (r < 0) {
		f->upload_error = r;
		return;
	}
	if (u->mtime_set) /* what the sandbox's copy got (a whole second, say) */
		f->mtime = u->mtime;
	/* Counted before the file stops being "only here", so a listing
	 * that sees it as in the sandbox also sees the count move. */
	if (!f->remote_exists)
		atomic_fetch_add(&first_uploads, 1);
	f->remote_exists = true;
	f->ident[0] = '\0'; /* the sandbox's copy is a new one: ours */
	/* and the open handles' from now on, where its mtime is known */
	f->opened_known = u->mtime_set;
	f->opened_size = u->size;
	f->opened_mtime = u->mtime;
	/* A fetch still under way (one whose reader took its part and went
	 * on) is of the copy before: it must neither add to the spool nor,
	 * ending, take that copy for a change in the sandbox and adopt it. */
	atomic_fetch_add(&f->content_gen, 1);
	f->identity_known = false;
	f->adoptable = true;
	f->upload_error = 0;
}

bool file_state_complete(const struct file_state *f)
{
	off_t gs, ge;
	return !f->remote_exists ||
	       !range_set_first_gap(&f->present, 0, f->size, &gs, &ge);
}

int file_state_upload(struct file_state *f, struct sb_backend *b,
		      const char *guest_path, bool *mtime_set)
{
	*mtime_set = false;
	if (!f->dirty || f->unlinked)
		return 0;
	int r = file_state_upload_prepare(f, b, guest_path);
	if (r < 0)
		return r;
	struct sb_upload u = {.path = guest_path, .fd = f->fd, .size = f->size,
			      .mode = f->mode, .mtime = f->mtime};
	r = sb_write_file(b, &u);
	file_state_upload_done(f, &u, r);
	*mtime_set = r == 0 && u.mtime_set;
	return r < 0 ? r : file_state_upload_times(f, b, guest_path, *mtime_set);
}

int file_state_set_times(struct file_state *f, const struct timespec ts[2])
{
	struct timespec now, want[2] = {ts[0], ts[1]};
	clock_gettime(CLOCK_REALTIME, &now);
	for (int i = 0; i < 2; i++) {
		if (want[i].tv_nsec == UTIME_NOW)
			want[i] = now;
		if (want[i].tv_nsec == UTIME_OMIT && f->times_wanted_set)
			want[i] = f->times_wanted[i]; /* asked before, still wanted */
	}
	/* On the spool too: a journal entry is the spool, so a file saved
	 * from a killed daemon's journal keeps them. */
	if (futimens(f->fd, want) < 0)
		return -errno;
	if (want[1].tv_nsec != UTIME_OMIT)
		f->mtime = want[1];
	f->ctime = now;
	f->times_wanted[0] = want[0];
	f->times_wanted[1] = want[1];
	f->times_wanted_set = true;
	return 0;
}

int file_state_upload_times(struct file_state *f, struct sb_backend *b,
			    const char *guest_path, bool mtime_set)
{
	if (!f->times_wanted_set)
		return 0;
	struct timespec ts[2] = {f->times_wanted[0], f->times_wanted[1]};
	/* The upload gave the mtime, to the second at least (f->mtime is
	 * what the sandbox got; the shell's touch keeps whole seconds too). */
	if (mtime_set && f->mtime.tv_sec == ts[1].tv_sec)
		ts[1].tv_nsec = UTIME_OMIT;
	if (ts[0].tv_nsec != UTIME_OMIT || ts[1].tv_nsec != UTIME_OMIT) {
		int r = sb_utimens(b, guest_path, ts);
		if (r < 0)
			return f->upload_error = r;
	}
	f->times_wanted_set = false;
	return 0;
}

void file_state_revalidate(struct file_state *f, off_t size,
			   const struct timespec *mtime, bool from_sandbox)
{
	if (f->dirty)
		return;
	bool same_mtime = mtime->tv_sec == f->remote_mtime.tv_sec &&
			  mtime->tv_nsec == f->remote_mtime.tv_nsec;
	if (f->invalidated) {
		f->invalidated = false;
	} else if (!f->identity_known) {
		if (!from_sandbox)
			return; /* still what we uploaded, as far as we know */
		if (f->adoptable && size == f->size) {
			f->remote_mtime = *mtime;
			f->identity_known = true;
			return;
		}
	} else if (size == f->size && same_mtime) {
		return;
	}
	drop_content(f);
	if (spool_io()->truncate(f->fd, 0) < 0) {
		/* the ranges are what count; the bytes are rewritten */
	}
	f->size = size;
	f->remote_mtime = *mtime;
	f->identity_known = from_sandbox;
	f->adoptable = false;
}
