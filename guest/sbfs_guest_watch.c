/* sbfs-guest-watch ROOT: runs inside a sandbox and reports every change
 * under ROOT to the mount, which reads its stdout (backends/guest_watch.c
 * places it, runs it and parses what it says). It is linked statically so
 * it runs in any image of the same architecture, whatever its libc.
 *
 * inotify is not recursive: every directory gets its own watch, placed
 * before the change that made it is reported, so a listing the mount makes
 * after the report cannot miss a name a later event would not tell.
 *
 * Out (stdout), records ending in a NUL byte; the path is mount-relative
 * ("" is ROOT) and comes last, so it may hold any byte but NUL:
 *   R                       ready: ROOT and every directory below watched
 *   E MODE SIZE MS MNS CS CNS INO NLINK UID GID DEV PATH
 *                           PATH changed; what lstat says of it now
 *   G PATH                  PATH changed and is gone
 *   O                       events were lost: anything may have changed
 *   S TOKEN                 every change made before TOKEN was read is out
 *   X REASON                the watch ended for good
 * In (stdin): one TOKEN (digits) a line, asking for an S. EOF ends it.
 * Testing aid: while the file SBFS_TEST_WATCH_PAUSE names (absolute, or
 * relative to ROOT) exists, no event is read (and no S sent), so a test
 * can overflow the queue. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define WATCH_MASK                                                        \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | \
	 IN_ATTRIB | IN_CLOSE_WRITE | IN_ONLYDIR | IN_EXCL_UNLINK)

struct dir {
	int wd;
	char *path; /* mount-relative, "" for ROOT */
	struct dir *next;
};

static const char *root;
static int ifd = -1;
static struct dir **buckets;
static size_t nbuckets = 1024, ndirs;

static const char *pause_file;

static bool paused(void)
{
	return pause_file && access(pause_file, F_OK) == 0;
}

static char out[1 << 16];
static size_t outn;

