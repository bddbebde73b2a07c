#include "wb_journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/core/lock_order.h"
#include "util/fd_copy.h"

struct wb_journal {
	char dir[PATH_MAX];
	char pointer[PATH_MAX];
	int dirfd;
	atomic_int_fast64_t seq;
	/* The group commit (journal_commit). The commit lock is the
	 * innermost of the fs (fs/core/lock_order.h), taken under a file
	 * lock; no fsync runs while it is held. */
	pthread_mutex_t commit_lock;
	pthread_cond_t committed;
	uint64_t staged;      /* entries whose names are in the folder, counted */
	uint64_t durable;     /* the first this many are durable */
	uint64_t failed_upto; /* the first this many were in an fsync that failed */
	int failed_err;       /* its -errno */
	bool syncing;         /* a close is leading an fsync of the folder */
	uint64_t fsyncs;      /* of the folder, for status */
};

void wb_state_dir(char *buf, size_t len)
{
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	if (state && *state)
		snprintf(buf, len, "%s/sbfs", state);
	else
		snprintf(buf, len, "%s/.local/state/sbfs",
			 home && *home ? home : "/tmp");
}

const char *wb_default_spool_dir(void)
{
	const char *t = getenv("TMPDIR");
	return t && *t ? t : "/var/tmp";
}

