/* Native file operations of the local backend, done on the host workspace
 * directory. The guest is untrusted and can plant symlinks, so every path
 * is resolved beneath the workspace without following any symlink: the
 * parent with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|...), the last
 * component with *at calls that do not follow. Where the guest's own view
 * would follow a symlink (a link in the middle of the path, or writing
 * through a link), the operation is handed to the shell implementation,
 * which resolves it inside the sandbox where that is harmless. */
#include "local.h"
#include "backends/sandbox_limits.h"
#include "backends/shell_ops.h"
#include "util/fd_copy.h"
#include "util/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>


/* A guest path split into a safely opened parent dir and a last name. */
struct loc {
	int dirfd;
	char name[256];
};

const char *local_relative(struct sb_backend *b, const char *path)
{
	const char *wd = b->spec.workdir;
	size_t n = strlen(wd);
	while (n > 1 && wd[n - 1] == '/')
		n--;
	if (!path || strncmp(path, wd, n) != 0 || (path[n] && path[n] != '/'))
		return NULL;
	path += n;
	while (*path == '/')
		path++;
	return path;
}

/* The mount's own change to a path, marked for the watch from before its
 * syscalls until its result is known (own_changes.h). rel NULL: unwatched
 * or outside the workspace. */
struct own {
	const char *rel;
	bool marked;
};

static struct own own_begin(struct sb_backend *b, const char *path)
{
	struct local *l = b->priv;
	struct own o = {.rel = atomic_load(&l->watch) ? local_relative(b, path) : NULL};
	o.marked = o.rel && local_watch_begin(b, o.rel);
	return o;
}

/* rc: the change's result; what it left is read from fd, or from name in
 * dirfd (gone where that is ENOENT). */
static void own_end(struct sb_backend *b, const struct own *o, int rc, int dirfd,
		    const char *name, int fd)
{
	if (!o->rel)
		return;
	struct stat st;
	int s = rc < 0 ? -1
		: fd >= 0 ? fstat(fd, &st)
			  : fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW);
	bool gone = rc == 0 && s < 0 && errno == ENOENT;
	local_watch_end(b, o->rel, o->marked, s == 0 ? &st : NULL, gone);
}

int local_check_live(struct sb_backend *b)
{
	struct local *l = b->priv;
	/* A destroyed sandbox's workspace may still be open here: without
	 * this, calls would go on against a deleted directory. */
	pthread_mutex_lock(&l->lock);
	bool stopped = l->stopping;
	pthread_mutex_unlock(&l->lock);
	return stopped ? sb_backend_fail(b, "sandbox %s was destroyed", b->id) : 0;
}

static int open_beneath(int wsfd, const char *rel, int *out)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	int fd = (int)syscall(SYS_openat2, wsfd, *rel ? rel : ".", &how, sizeof(how));
	if (fd < 0)
		return -errno;
	*out = fd;
	return 0;
}

/* 0, -ELOOP (a symlink on the way: let the guest resolve it), or an errno. */
static int locate(struct sb_backend *b, const char *path, struct loc *lc)
{
	struct local *l = b->priv;
	int live = local_check_live(b);
	if (live < 0)
		return live;
	const char *rel = local_relative(b, path);
	if (!rel)
		return -EACCES;
	char buf[4096];
	size_t n = strlen(rel);
	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, rel, n + 1);
	while (n && buf[n - 1] == '/')
		buf[--n] = '\0';
	/* "." and ".." would let the *at call step outside what
	 * RESOLVE_BENEATH checked; the fs core never sends them */
	for (char *c = buf; *c;) {
		size_t len = strcspn(c, "/");
		if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return -EACCES;
		c += len;
		while (*c == '/')
			c++;
	}
	char *slash = strrchr(buf, '/');
	const char *name = slash ? slash + 1 : buf;
	if (!*name)
		name = "."; /* the workspace root itself */
	size_t namelen = strlen(name);
	if (namelen >= sizeof(lc->name))
		return -ENAMETOOLONG;
	memcpy(lc->name, name, namelen + 1);
	if (slash)
		*slash = '\0';
	else
		buf[0] = '\0';
	return open_beneath(l->ws_fd, buf, &lc->dirfd);
}