static void flush_out(void)
{
	size_t off = 0;
	while (off < outn) {
		ssize_t w = write(1, out + off, outn - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(1); /* the mount is gone */
		off += (size_t)w;
	}
	outn = 0;
}

static void put(const char *s, size_t len)
{
	while (len) {
		if (outn == sizeof out)
			flush_out();
		size_t take = sizeof out - outn < len ? sizeof out - outn : len;
		memcpy(out + outn, s, take);
		outn += take;
		s += take;
		len -= take;
	}
}

/* One record: printf-style head, then path (may be NULL), then the NUL. */
static void record(const char *path, const char *fmt, ...)
{
	char head[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(head, sizeof head, fmt, ap);
	va_end(ap);
	put(head, n < 0 ? 0 : (size_t)n < sizeof head ? (size_t)n : sizeof head - 1);
	if (path)
		put(path, strlen(path));
	put("", 1);
}

static void fatal(const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	record(why, "X ");
	flush_out();
	exit(1);
}

/* ROOT + "/" + rel, malloc'd. */
static char *full_path(const char *rel)
{
	size_t rl = strlen(root), l = strlen(rel);
	char *p = malloc(rl + l + 2);
	if (!p)
		fatal("out of memory");
	memcpy(p, root, rl);
	p[rl] = '/';
	memcpy(p + rl + 1, rel, l + 1);
	if (!*rel)
		p[rl] = '\0';
	return p;
}

static char *join(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	char *p = malloc(dl + nl + 2);
	if (!p)
		fatal("out of memory");
	memcpy(p, dir, dl);
	size_t at = dl;
	if (dl)
		p[at++] = '/';
	memcpy(p + at, name, nl + 1);
	return p;
}

/* ---- watch descriptor -> directory ---- */

static struct dir **slot(int wd)
{
	struct dir **d = &buckets[(unsigned)wd % nbuckets];
	while (*d && (*d)->wd != wd)
		d = &(*d)->next;
	return d;
}

static void grow(void)
{
	if (ndirs < nbuckets)
		return;
	size_t nb = nbuckets * 2;
	struct dir **b = calloc(nb, sizeof *b);
	if (!b)
		return; /* longer chains still work */
	for (size_t i = 0; i < nbuckets; i++)
		for (struct dir *d = buckets[i], *next; d; d = next) {
			next = d->next;
			d->next = b[(unsigned)d->wd % nb];
			b[(unsigned)d->wd % nb] = d;
		}
	free(buckets);
	buckets = b;
	nbuckets = nb;
}

static void map_set(int wd, const char *path)
{
	struct dir **d = slot(wd);
	char *copy = strdup(path);
	if (!copy)
		fatal("out of memory");
	if (*d) { /* the same directory, reached by a new path (moved) */
		free((*d)->path);
		(*d)->path = copy;
		return;
	}
	struct dir *n = malloc(sizeof *n);
	if (!n)
		fatal("out of memory");
	*n = (struct dir){.wd = wd, .path = copy};
	*d = n;
	ndirs++;
	grow();
}

static void map_drop(int wd)
{
	struct dir **d = slot(wd);
	if (!*d)
		return;
	struct dir *dead = *d;
	*d = dead->next;
	free(dead->path);
	free(dead);
	ndirs--;
}

/* Watches rel and every directory below it. */
static void watch_tree(const char *rel)
{
	char *p = full_path(rel);
	int wd = inotify_add_watch(ifd, p, WATCH_MASK | IN_DONT_FOLLOW);
	if (wd < 0) {
		int e = errno;
		free(p);
		if (e == ENOENT || e == ENOTDIR || e == EACCES)
			return; /* gone again, or not ours to watch: its parent's events still tell */
		fatal("cannot watch %s: %s", *rel ? rel : ".", e == ENOSPC
		      ? "the inotify watch limit, fs.inotify.max_user_watches, is reached"
		      : strerror(e));
	}
	map_set(wd, rel);
	DIR *dir = opendir(p);
	free(p);
	if (!dir)
		return;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *child = join(rel, de->d_name);
		if (de->d_type == DT_UNKNOWN) {
			struct stat st;
			char *cp = full_path(child);
			int is_dir = lstat(cp, &st) == 0 && S_ISDIR(st.st_mode);
			free(cp);
			if (!is_dir) {
				free(child);
				continue;
			}
		}
		watch_tree(child);
		free(child);
	}
	closedir(dir);
}

/* ---- events ---- */

static void report(const char *rel)
{
	char *p = full_path(rel);
	struct stat st;
	int rc = lstat(p, &st);
	free(p);
	if (rc < 0) {
		record(rel, "G ");
		return;
	}
	record(rel, "E %o %lld %lld %ld %lld %ld %llu %lu %u %u %llu ",
	       (unsigned)st.st_mode, (long long)st.st_size,
	       (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
	       (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec,
	       (unsigned long long)st.st_ino, (unsigned long)st.st_nlink,
	       (unsigned)st.st_uid, (unsigned)st.st_gid,
	       (unsigned long long)st.st_dev);
}

/* What the events of the current read reported last. */
static char *last;

static void one_event(const struct inotify_event *ev)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		/* Directories made meanwhile are not watched yet: watch the
		 * whole tree again (a watch already placed is kept). */
		watch_tree("");
		record(NULL, "O");
		return;
	}
	struct dir **d = slot(ev->wd);
	if (!*d)
		return;
	if (ev->mask & IN_IGNORED) {
		map_drop(ev->wd);
		return;
	}
	char *rel = ev->len ? join((*d)->path, ev->name) : strdup((*d)->path);
	if (!rel)
		fatal("out of memory");
	/* A directory moved keeps its watches (and their descriptors): the
	 * events queued in it after the move but before this one is read
	 * come on them. Moved within ROOT, watch_tree gives them their new
	 * paths here; moved out, they keep the old ones, which makes their
	 * reports name paths that are gone or another's: a question more for
	 * the mount, never a change missed. */
	if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
		watch_tree(rel); /* before the report: see the top */
	/* a write is several events (modify, close): one report a read */
	if (!last || strcmp(last, rel) != 0)
		report(rel);
	free(last);
	last = rel;
}

/* Reads every event queued now. */
static void drain_events(void)
{
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(ifd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0)
			fatal("reading inotify: %s", n < 0 ? strerror(errno) : "end of file");
		/* One read's events were all queued before it returned, so a
		 * report made after it shows what the last of them did: one
		 * report a path and read. Across reads it would not. */
		free(last);
		last = NULL;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			one_event(ev);
			p += sizeof *ev + ev->len;
		}
	}
}

/* Settle requests: each complete line is a token, answered once every
 * event queued before it was read is out. Returns 0 at EOF. */
static int read_requests(void)
{
	static char line[64];
	static size_t ll;
	char buf[512];
	ssize_t n = read(0, buf, sizeof buf);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 1;
	if (n <= 0)
		return 0;
	drain_events(); /* the events of everything done before this read */
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] != '\n') {
			if (ll < sizeof line - 1)
				line[ll++] = buf[i];
			continue;
		}
		line[ll] = '\0';
		record(line, "S ");
		ll = 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] != '/') {
		fprintf(stderr, "usage: sbfs-guest-watch ROOT (an absolute path)\n");
		return 2;
	}
	/* Placed for this run only: nothing stays behind in the sandbox. */
	unlink(argv[0]);
	root = argv[1];
	buckets = calloc(nbuckets, sizeof *buckets);
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (!buckets || ifd < 0)
		fatal("inotify: %s", strerror(errno));
	watch_tree("");
	record(NULL, "R");
	flush_out();
	const char *pause = getenv("SBFS_TEST_WATCH_PAUSE");
	if (pause && *pause)
		pause_file = *pause == '/' ? pause : full_path(pause);
	struct pollfd f[2] = {{.fd = 0, .events = POLLIN}, {.fd = ifd, .events = POLLIN}};
	for (;;) {
		if (paused()) {
			usleep(20 * 1000);
			continue;
		}
		if (poll(f, 2, pause_file ? 50 : -1) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll: %s", strerror(errno));
		}
		if (f[1].revents & POLLIN)
			drain_events();
		if (f[0].revents & (POLLIN | POLLHUP | POLLERR) && !read_requests())
			break;
		flush_out();
	}
	flush_out();
	return 0;
}