static int fsync_dir(const char *path)
{
	int fd = open(path, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* The parent folder of path (a copy cut at its last '/') is synced: a new
 * name in it is durable only once its folder is. */
static int fsync_parent(const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	char *slash = strrchr(p, '/');
	if (!slash)
		return fsync_dir(".");
	if (slash == p)
		slash++;
	*slash = '\0';
	return fsync_dir(p);
}

/* durable: each folder made is synced into its parent, so a power cut
 * cannot take it (and what is later made durable in it) away. */
static int mkdir_parents(const char *path, bool last, bool durable)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	char *end = p + strlen(p);
	for (char *s = p + 1; s <= end; s++) {
		if (s < end && *s != '/')
			continue;
		if (s == end && !last)
			break;
		char c = *s;
		*s = '\0';
		bool made = mkdir(p, 0700) == 0;
		if (!made && errno != EEXIST)
			return -errno;
		if (made && durable) {
			int r = fsync_parent(p);
			if (r < 0)
				return r;
		}
		*s = c;
	}
	return 0;
}

static int write_durable(int dirfd, const char *name, const char *text)
{
	char tmp[NAME_MAX + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", name);
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	size_t len = strlen(text);
	int r = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0 ? 0 : -EIO;
	close(fd);
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(dirfd, tmp, 0);
	return r;
}

/* A path record, SEQ.path: a symlink whose target is the path, made
 * durable with its name by the folder's fsync (a regular file's content
 * would need an fsync of its own); a path longer than a symlink can hold
 * goes in a regular file, fsync'd. */
static int write_record(int dirfd, const char *name, const char *relpath)
{
	if (symlinkat(relpath, dirfd, name) == 0)
		return 0;
	if (errno != ENAMETOOLONG)
		return -errno;
	return write_durable(dirfd, name, relpath);
}

/* Replaces a path record at once: a new one beside it, renamed over it. */
static int replace_record(int dirfd, const char *name, const char *relpath)
{
	char tmp[64];
	snprintf(tmp, sizeof tmp, "%s.new", name);
	unlinkat(dirfd, tmp, 0); /* left by a replace that failed */
	int r = write_record(dirfd, tmp, relpath);
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(dirfd, tmp, 0);
	return r;
}

/* Reads a path record of either kind into buf; its length, or -1. */
static ssize_t read_record(int dirfd, const char *name, char *buf, size_t len)
{
	ssize_t n = readlinkat(dirfd, name, buf, len - 1);
	if (n < 0 && errno == EINVAL) {
		int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, buf, len - 1) : -1;
		if (fd >= 0)
			close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* Makes every entry whose names are in the folder so far durable with one
 * fsync of the folder, shared: the first close to arrive leads an fsync;
 * those that arrive while it runs wait, and the first of them leads the
 * next one, for all of them. Each close returns once an fsync that began
 * after its own names were made has succeeded. 0 or -errno. */
static int journal_commit(struct wb_journal *j)
{
	fs_mutex_lock(&j->commit_lock, FS_LOCK_JOURNAL);
	uint64_t mine = ++j->staged;
	int r = 0;
	for (;;) {
		/* A failed fsync fails what it covered, even if a later one
		 * succeeds: after an error, the kernel may have dropped it. */
		if (mine <= j->failed_upto) {
			r = j->failed_err;
			break;
		}
		if (mine <= j->durable)
			break;
		if (j->syncing) {
			pthread_cond_wait(&j->committed, &j->commit_lock);
			continue;
		}
		j->syncing = true;
		uint64_t upto = j->staged;
		fs_mutex_unlock(&j->commit_lock, FS_LOCK_JOURNAL);
		int e = fsync(j->dirfd) < 0 ? -errno : 0;
		fs_mutex_lock(&j->commit_lock, FS_LOCK_JOURNAL);
		j->syncing = false;
		j->fsyncs++;
		if (e == 0) {
			j->durable = upto;
		} else {
			j->failed_upto = upto;
			j->failed_err = e;
		}
		pthread_cond_broadcast(&j->committed);
	}
	fs_mutex_unlock(&j->commit_lock, FS_LOCK_JOURNAL);
	return r;
}

static void remove_all(int dirfd);

/* The spool folders journals were made in, one absolute path a line
 * (STATE/sbfs/spool-dirs): recovery looks there for a journal whose
 * pointer a power cut took. Appended once per folder, synced. */
#define SPOOL_DIRS_FILE "spool-dirs"

static bool spool_dir_listed(const char *list, const char *dir)
{
	FILE *f = fopen(list, "re");
	if (!f)
		return false;
	char line[PATH_MAX + 2];
	bool found = false;
	while (!found && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		found = strcmp(line, dir) == 0;
	}
	fclose(f);
	return found;
}

static int list_spool_dir(const char *state, const char *dir)
{
	char list[PATH_MAX + 16];
	snprintf(list, sizeof list, "%s/" SPOOL_DIRS_FILE, state);
	/* A line cannot hold a name with a newline: the default folder is
	 * searched anyway, and the pointer names any other. */
	if (strchr(dir, '\n') || spool_dir_listed(list, dir))
		return 0;
	int fd = open(list, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	char line[PATH_MAX + 2];
	int len = snprintf(line, sizeof line, "%s\n", dir);
	/* One write of O_APPEND: two mounts starting together add both. */
	int r = write(fd, line, len) == len && fsync(fd) == 0 ? 0 : -EIO;
	close(fd);
	return r < 0 ? r : fsync_dir(state);
}

/* Every link from the state folder to the journal's entries is made
 * durable here, before any close() can be acknowledged: the folder's own
 * name in the spool folder, the pointer, and the folders above it. A
 * journal's fsync makes only its own folder durable, and where the spool
 * and the state folder are on different file systems nothing else would
 * (issue 41: a power cut within ext4's commit interval of the mount left
 * every acknowledged file orphaned). */
static int make_journal(struct wb_journal *j, const char *spool_abs,
			const char *state, const char *owner)
{
	if (mkdir(j->dir, 0700) < 0)
		return -errno;
	j->dirfd = open(j->dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (j->dirfd < 0)
		return -errno;
	/* The folder names its pointer, so a recovery that finds the folder
	 * without it knows the folder is its own state folder's. */
	int r = write_durable(j->dirfd, "owner", owner);
	if (r == 0)
		r = write_durable(j->dirfd, "pointer", j->pointer);
	if (r == 0 && fsync(j->dirfd) < 0)
		r = -errno;
	if (r == 0)
		r = fsync_dir(spool_abs);
	if (r == 0)
		r = mkdir_parents(j->pointer, false, true);
	if (r == 0)
		r = list_spool_dir(state, spool_abs);
	if (r < 0)
		return r;
	char jdir[PATH_MAX + 16];
	snprintf(jdir, sizeof jdir, "%s/journal", state);
	int pfd = open(jdir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	r = write_durable(pfd, strrchr(j->pointer, '/') + 1, j->dir);
	if (r == 0 && fsync(pfd) < 0)
		r = -errno;
	close(pfd);
	return r;
}

struct wb_journal *wb_journal_open(const char *spool_dir, const char *name,
				   char *err, size_t errlen)
{
	struct wb_journal *j = calloc(1, sizeof *j);
	char abs[PATH_MAX], state[PATH_MAX], owner[32];
	if (!j || !realpath(spool_dir, abs)) {
		snprintf(err, errlen, "write-back journal: spool directory %s: %s",
			 spool_dir, strerror(j ? errno : ENOMEM));
		free(j);
		return NULL;
	}
	j->dirfd = -1;
	wb_state_dir(state, sizeof state);
	snprintf(owner, sizeof owner, "%d\n", (int)getpid());
	int r = 0;
	if (snprintf(j->dir, sizeof j->dir, "%s/sbfs-journal-%s", abs, name) >=
		    (int)sizeof j->dir ||
	    snprintf(j->pointer, sizeof j->pointer, "%s/journal/%s", state,
		     name) >= (int)sizeof j->pointer)
		r = -ENAMETOOLONG;
	if (r == 0)
		r = make_journal(j, abs, state, owner);
	if (r < 0) {
		snprintf(err, errlen, "cannot set up the write-back journal in %s: %s "
			 "(set -o spool_dir=DIR to a writable local directory)",
			 j->dir, strerror(-r));
		if (j->dirfd >= 0) {
			remove_all(j->dirfd);
			close(j->dirfd);
		}
		rmdir(j->dir);
		free(j);
		return NULL;
	}
	pthread_mutex_init(&j->commit_lock, NULL);
	pthread_cond_init(&j->committed, NULL);
	return j;
}

static void remove_all(int dirfd)
{
	DIR *d = fdopendir(dup(dirfd));
	if (!d)
		return;
	rewinddir(d);
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd, e->d_name, 0);
	closedir(d);
}

void wb_journal_close(struct wb_journal *j, int keep)
{
	if (!j)
		return;
	if (!keep) {
		remove_all(j->dirfd);
		rmdir(j->dir);
		unlink(j->pointer);
	}
	close(j->dirfd);
	pthread_mutex_destroy(&j->commit_lock);
	pthread_cond_destroy(&j->committed);
	free(j);
}

static int link_fd(int fd, int dirfd, const char *name)
{
	char src[64];
	snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, src, dirfd, name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

/* A durable copy of fd's whole content as dirfd/name. */
static int put_copy(int fd, int dirfd, const char *name)
{
	struct stat st;
	int out = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	int r = fstat(fd, &st) < 0 ? -errno : sb_fd_copy(out, fd, st.st_size);
	if (r == 0 && fdatasync(out) < 0)
		r = -errno;
	if (r == 0)
		r = link_fd(out, dirfd, name);
	close(out);
	return r;
}

int64_t wb_journal_add(struct wb_journal *j, int fd, const char *relpath,
		       bool *copied)
{
	int64_t seq = atomic_fetch_add(&j->seq, 1) + 1;
	char data[48], rec[48];
	snprintf(data, sizeof data, "%lld.data", (long long)seq);
	snprintf(rec, sizeof rec, "%lld.path", (long long)seq);
	/* The data first: a name in the folder always holds durable data. */
	if (fdatasync(fd) < 0)
		return -errno;
	/* The kernel links an O_TMPFILE only while it never had a name:
	 * a spool whose earlier entry was removed after its upload goes in
	 * as a copy. */
	int r = link_fd(fd, j->dirfd, data);
	*copied = r == -ENOENT;
	if (*copied)
		r = put_copy(fd, j->dirfd, data);
	if (r < 0)
		return r;
	r = write_record(j->dirfd, rec, relpath);
	if (r == 0)
		r = journal_commit(j);
	if (r < 0) {
		unlinkat(j->dirfd, rec, 0);
		unlinkat(j->dirfd, data, 0);
		return r;
	}
	return seq;
}

int wb_journal_reopen(struct wb_journal *j, int64_t seq)
{
	char data[48];
	snprintf(data, sizeof data, "%lld.data", (long long)seq);
	return openat(j->dirfd, data, O_RDWR | O_CLOEXEC);
}

void wb_journal_entry_path(struct wb_journal *j, int64_t seq, char *buf,
			   size_t len)
{
	snprintf(buf, len, "%s/%lld.data", j->dir, (long long)seq);
}

void wb_journal_counts(struct wb_journal *j, uint64_t *entries,
		       uint64_t *fsyncs)
{
	fs_mutex_lock(&j->commit_lock, FS_LOCK_JOURNAL);
	*entries = j->staged;
	*fsyncs = j->fsyncs;
	fs_mutex_unlock(&j->commit_lock, FS_LOCK_JOURNAL);
}

int wb_journal_sync(struct wb_journal *j, int fd)
{
	(void)j;
	return fdatasync(fd) < 0 ? -errno : 0;
}

int wb_journal_rename(struct wb_journal *j, int64_t seq, const char *relpath)
{
	char rec[48];
	snprintf(rec, sizeof rec, "%lld.path", (long long)seq);
	return replace_record(j->dirfd, rec, relpath);
}

void wb_journal_remove(struct wb_journal *j, int64_t seq)
{
	char name[48];
	snprintf(name, sizeof name, "%lld.path", (long long)seq);
	unlinkat(j->dirfd, name, 0);
	snprintf(name, sizeof name, "%lld.data", (long long)seq);
	unlinkat(j->dirfd, name, 0);
}

/* ---- recovery ---- */

static bool owner_alive(int dirfd)
{
	char buf[32] = "", path[64], comm[32] = "";
	int fd = openat(dirfd, "owner", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	int pid = n > 0 ? atoi(buf) : 0;
	if (pid <= 0)
		return false;
	snprintf(path, sizeof path, "/proc/%d/comm", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool alive = fgets(comm, sizeof comm, f) && strncmp(comm, "sbfs", 4) == 0;
	fclose(f);
	/* A zombie is gone for our purposes. */
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (f) {
		char state = 0;
		if (fscanf(f, "%*d (%*[^)]) %c", &state) == 1 && state == 'Z')
			alive = false;
		fclose(f);
	}
	return alive;
}

/* A mount-relative path must stay inside the unsaved folder. */
static bool safe_relpath(const char *p)
{
	if (p[0] != '/' || strstr(p, "/../") || strstr(p, "//"))
		return false;
	size_t len = strlen(p);
	return len > 1 && !(len >= 3 && strcmp(p + len - 3, "/..") == 0) &&
	       strcmp(p, "/.") != 0;
}

static int copy_file(int srcdir, const char *name, const char *dst)
{
	int in = openat(srcdir, name, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0) {
		int e = -errno;
		close(in);
		return e;
	}
	struct stat st;
	int r = fstat(in, &st) < 0 ? -errno : sb_fd_copy(out, in, st.st_size);
	if (r == 0 && fsync(out) < 0)
		r = -errno;
	close(in);
	close(out);
	if (r < 0)
		unlink(dst);
	return r;
}

/* The file goes to its place by a rename (move) or a hard link; from
 * another file system, by a copy. */
static int place(int srcdir, const char *name, bool move, const char *dst)
{
	int r = move ? renameat(srcdir, name, AT_FDCWD, dst)
		     : linkat(srcdir, name, AT_FDCWD, dst, AT_SYMLINK_FOLLOW);
	if (r == 0)
		return 0;
	if (errno != EXDEV)
		return -errno;
	r = copy_file(srcdir, name, dst);
	if (r == 0 && move)
		unlinkat(srcdir, name, 0);
	return r;
}

int unsaved_save(int srcdir, const char *name, bool move, const char *relpath,
		 const char *dest, char *saved_as, size_t len)
{
	char dst[PATH_MAX];
	if (!safe_relpath(relpath))
		return -EINVAL;
	if (snprintf(dst, sizeof dst, "%s%s", dest, relpath) >= (int)sizeof dst)
		return -ENAMETOOLONG;
	int r = mkdir_parents(dst, false, false);
	if (r < 0)
		return r;
	/* Never overwrite what an earlier save put there. */
	size_t base = strlen(dst);
	for (int i = 1; access(dst, F_OK) == 0 && i < 1000; i++)
		if (snprintf(dst + base, sizeof dst - base, ".%d", i) >=
		    (int)(sizeof dst - base))
			return -ENAMETOOLONG;
	r = place(srcdir, name, move, dst);
	if (r == 0 && saved_as)
		snprintf(saved_as, len, "%s", dst);
	return r;
}

/* Saves the entries of the journal folder dir of mount name, if its
 * daemon is gone, and removes it and its pointer. missing_pointer: the
 * folder was found by a search of the spool folders, not by its pointer. */
static size_t recover_folder(const char *dir, const char *pointer,
			     const char *name, const char *state,
			     bool missing_pointer, FILE *out)
{
	int jfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (jfd < 0) {
		unlink(pointer); /* the folder went with its spool directory */
		return 0;
	}
	if (owner_alive(jfd)) {
		close(jfd);
		return 0;
	}
	char dest[PATH_MAX];
	if (snprintf(dest, sizeof dest, "%s/unsaved/%s", state, name) >=
	    (int)sizeof dest) {
		close(jfd);
		return 0;
	}
	size_t saved = 0, lost = 0;
	DIR *d = fdopendir(dup(jfd));
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 5, ".data") != 0)
			continue;
		if (missing_pointer && saved + lost == 0)
			fprintf(out, "sbfs: mount %s: found its write-back journal in "
				"%s without the pointer %s (lost in a crash?); "
				"saving its files\n", name, dir, pointer);
		char rec[300], rel[PATH_MAX] = "";
		snprintf(rec, sizeof rec, "%.*s.path", (int)(len - 5), e->d_name);
		ssize_t r = read_record(jfd, rec, rel, sizeof rel);
		if (r <= 0 || !safe_relpath(rel))
			snprintf(rel, sizeof rel, "/unnamed-%.*s", (int)(len - 5),
				 e->d_name);
		int sr = unsaved_save(jfd, e->d_name, true, rel, dest, NULL, 0);
		if (sr == 0) {
			saved++;
		} else {
			fprintf(out, "sbfs: mount %s: %s could not be saved in %s: %s\n",
				name, rel, dest, strerror(-sr));
			lost++;
		}
	}
	if (d)
		closedir(d);
	if (saved)
		fprintf(out, "sbfs: mount %s stopped with %zu file(s) not uploaded "
			"to its sandbox; saved in %s\n", name, saved, dest);
	if (lost) {
		fprintf(out, "sbfs: mount %s: %zu pending file(s) could not be "
			"moved; left in %s\n", name, lost, dir);
		close(jfd);
		return saved;
	}
	remove_all(jfd);
	close(jfd);
	rmdir(dir);
	unlink(pointer);
	return saved;
}

static size_t recover_one(const char *pointer, const char *name,
			  const char *state, FILE *out)
{
	char dir[PATH_MAX];
	/* A regular file; a symlink where an older sbfs made it. */
	ssize_t n = read_record(AT_FDCWD, pointer, dir, sizeof dir);
	if (n <= 0) {
		unlink(pointer);
		return 0;
	}
	return recover_folder(dir, pointer, name, state, false, out);
}

#define JOURNAL_PREFIX "sbfs-journal-"

/* The journals in spool folder spool whose pointer in the state folder
 * is gone, recovered. Only a folder that names its pointer there (made by
 * a mount of this state folder) and belongs to this user is touched. */
static size_t scan_spool_dir(const char *spool, const char *state, FILE *out)
{
	DIR *d = opendir(spool);
	if (!d)
		return 0;
	size_t saved = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, JOURNAL_PREFIX, strlen(JOURNAL_PREFIX)))
			continue;
		const char *name = e->d_name + strlen(JOURNAL_PREFIX);
		char dir[PATH_MAX], pointer[PATH_MAX], named[PATH_MAX];
		struct stat st;
		if (!*name ||
		    snprintf(dir, sizeof dir, "%s/%s", spool, e->d_name) >=
			    (int)sizeof dir ||
		    snprintf(pointer, sizeof pointer, "%s/journal/%s", state,
			     name) >= (int)sizeof pointer ||
		    lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != geteuid() || lstat(pointer, &st) == 0)
			continue;
		int jfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
		if (jfd < 0)
			continue;
		ssize_t n = read_record(jfd, "pointer", named, sizeof named);
		close(jfd);
		if (n > 0 && strcmp(named, pointer) == 0)
			saved += recover_folder(dir, pointer, name, state, true, out);
	}
	closedir(d);
	return saved;
}

static size_t scan_spool_dirs(const char *state, FILE *out)
{
	size_t saved = scan_spool_dir(wb_default_spool_dir(), state, out);
	char list[PATH_MAX + 16], line[PATH_MAX + 2];
	snprintf(list, sizeof list, "%s/" SPOOL_DIRS_FILE, state);
	FILE *f = fopen(list, "re");
	while (f && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '/')
			saved += scan_spool_dir(line, state, out);
	}
	if (f)
		fclose(f);
	return saved;
}

size_t wb_journal_recover(FILE *out)
{
	char state[PATH_MAX], jdir[PATH_MAX + 16];
	wb_state_dir(state, sizeof state);
	snprintf(jdir, sizeof jdir, "%s/journal", state);
	size_t saved = 0;
	DIR *d = opendir(jdir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		/* A pointer being written (write_durable) is no pointer yet;
		 * the search of the spool folders finds its journal. */
		if (e->d_name[0] == '.' ||
		    (len > 4 && !strcmp(e->d_name + len - 4, ".tmp")))
			continue;
		char pointer[PATH_MAX * 2];
		snprintf(pointer, sizeof pointer, "%s/%s", jdir, e->d_name);
		saved += recover_one(pointer, e->d_name, state, out);
	}
	if (d)
		closedir(d);
	return saved + scan_spool_dirs(state, out);
}
