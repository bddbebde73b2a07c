/* The watcher inside the sandbox; see guest_watch.h and
 * guest/sbfs_guest_watch.c for what it says. */
#include "guest_watch.h"

#include "util/log.h"
#include "util/timespec.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HELPER_NAME "sbfs-guest-watch"
/* Placing, starting and watching the whole workspace; a sanitizer build
 * of the engine's side may be slow, a tree of many directories too. */
#define READY_TIMEOUT_MS 30000
/* A settle is one round trip through a running exec. */
#define SETTLE_TIMEOUT_MS 10000
/* A record is a path and a few numbers. */
#define RECORD_MAX (PATH_MAX + 512)

struct guest_watch {
	struct sb_backend *b;
	struct sb_watch_sink sink;
	char guest_path[128]; /* where the watcher was placed */
	int in[2];            /* the watcher's stdin: settle questions */
	int cancel[2];        /* a byte in [1]: kill it */
	pthread_t thread;
	/* Lock order: mu is a leaf; sink calls run without it. */
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	unsigned long long asked, answered;
	bool ready, ended, stopping, lost;
	char why[SB_REASON_MAX + 64]; /* why it ended, for the log */
	char *rec;         /* the record being read */
	size_t recn;
	bool rec_too_long;
};

/* ---- records ---- */

/* strtoull, but digits only: it would take blanks and a sign. */
static unsigned long long digits_ull(const char *p, char **end, int base)
{
	if (!isdigit((unsigned char)*p)) {
		*end = (char *)p;
		return 0;
	}
	return strtoull(p, end, base);
}

static bool take_ull(const char **p, unsigned long long *v, int base)
{
	char *end;
	errno = 0;
	*v = digits_ull(*p, &end, base);
	if (end == *p || *end != ' ' || errno)
		return false;
	*p = end + 1;
	return true;
}

int gw_parse_record(const char *rec, size_t len, struct gw_record *out)
{
	memset(out, 0, sizeof *out);
	if (len == 0 || memchr(rec, '\0', len))
		return -EPROTO;
	const char *p = rec + 2;
	switch (rec[0]) {
	case 'R':
		out->kind = GW_READY;
		return len == 1 ? 0 : -EPROTO;
	case 'O':
		out->kind = GW_OVERFLOW;
		return len == 1 ? 0 : -EPROTO;
	case 'G': case 'X':
		if (len < 2 || rec[1] != ' ')
			return -EPROTO;
		out->kind = rec[0] == 'G' ? GW_GONE : GW_FATAL;
		out->text = p;
		return 0;
	case 'S': {
		if (len < 3 || rec[1] != ' ')
			return -EPROTO;
		char *end;
		errno = 0;
		out->token = digits_ull(p, &end, 10);
		out->kind = GW_SETTLED;
		return end != rec + len || errno ? -EPROTO : 0;
	}
	case 'E': {
		if (len < 2 || rec[1] != ' ')
			return -EPROTO;
		unsigned long long v[11];
		for (int i = 0; i < 11; i++)
			if (!take_ull(&p, &v[i], i == 0 ? 8 : 10))
				return -EPROTO;
		struct stat *st = &out->st;
		st->st_mode = (mode_t)v[0];
		st->st_size = (off_t)v[1];
		st->st_mtim = (struct timespec){(time_t)v[2], (long)v[3]};
		st->st_ctim = (struct timespec){(time_t)v[4], (long)v[5]};
		st->st_atim = st->st_mtim;
		st->st_ino = (ino_t)v[6];
		st->st_nlink = (nlink_t)v[7];
		st->st_uid = (uid_t)v[8];
		st->st_gid = (gid_t)v[9];
		st->st_dev = (dev_t)v[10];
		if (v[3] >= 1000000000ull || v[5] >= 1000000000ull)
			return -EPROTO;
		out->kind = GW_CHANGED;
		out->text = p;
		return 0;
	}
	default:
		return -EPROTO;
	}
}

/* ---- the watcher's thread ---- */

/* Kills the watcher: its exec ends. */
static void kill_watcher(struct guest_watch *w)
{
	char x = 'k';
	if (write(w->cancel[1], &x, 1) < 0)
		sb_debug("watch: cancel pipe: %s", strerror(errno));
}

/* Ends the watch for good (once): the sink hears it unless we stop it,
 * and a watcher still running is killed (nothing it says counts now). */
static void lose(struct guest_watch *w, const char *why)
{
	pthread_mutex_lock(&w->mu);
	bool tell = !w->lost && !w->stopping && w->ready;
	if (!w->lost && !w->ended)
		kill_watcher(w);
	w->lost = true;
	if (!w->why[0])
		snprintf(w->why, sizeof w->why, "%s", why);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (tell) {
		sb_warn("the sandbox is no longer watched (%s): cached attributes and listings expire after their timeouts again",
			why);
		w->sink.lost(w->sink.arg, why);
	}
}