static bool is_root(const struct loc *lc)
{
	return strcmp(lc->name, ".") == 0;
}

/* What the daemon makes in the workspace belongs to the sandbox's user,
 * as what the sandbox makes itself (a root daemon's ids are no sandbox
 * ids). flags: AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH. */
static int give_to_sandbox(struct sb_backend *b, int dirfd, const char *name,
			   int flags)
{
	struct local *l = b->priv;
	if (!l->ids.mapped)
		return 0;
	uid_t uid = id_map_uid_host(&l->ids, b->guest_uid);
	gid_t gid = id_map_gid_host(&l->ids, b->guest_gid);
	return fchownat(dirfd, name, uid, gid, flags) < 0 ? -errno : 0;
}

/* Host ids as the sandbox sees them. */
static void show_guest_ids(struct sb_backend *b, struct stat *st)
{
	struct local *l = b->priv;
	st->st_uid = id_map_uid_guest(&l->ids, st->st_uid);
	st->st_gid = id_map_gid_guest(&l->ids, st->st_gid);
}

/* Creates the missing parent directories one component at a time, each
 * opened without following links. */
static int make_parents(struct sb_backend *b, const char *path)
{
	struct local *l = b->priv;
	int live = local_check_live(b);
	if (live < 0)
		return live;
	const char *rel = local_relative(b, path);
	if (!rel)
		return -EACCES;
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", rel);
	char *last = strrchr(buf, '/');
	if (!last)
		return 0;
	*last = '\0';
	int cur = dup(l->ws_fd);
	if (cur < 0)
		return -errno;
	for (char *c = strtok(buf, "/"); c; c = strtok(NULL, "/")) {
		if (strcmp(c, ".") == 0 || strcmp(c, "..") == 0) {
			close(cur);
			return -EACCES;
		}
		int made = mkdirat(cur, c, 0755) == 0;
		if (!made && errno != EEXIST) {
			int e = -errno;
			close(cur);
			return e;
		}
		int e = made ? give_to_sandbox(b, cur, c, AT_SYMLINK_NOFOLLOW) : 0;
		if (e < 0) {
			close(cur);
			return e;
		}
		int next = openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		e = -errno;
		close(cur);
		if (next < 0)
			return e;
		cur = next;
	}
	close(cur);
	return 0;
}

int local_write_file(struct sb_backend *b, struct sb_upload *u)
{
	const char *path = u->path;
	int fd = u->fd;
	off_t size = u->size;
	mode_t mode = u->mode;
	struct loc lc;
	int rc = locate(b, path, &lc);
	if (rc == -ENOENT && (rc = make_parents(b, path)) == 0)
		rc = locate(b, path, &lc);
	if (rc == -ELOOP)
		return shell_write_file(b, path, fd, size, mode);
	if (rc < 0)
		return rc;
	if (is_root(&lc)) {
		close(lc.dirfd);
		return -EISDIR;
	}
	struct own own = own_begin(b, path);
	bool created = true;
	int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int out = openat(lc.dirfd, lc.name, flags | O_CREAT | O_EXCL, mode & 07777);
	if (out < 0 && errno == EEXIST) {
		created = false;
		out = openat(lc.dirfd, lc.name, flags);
	}
	rc = out < 0 ? -errno : 0;
	close(lc.dirfd);
	struct stat st;
	if (rc == 0 && (fstat(out, &st) < 0 || !S_ISREG(st.st_mode)))
		rc = -EINVAL;
	if (rc == 0 && created) {
		fchmod(out, mode & 07777); /* exact, whatever our umask */
		rc = give_to_sandbox(b, out, "", AT_EMPTY_PATH);
	}
	if (rc == 0)
		rc = ftruncate(out, 0) < 0 ? -errno : sb_fd_copy(out, fd, size);
	if (rc == 0 && u->mtime.tv_nsec != UTIME_OMIT) {
		struct timespec ts[2] = {{0, UTIME_OMIT}, u->mtime};
		u->mtime_set = futimens(out, ts) == 0;
	}
	own_end(b, &own, rc, -1, NULL, out);
	if (out >= 0 && close(out) < 0 && rc == 0)
		rc = -errno;
	if (rc == -ELOOP) /* a link: the guest's write follows it, in the guest */
		return shell_write_file(b, path, fd, size, mode);
	return rc;
}

