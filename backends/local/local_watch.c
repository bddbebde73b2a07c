/* The local backend's change notifications: inotify on the host workspace.
 * inotify is not recursive, so every directory gets its own watch, added
 * when the watch starts and whenever a directory appears (made or moved
 * in); each event is reported with what the path is now (a stat on the
 * host, beneath the workspace, following no symlink), so the mount can
 * tell a change from its own write coming back. */
#include "local.h"
#include "own_changes.h"
#include "util/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* IN_EXCL_UNLINK: a file removed while open stops reporting its writes. */
#define WATCH_MASK                                                        \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | \
	 IN_ATTRIB | IN_CLOSE_WRITE | IN_ONLYDIR | IN_EXCL_UNLINK)

/* Watch descriptor -> the mount-relative path of its directory ("" the
 * root). A hash, not an array indexed by descriptor: the kernel hands out
 * ever larger descriptors as directories come and go, and a long-lived
 * mount must not grow with them. */
struct watched_dir {
	int wd;
	char *path;
	struct watched_dir *next;
};

/* How long the thread lets events gather before it reads them. */
#define WATCH_BATCH_MS 5

/* How long a report waits for the mount's own call to the same path: a
 * native call takes microseconds, a large upload longer (its report is
 * then read as news, which costs a question). */
#define OWN_CALL_WAIT_MS 200

struct local_watch {
	struct sb_backend *b;
	struct sb_watch_sink sink;
	int fd;      /* inotify, non-blocking */
	int stop[2]; /* a byte here ends the thread */
	pthread_t thread;
	/* Lock order: mu, then whatever the sink takes (the fs's table
	 * lock). Guards reading the events, the map and lost. */
	pthread_mutex_t mu;
	/* Testing aid (SBFS_TEST_WATCH_PAUSE, absolute or relative to the
	 * workspace): while this file exists, the thread reads no events, so
	 * a test can overflow the queue. */
	const char *pause_file;
	struct watched_dir **buckets; /* nbuckets, a power of two */
	size_t nbuckets, ndirs;
	bool lost;
	struct own_changes *own;
};

static const char *limit_reason(int rc)
{
	return rc == -ENOSPC ? "the inotify watch limit, fs.inotify.max_user_watches, is reached"
	       : rc == -EMFILE ? "the inotify instance limit, fs.inotify.max_user_instances, is reached"
			       : strerror(-rc);
}

static void lose(struct local_watch *w, const char *why)
{
	if (w->lost)
		return;
	w->lost = true;
	sb_warn("the workspace is no longer watched (%s): cached attributes and listings expire after their timeouts again",
		why);
	w->sink.lost(w->sink.arg, why);
}

static char *join(const char *dir, const char *name)
{
	char *p = NULL;
	if (asprintf(&p, "%s%s%s", dir, *dir ? "/" : "", name) < 0)
		return NULL;
	return p;
}

static struct watched_dir **slot(struct local_watch *w, int wd)
{
	struct watched_dir **p = &w->buckets[(size_t)wd & (w->nbuckets - 1)];
	while (*p && (*p)->wd != wd)
		p = &(*p)->next;
	return p;
}

/* The directory of wd, or NULL: a watch dropped (unwatch_tree, or the
 * directory removed). */
static const char *dir_of(struct local_watch *w, int wd)
{
	struct watched_dir *d = *slot(w, wd);
	return d ? d->path : NULL;
}

static void forget_dir(struct local_watch *w, struct watched_dir **p)
{
	struct watched_dir *d = *p;
	*p = d->next;
	free(d->path);
	free(d);
	w->ndirs--;
}

static void grow(struct local_watch *w)
{
	size_t n = w->nbuckets * 2;
	struct watched_dir **v = calloc(n, sizeof *v);
	if (!v)
		return;
	for (size_t i = 0; i < w->nbuckets; i++)
		for (struct watched_dir *d = w->buckets[i], *next; d; d = next) {
			next = d->next;
			d->next = v[(size_t)d->wd & (n - 1)];
			v[(size_t)d->wd & (n - 1)] = d;
		}
	free(w->buckets);
	w->buckets = v;
	w->nbuckets = n;
}

static int remember(struct local_watch *w, int wd, const char *rel)
{
	char *copy = strdup(rel);
	if (!copy)
		return -ENOMEM;
	struct watched_dir **p = slot(w, wd);
	if (*p) { /* the same directory, found again under rel */
		free((*p)->path);
		(*p)->path = copy;
		return 0;
	}
	struct watched_dir *d = malloc(sizeof *d);
	if (!d) {
		free(copy);
		return -ENOMEM;
	}
	*d = (struct watched_dir){.wd = wd, .path = copy, .next = NULL};
	*p = d;
	if (++w->ndirs > w->nbuckets)
		grow(w); /* failing, chains grow longer: still right */
	return 0;
}

/* Opens rel beneath the workspace as the guest would reach it without
 * symlinks: the watch is on that directory, whatever replaces a name on
 * the way meanwhile. O_NOATIME: the watch's own scan of a directory must
 * not change it (a readdir under relatime moves an atime that a utimens
 * just set older than the mtime); where the daemon may not ask that (not
 * the owner), the scan goes without. */