static void one_record(struct guest_watch *w, const char *rec, size_t len)
{
	struct gw_record r;
	if (gw_parse_record(rec, len, &r) < 0) {
		sb_debug("watch: cannot parse the watcher's record '%.*s'", (int)len, rec);
		lose(w, "the watcher said something it should not");
		return;
	}
	switch (r.kind) {
	case GW_READY:
		pthread_mutex_lock(&w->mu);
		w->ready = true;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		break;
	case GW_CHANGED:
		w->sink.changed(w->sink.arg, r.text, &r.st);
		break;
	case GW_GONE:
		w->sink.changed(w->sink.arg, r.text, NULL);
		break;
	case GW_OVERFLOW:
		sb_info("watch: the sandbox's inotify queue overflowed: everything cached is forgotten");
		w->sink.changed(w->sink.arg, NULL, NULL);
		break;
	case GW_SETTLED:
		pthread_mutex_lock(&w->mu);
		if (r.token > w->answered)
			w->answered = r.token;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		break;
	case GW_FATAL:
		lose(w, r.text);
		break;
	}
}

static int on_stdout(void *arg, const char *data, size_t len)
{
	struct guest_watch *w = arg;
	/* lost is written only on this thread (lose() runs here), so it
	 * needs no lock to be read here: once lost, nothing more counts. */
	for (size_t i = 0; i < len && !w->lost; i++) {
		if (data[i] != '\0') {
			if (w->recn < RECORD_MAX)
				w->rec[w->recn++] = data[i];
			else
				w->rec_too_long = true;
			continue;
		}
		if (w->rec_too_long)
			lose(w, "the watcher sent a record too long");
		else {
			w->rec[w->recn] = '\0'; /* the record's text is a string */
			one_record(w, w->rec, w->recn);
		}
		w->recn = 0;
		w->rec_too_long = false;
	}
	return 0;
}

static int on_stderr(void *arg, const char *data, size_t len)
{
	(void)arg;
	sb_debug("watch: the watcher says: %.*s", (int)len, data);
	return 0;
}

static void *watcher_thread(void *arg)
{
	struct guest_watch *w = arg;
	const char *argv[] = {w->guest_path, w->b->spec.workdir, NULL};
	/* the testing aid reaches the watcher (a path in the sandbox) */
	char pause[PATH_MAX + 32];
	const char *pause_path = getenv("SBFS_TEST_WATCH_PAUSE");
	const char *env[] = {pause, NULL};
	if (pause_path)
		snprintf(pause, sizeof pause, "SBFS_TEST_WATCH_PAUSE=%s", pause_path);
	struct sb_exec_req req = {
		.argv = argv, .cwd = "/", .stdin_fd = w->in[0],
		.env = pause_path ? env : NULL,
		.on_stdout = on_stdout, .on_stderr = on_stderr, .cb_arg = w,
		.cancel_fd = w->cancel[0],
	};
	struct sb_exec_result res = {0};
	/* The backend's own exec, not the dispatcher's: this is no command
	 * of the user's, and the mount must not count the sandbox as busy
	 * for as long as it runs. */
	int rc = w->b->ops->exec(w->b, &req, &res);
	char why[SB_REASON_MAX + 64];
	if (rc < 0)
		snprintf(why, sizeof why, "the watcher could not run: %s",
			 w->b->error[0] ? w->b->error : strerror(-rc));
	else if (res.exit_code == 126 || res.exit_code == 127) {
		snprintf(why, sizeof why, "the sandbox cannot run the watcher (exit %d: another architecture, or a file system mounted noexec)",
			 res.exit_code);
		/* it never ran, so its file is still there (a running watcher
		 * removes its own); a kept sandbox would keep it */
		w->b->ops->remove(w->b, w->guest_path, false);
	} else
		snprintf(why, sizeof why, "the watcher ended (%s %d)",
			 res.term_signal ? "signal" : "exit",
			 res.term_signal ? res.term_signal : res.exit_code);
	lose(w, why);
	pthread_mutex_lock(&w->mu);
	w->ended = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* ---- placing it ---- */

/* The watcher built beside this sbfs (build tree: DIR/../guest/), or the
 * installed one. */
static int find_helper(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(out, len, "%s/../guest/" HELPER_NAME, exe);
			if (access(out, R_OK) == 0)
				return 0;
		}
	}
	snprintf(out, len, "%s/" HELPER_NAME, SBFS_LIBEXECDIR);
	return access(out, R_OK) == 0 ? 0 : -ENOENT;
}