/* Host-side writes: one "call" however many files. */
int local_write_files(struct sb_backend *b, struct sb_upload *v, size_t n)
{
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		v[i].rc = local_write_file(b, &v[i]);
		if (v[i].rc < 0 && !first)
			first = v[i].rc;
	}
	return first;
}

static int stat_at(int dirfd, const char *name, struct stat *st,
		   char **link_target)
{
	if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (link_target && S_ISLNK(st->st_mode)) {
		char buf[4096];
		ssize_t n = readlinkat(dirfd, name, buf, sizeof(buf) - 1);
		if (n >= 0) {
			buf[n] = '\0';
			if (!(*link_target = strdup(buf)))
				return -ENOMEM;
		}
	}
	return 0;
}

int local_list_dir(struct sb_backend *b, const char *path,
		   struct sb_dirlist *out)
{
	struct loc lc;
	int rc = locate(b, path, &lc);
	if (rc == -ELOOP)
		return shell_list_dir(b, path, out);
	if (rc < 0)
		return rc;
	int dfd = openat(lc.dirfd, lc.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	rc = dfd < 0 ? -errno : 0;
	close(lc.dirfd);
	if (rc == -ELOOP) /* the directory itself is a link */
		return shell_list_dir(b, path, out);
	if (rc < 0)
		return rc;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	struct dirent *de;
	size_t bytes = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (out->n >= SB_LIMIT_LIST_ENTRIES || bytes > SB_LIMIT_LIST_BYTES) {
			sb_warn("local: listing of %s refused: more than %zu entries or %zu MiB (a cap against a hostile sandbox); look at it with sbexec",
				path, SB_LIMIT_LIST_ENTRIES, SB_LIMIT_LIST_BYTES >> 20);
			rc = -EFBIG;
			break;
		}
		struct stat st;
		char *target = NULL;
		int r = stat_at(dirfd(d), de->d_name, &st, &target);
		if (r == -ENOENT)
			continue; /* removed meanwhile */
		struct sb_dirent *e = r < 0 ? NULL : sb_dirlist_add(out, de->d_name);
		if (!e) {
			free(target);
			rc = r < 0 ? r : -ENOMEM;
			break;
		}
		show_guest_ids(b, &st);
		e->st = st;
		e->link_target = target;
		bytes += strlen(de->d_name) + (target ? strlen(target) : 0) +
			 sizeof *e;
	}
	closedir(d);
	return rc;
}

int local_stat_native(struct sb_backend *b, const char *path, struct stat *st,
		      char **link_target)
{
	if (link_target)
		*link_target = NULL;
	struct loc lc;
	int rc = locate(b, path, &lc);
	if (rc < 0)
		return rc;
	rc = stat_at(lc.dirfd, lc.name, st, link_target);
	close(lc.dirfd);
	if (rc == 0)
		show_guest_ids(b, st);
	return rc;
}

int local_stat(struct sb_backend *b, const char *path, struct stat *st,
	       char **link_target)
{
	int rc = local_stat_native(b, path, st, link_target);
	return rc == -ELOOP ? shell_stat(b, path, st, link_target) : rc;
}