static int open_dir(struct local_watch *w, const char *rel)
{
	struct local *l = w->b->priv;
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOATIME,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	const char *path = *rel ? rel : ".";
	int fd = (int)syscall(SYS_openat2, l->ws_fd, path, &how, sizeof how);
	if (fd < 0 && errno == EPERM) {
		how.flags &= ~(uint64_t)O_NOATIME;
		fd = (int)syscall(SYS_openat2, l->ws_fd, path, &how, sizeof how);
	}
	return fd;
}

static void report(struct local_watch *w, const char *rel);

/* Watches rel and every directory below it; with report_inside, reports
 * every name below it too (a directory made or moved in: what was put in
 * it before its watch existed was reported by nobody). Fails only where
 * the watch cannot go on (the watch limit, memory); a directory gone
 * meanwhile is skipped, its removal reported by its parent. mu held. */
static int watch_tree(struct local_watch *w, const char *rel, bool report_inside)
{
	int dfd = open_dir(w, rel);
	if (dfd < 0)
		return 0;
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", dfd);
	int wd = inotify_add_watch(w->fd, proc, WATCH_MASK);
	if (wd < 0) {
		int e = errno;
		close(dfd);
		return e == ENOSPC || e == ENOMEM ? -e : 0;
	}
	int rc = remember(w, wd, rel);
	/* The names first, the descent after: one open directory at a
	 * time, however deep the tree. */
	char **names = NULL;
	bool *is_dirs = NULL;
	size_t n = 0, cap = 0;
	DIR *d = rc == 0 ? fdopendir(dfd) : NULL;
	if (!d)
		close(dfd);
	for (struct dirent *e; d && rc == 0 && (e = readdir(d));) {
		struct stat st;
		bool is_dir = e->d_type == DT_DIR ||
			      (e->d_type == DT_UNKNOWN &&
			       fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			       S_ISDIR(st.st_mode));
		if ((!is_dir && !report_inside) || !strcmp(e->d_name, ".") ||
		    !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **v = realloc(names, cap * sizeof *v);
			bool *t = v ? realloc(is_dirs, cap * sizeof *t) : NULL;
			if (v)
				names = v;
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			is_dirs = t;
		}
		is_dirs[n] = is_dir;
		if (!(names[n] = join(rel, e->d_name)))
			rc = -ENOMEM;
		else
			n++;
	}
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++) {
		if (rc == 0 && is_dirs[i])
			rc = watch_tree(w, names[i], report_inside);
		if (rc == 0 && report_inside)
			report(w, names[i]);
		free(names[i]);
	}
	free(names);
	free(is_dirs);
	return rc;
}

/* A directory moved away: its watches (and those below) name paths that
 * are no longer its; where it went, it is watched again. mu held. */
static void unwatch_tree(struct local_watch *w, const char *rel)
{
	size_t len = strlen(rel);
	for (size_t i = 0; i < w->nbuckets; i++)
		for (struct watched_dir **p = &w->buckets[i]; *p;) {
			const char *path = (*p)->path;
			if (!strncmp(path, rel, len) && (path[len] == '\0' || path[len] == '/')) {
				inotify_rm_watch(w->fd, (*p)->wd);
				forget_dir(w, p);
			} else {
				p = &(*p)->next;
			}
		}
}

bool local_watch_begin(struct sb_backend *b, const char *rel)
{
	struct local *l = b->priv;
	struct local_watch *w = atomic_load(&l->watch);
	return w && own_changes_begin(w->own, rel);
}

void local_watch_end(struct sb_backend *b, const char *rel, bool marked,
		     const struct stat *left, bool gone)
{
	struct local *l = b->priv;
	struct local_watch *w = atomic_load(&l->watch);
	if (w)
		own_changes_end(w->own, rel, marked, left, gone);
}

static void report(struct local_watch *w, const char *rel)
{
	const char *wd = w->b->spec.workdir;
	char *guest = NULL;
	if (asprintf(&guest, "%s%s%s", strcmp(wd, "/") ? wd : "", *rel ? "/" : "",
		     rel) < 0) {
		w->sink.changed(w->sink.arg, NULL, NULL);
		return;
	}
	/* What the mount's own call under way does is its own, however
	 * half-done it looks now: the call's end says what it left. */
	own_changes_wait(w->own, rel, OWN_CALL_WAIT_MS);
	struct stat st;
	int rc = local_stat_native(w->b, guest, &st, NULL);
	free(guest);
	if ((rc == 0 || rc == -ENOENT) && own_changes_match(w->own, rel, rc == 0 ? &st : NULL))
		return;
	/* A path the host cannot stat as the guest would (a symlink on the
	 * way) is reported gone: the mount then asks the sandbox. */
	w->sink.changed(w->sink.arg, rel, rc == 0 ? &st : NULL);
}