static int place(struct guest_watch *w)
{
	char host[PATH_MAX + 64];
	if (find_helper(host, sizeof host) < 0) {
		sb_info("the sandbox is not watched: %s is not installed (looked in %s): cached attributes and listings expire after their timeouts",
			HELPER_NAME, SBFS_LIBEXECDIR);
		return -ENOENT;
	}
	int fd = open(host, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		sb_info("the sandbox is not watched: cannot read %s: %s", host, strerror(e));
		return -e;
	}
	unsigned rnd = (unsigned)getpid() ^ (unsigned)time(NULL) ^ (unsigned)(uintptr_t)w;
	snprintf(w->guest_path, sizeof w->guest_path, "/tmp/.sbfs-guest-watch-%08x", rnd);
	struct sb_upload u = {.path = w->guest_path, .fd = fd, .size = st.st_size,
			      .mode = 0755, .mtime = {.tv_nsec = UTIME_OMIT}};
	int rc = w->b->ops->write_file(w->b, &u);
	close(fd);
	if (rc < 0)
		sb_info("the sandbox is not watched: placing the watcher at %s failed: %s",
			w->guest_path, w->b->error[0] ? w->b->error : strerror(-rc));
	return rc;
}

static void watch_free(struct guest_watch *w)
{
	for (int i = 0; i < 2; i++) {
		if (w->in[i] >= 0)
			close(w->in[i]);
		if (w->cancel[i] >= 0)
			close(w->cancel[i]);
	}
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w->rec);
	free(w);
}

/* Waits (mu held) for the next change, until the deadline; false then. */
static bool wait_change(struct guest_watch *w, const struct timespec *deadline)
{
	return pthread_cond_timedwait(&w->cv, &w->mu, deadline) != ETIMEDOUT;
}

/* Ends w: no sink call runs after it returns. */
static void stop_watch(struct guest_watch *w)
{
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	pthread_mutex_unlock(&w->mu);
	kill_watcher(w);
	pthread_join(w->thread, NULL);
	watch_free(w);
}

int guest_watch_start(struct sb_backend *b, const struct sb_watch_sink *sink)
{
	if (!b->ops->write_file || !b->ops->exec)
		return -ENOTSUP;
	struct guest_watch *w = calloc(1, sizeof *w);
	if (!w)
		return -ENOMEM;
	w->b = b;
	w->sink = *sink;
	w->in[0] = w->in[1] = w->cancel[0] = w->cancel[1] = -1;
	pthread_mutex_init(&w->mu, NULL);
	cond_init_monotonic(&w->cv);
	w->rec = malloc(RECORD_MAX + 1);
	if (!w->rec || pipe2(w->in, O_CLOEXEC) < 0 || pipe2(w->cancel, O_CLOEXEC) < 0) {
		watch_free(w);
		return -ENOMEM;
	}
	int rc = place(w);
	if (rc == 0)
		rc = -pthread_create(&w->thread, NULL, watcher_thread, w);
	if (rc < 0) {
		watch_free(w);
		return rc;
	}
	struct timespec deadline = monotonic_after_ms(READY_TIMEOUT_MS);
	pthread_mutex_lock(&w->mu);
	while (!w->ready && !w->ended && !w->lost && wait_change(w, &deadline))
		;
	bool ready = w->ready && !w->lost;
	char why[sizeof w->why];
	snprintf(why, sizeof why, "%s", w->why[0] ? w->why : "the watcher did not start in time");
	pthread_mutex_unlock(&w->mu);
	if (!ready) {
		sb_info("the sandbox is not watched (%s): cached attributes and listings expire after their timeouts",
			why);
		stop_watch(w);
		return -ENOTSUP;
	}
	atomic_store(&b->guest_watch, w);
	return 0;
}

int guest_watch_settle(struct sb_backend *b)
{
	struct guest_watch *w = atomic_load(&b->guest_watch);
	if (!w)
		return -ENOTCONN;
	pthread_mutex_lock(&w->mu);
	if (w->lost) {
		pthread_mutex_unlock(&w->mu);
		return -EIO;
	}
	unsigned long long token = ++w->asked;
	char line[32];
	int n = snprintf(line, sizeof line, "%llu\n", token);
	/* A pipe's small writes are whole; the watcher reads them as they
	 * come. Written under mu so tokens go in order. */
	bool sent = write(w->in[1], line, (size_t)n) == n;
	struct timespec deadline = monotonic_after_ms(SETTLE_TIMEOUT_MS);
	while (sent && w->answered < token && !w->lost && wait_change(w, &deadline))
		;
	bool done = w->answered >= token;
	int rc = !sent || w->lost ? -EIO : done ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&w->mu);
	if (rc == -ETIMEDOUT)
		sb_info("watch: the watcher did not answer within %d ms: everything cached is forgotten",
			SETTLE_TIMEOUT_MS);
	return rc;
}

void guest_watch_stop(struct sb_backend *b)
{
	struct guest_watch *w = atomic_exchange(&b->guest_watch, NULL);
	if (w)
		stop_watch(w);
}