/* The common shape: locate, hand links on the way to the guest, run op. */
#define WITH_LOC(path, shell_call, body)                  \
	do {                                              \
		struct loc lc;                            \
		int rc = locate(b, (path), &lc);          \
		if (rc == -ELOOP)                         \
			return shell_call;                \
		if (rc < 0)                               \
			return rc;                        \
		struct own own = own_begin(b, (path));    \
		rc = (body) < 0 ? -errno : 0;             \
		own_end(b, &own, rc, lc.dirfd, lc.name, -1); \
		close(lc.dirfd);                          \
		return rc;                                \
	} while (0)

int local_mkdir(struct sb_backend *b, const char *path, mode_t mode)
{
	WITH_LOC(path, shell_mkdir(b, path, mode),
		 mkdirat(lc.dirfd, lc.name, mode & 07777) < 0 ? -1
		 : give_to_sandbox(b, lc.dirfd, lc.name, AT_SYMLINK_NOFOLLOW) < 0 ? -1 : 0);
}

int local_remove(struct sb_backend *b, const char *path, bool is_dir)
{
	WITH_LOC(path, shell_remove(b, path, is_dir),
		 unlinkat(lc.dirfd, lc.name, is_dir ? AT_REMOVEDIR : 0));
}

/* Host-side mkdirs and removes: one "call" however many paths, each
 * resolved as local_mkdir and local_remove do (a link on the way goes to
 * the guest). */
int local_ns_many(struct sb_backend *b, struct sb_ns_change *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i].rc = v[i].make ? local_mkdir(b, v[i].path, v[i].mode)
				    : local_remove(b, v[i].path, v[i].is_dir);
	return 0;
}

int local_chmod(struct sb_backend *b, const char *path, mode_t mode)
{
	/* glibc does NOFOLLOW via an O_PATH fd (or fchmodat2), refusing
	 * only symlinks themselves, which have no mode to change */
	WITH_LOC(path, shell_chmod(b, path, mode),
		 fchmodat(lc.dirfd, lc.name, mode & 07777, AT_SYMLINK_NOFOLLOW));
}

int local_utimens(struct sb_backend *b, const char *path,
		  const struct timespec ts[2])
{
	WITH_LOC(path, shell_utimens(b, path, ts),
		 utimensat(lc.dirfd, lc.name, ts, AT_SYMLINK_NOFOLLOW));
}

int local_symlink(struct sb_backend *b, const char *target,
		  const char *linkpath)
{
	WITH_LOC(linkpath, shell_symlink(b, target, linkpath),
		 symlinkat(target, lc.dirfd, lc.name) < 0 ? -1
		 : give_to_sandbox(b, lc.dirfd, lc.name, AT_SYMLINK_NOFOLLOW) < 0 ? -1 : 0);
}

/* Host-side, in the sandbox's ids: an id outside its range is EINVAL, as
 * chown(2) answers for an id the caller's namespace does not map. */
int local_chown(struct sb_backend *b, const char *path, uid_t uid, gid_t gid)
{
	struct local *l = b->priv;
	uid_t huid = id_map_uid_host(&l->ids, uid);
	gid_t hgid = id_map_gid_host(&l->ids, gid);
	if ((huid == (uid_t)-1 && uid != (uid_t)-1) ||
	    (hgid == (gid_t)-1 && gid != (gid_t)-1))
		return -EINVAL;
	WITH_LOC(path, shell_chown(b, path, uid, gid),
		 fchownat(lc.dirfd, lc.name, huid, hgid, AT_SYMLINK_NOFOLLOW));
}

/* Both ends of a two-path call (link, rename): 0 with both located, or
 * the first error with neither held. */
static int locate_pair(struct sb_backend *b, const char *from, const char *to,
		       struct loc *a, struct loc *c)
{
	int rc = locate(b, from, a);
	if (rc == 0) {
		rc = locate(b, to, c);
		if (rc < 0)
			close(a->dirfd);
	}
	return rc;
}