static void handle(struct local_watch *w, const struct inotify_event *ev)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		/* The queue overflowed: directories made meanwhile may have
		 * no watch yet, and any change may be missed. */
		sb_info("watch: changes came faster than they were read (the inotify queue overflowed): everything cached is forgotten");
		int rc = watch_tree(w, "", false);
		if (rc < 0)
			lose(w, limit_reason(rc));
		w->sink.changed(w->sink.arg, NULL, NULL);
		return;
	}
	const char *dir = dir_of(w, ev->wd);
	if (!dir)
		return; /* a watch dropped by unwatch_tree: reported where it went */
	if (ev->mask & IN_IGNORED) {
		forget_dir(w, slot(w, ev->wd));
		return;
	}
	char *rel = ev->len ? join(dir, ev->name) : strdup(dir);
	if (!rel) {
		w->sink.changed(w->sink.arg, NULL, NULL);
		return;
	}
	if ((ev->mask & IN_ISDIR) && (ev->mask & IN_MOVED_FROM))
		unwatch_tree(w, rel);
	if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
		/* Watched first, then what is inside reported: what was
		 * made in it before its watch existed was reported by
		 * nobody. */
		int rc = watch_tree(w, rel, true);
		if (rc < 0)
			lose(w, limit_reason(rc));
	}
	report(w, rel);
	free(rel);
}

/* Reads and reports every queued event. mu held. */
static void drain(struct local_watch *w)
{
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	while (!w->lost) {
		ssize_t n = read(w->fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			lose(w, n < 0 ? strerror(errno) : "inotify ended");
			return;
		}
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const void *)p;
			handle(w, ev);
			p += sizeof *ev + ev->len;
		}
	}
}

static void *watch_thread(void *arg)
{
	struct local_watch *w = arg;
	for (;;) {
		struct pollfd p[2] = {{.fd = w->fd, .events = POLLIN},
				      {.fd = w->stop[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			pthread_mutex_lock(&w->mu);
			lose(w, strerror(errno));
			pthread_mutex_unlock(&w->mu);
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		/* relative: to the workspace, as for the watcher in a sandbox */
		if (w->pause_file &&
		    faccessat(((struct local *)w->b->priv)->ws_fd, w->pause_file, F_OK, 0) == 0) {
			poll(&p[1], 1, 10);
			continue;
		}
		/* A moment before reading: one read takes many events, and
		 * one wake-up serves a burst. settle reads at once. */
		poll(&p[1], 1, WATCH_BATCH_MS);
		pthread_mutex_lock(&w->mu);
		drain(w);
		bool lost = w->lost;
		pthread_mutex_unlock(&w->mu);
		if (lost)
			return NULL;
	}
}

static void watch_free(struct local_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	for (int i = 0; i < 2; i++)
		if (w->stop[i] >= 0)
			close(w->stop[i]);
	for (size_t i = 0; w->buckets && i < w->nbuckets; i++)
		while (w->buckets[i])
			forget_dir(w, &w->buckets[i]);
	free(w->buckets);
	own_changes_free(w->own);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

int local_watch_start(struct sb_backend *b, const struct sb_watch_sink *sink)
{
	struct local *l = b->priv;
	struct local_watch *w = calloc(1, sizeof *w);
	if (!w)
		return -ENOMEM;
	w->b = b;
	w->sink = *sink;
	w->stop[0] = w->stop[1] = -1;
	w->pause_file = getenv("SBFS_TEST_WATCH_PAUSE");
	pthread_mutex_init(&w->mu, NULL);
	w->own = own_changes_new();
	w->nbuckets = 64;
	w->buckets = calloc(w->nbuckets, sizeof *w->buckets);
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	int rc = !w->buckets || !w->own ? -ENOMEM
		 : w->fd < 0 || pipe2(w->stop, O_CLOEXEC) < 0 ? -errno : 0;
	if (rc == 0)
		rc = watch_tree(w, "", false);
	if (rc == 0 && w->ndirs == 0)
		rc = -ENOENT; /* not even the root could be watched */
	if (rc == 0)
		rc = -pthread_create(&w->thread, NULL, watch_thread, w);
	if (rc < 0) {
		sb_info("the workspace is not watched (%s): cached attributes and listings expire after their timeouts",
			limit_reason(rc));
		watch_free(w);
		return rc;
	}
	atomic_store(&l->watch, w);
	return 0;
}

int local_watch_settle(struct sb_backend *b)
{
	struct local *l = b->priv;
	struct local_watch *w = atomic_load(&l->watch);
	if (!w)
		return -ENOTCONN;
	pthread_mutex_lock(&w->mu);
	drain(w);
	bool lost = w->lost;
	pthread_mutex_unlock(&w->mu);
	return lost ? -EIO : 0;
}

void local_watch_stop(struct sb_backend *b)
{
	struct local *l = b->priv;
	struct local_watch *w = atomic_load(&l->watch);
	if (!w)
		return;
	char x = 's';
	if (write(w->stop[1], &x, 1) < 0)
		sb_debug("watch: stop pipe: %s", strerror(errno));
	pthread_join(w->thread, NULL);
	atomic_store(&l->watch, NULL);
	watch_free(w);
}