int local_link(struct sb_backend *b, const char *from, const char *to,
	       struct stat *st)
{
	struct loc a, c;
	int rc = locate_pair(b, from, to, &a, &c);
	if (rc == -ELOOP)
		return shell_hardlink(b, from, to, st);
	if (rc < 0)
		return rc;
	/* no AT_SYMLINK_FOLLOW: a link to a symlink is to the symlink, as
	 * link(2) does on Linux */
	struct own of = own_begin(b, from), ot = own_begin(b, to);
	rc = linkat(a.dirfd, a.name, c.dirfd, c.name, 0) < 0 ? -errno : 0;
	own_end(b, &of, rc, a.dirfd, a.name, -1); /* its link count and ctime */
	own_end(b, &ot, rc, c.dirfd, c.name, -1);
	/* The new name's attributes, which the caller would otherwise ask
	 * for in a second call: a symlink's target is left to that call. */
	if (rc == 0 && stat_at(c.dirfd, c.name, st, NULL) == 0)
		show_guest_ids(b, st);
	else
		*st = (struct stat){0};
	close(a.dirfd);
	close(c.dirfd);
	return rc;
}

int local_truncate(struct sb_backend *b, const char *path, off_t size)
{
	struct loc lc;
	int rc = locate(b, path, &lc);
	if (rc == -ELOOP)
		return shell_truncate(b, path, size);
	if (rc < 0)
		return rc;
	/* O_NONBLOCK: a FIFO must not hang us; it is refused below */
	struct own own = own_begin(b, path);
	int fd = openat(lc.dirfd, lc.name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	rc = fd < 0 ? -errno : 0;
	close(lc.dirfd);
	struct stat st;
	if (rc == 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)))
		rc = -EINVAL;
	else if (rc == 0 && ftruncate(fd, size) < 0)
		rc = -errno;
	own_end(b, &own, rc, -1, NULL, fd);
	if (fd >= 0)
		close(fd);
	if (rc == -ELOOP)
		return shell_truncate(b, path, size);
	return rc == -ENXIO ? -EINVAL : rc;
}

int local_readlink(struct sb_backend *b, const char *path, char **target)
{
	*target = NULL;
	struct loc lc;
	int rc = locate(b, path, &lc);
	if (rc == -ELOOP)
		return shell_readlink(b, path, target);
	if (rc < 0)
		return rc;
	char buf[4096];
	ssize_t n = readlinkat(lc.dirfd, lc.name, buf, sizeof(buf) - 1);
	rc = n < 0 ? -errno : 0;
	close(lc.dirfd);
	if (rc < 0)
		return rc;
	buf[n] = '\0';
	*target = strdup(buf);
	return *target ? 0 : -ENOMEM;
}

int local_rename(struct sb_backend *b, const char *from, const char *to,
		 bool noreplace)
{
	struct loc a, c;
	int rc = locate_pair(b, from, to, &a, &c);
	if (rc == -ELOOP)
		return shell_rename(b, from, to, noreplace);
	if (rc < 0)
		return rc;
	struct own of = own_begin(b, from), ot = own_begin(b, to);
	rc = syscall(SYS_renameat2, a.dirfd, a.name, c.dirfd, c.name,
		     noreplace ? RENAME_NOREPLACE : 0) < 0 ? -errno : 0;
	own_end(b, &of, rc, a.dirfd, a.name, -1);
	own_end(b, &ot, rc, c.dirfd, c.name, -1);
	close(a.dirfd);
	close(c.dirfd);
	return rc;
}

int local_statfs(struct sb_backend *b, const char *path, struct statvfs *st)
{
	(void)path; /* one filesystem: the workspace's */
	struct local *l = b->priv;
	return fstatvfs(l->ws_fd, st) < 0 ? -errno : 0;
}
