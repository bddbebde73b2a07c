/* The local backend's reads, done on the host: no command in the guest
 * per read. Every promise of the guest's read (backends/shell_read.c) is
 * kept: the file is reached beneath the workspace without following any
 * symlink, only a regular file is opened for reading (a FIFO, device or
 * socket is refused before it is opened, with the guest read's errno),
 * its identity is taken from the open file before any byte and again
 * after each segment, and nothing past the window or past the size the
 * first identity gave is read. A symlink on the way, a mount point or a
 * kernel without openat2 hands the read to the guest, which resolves the
 * path inside the sandbox, where that is harmless. */
#include "local.h"
#include "backends/shell_ops.h"
#include "backends/shell_run.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Bytes per pread: a bound on the daemon's memory per read in flight. */
#define READ_CHUNK ((size_t)1 << 20)

/* The kernel has no openat2 (before 5.6): a property of the machine. */
static atomic_bool no_openat2;

static int open_beneath(int wsfd, const char *rel, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)flags | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	int fd = (int)syscall(SYS_openat2, wsfd, *rel ? rel : ".", &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

/* Whether the sandbox's user could open it for reading. Unmapped, the
 * daemon is that user and open(2) itself answers. Mapped (a root
 * daemon), the sandbox's user is its namespace's root, which reads a file
 * whose owner and group the namespace maps, and any other only where its
 * mode lets others read. */
static bool guest_may_read(const struct local *l, const struct stat *st)
{
	if (!l->ids.mapped)
		return true;
	bool owner_mapped = st->st_uid >= l->ids.uid_base &&
			    st->st_uid - l->ids.uid_base < l->ids.count;
	bool group_mapped = st->st_gid >= l->ids.gid_base &&
			    st->st_gid - l->ids.gid_base < l->ids.count;
	return (owner_mapped && group_mapped) || (st->st_mode & S_IROTH);
}

/* What the guest's read refuses, with its errnos: `[ -d ]`, `[ -f ]`,
 * `[ -r ]`. */
static int refused(const struct local *l, const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode))
		return -EINVAL;
	return guest_may_read(l, st) ? 0 : -EACCES;
}

/* The file rel names, open for reading (the descriptor, or -errno), and
 * its attributes in st, taken from that descriptor. It is looked at
 * through an O_PATH descriptor first and opened through that one (our
 * own /proc/self/fd entry: the very inode looked at, whatever the name
 * holds by then), so nothing but a regular file is ever opened: opening
 * a FIFO would release a writer blocked on it, a device could act. */
static int open_regular(const struct local *l, const char *rel, struct stat *st)
{
	int pfd = open_beneath(l->ws_fd, rel, O_PATH | O_NOFOLLOW);
	if (pfd < 0)
		return pfd;
	int rc = fstat(pfd, st) < 0 ? -errno : refused(l, st);
	if (rc < 0) {
		close(pfd);
		return rc;
	}
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
	/* O_NONBLOCK, O_NOCTTY: belt and braces, it is a regular file */
	int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	int fd = open(self, flags);
	if (fd < 0 && errno == ENOENT) /* no /proc here: by its name again */
		fd = open_beneath(l->ws_fd, rel, flags | O_NOFOLLOW);
	else if (fd < 0)
		fd = -errno;
	close(pfd);
	if (fd < 0)
		return fd == -ENXIO ? -EINVAL : fd;
	struct stat seen = *st;
	rc = fstat(fd, st) < 0 ? -errno : refused(l, st);
	if (rc == 0 && (st->st_dev != seen.st_dev || st->st_ino != seen.st_ino))
		rc = -EAGAIN; /* replaced between the two opens (no /proc) */
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* The identity of an open file, as the fields the guest's line gives
 * (size first, then inode, mtime, ctime) and its device; equal lines mean
 * one version of the file. */
static void identity(const struct stat *st, char *out, size_t n)
{
	snprintf(out, n, "%lld %llu %llu %lld.%09ld %lld.%09ld",
		 (long long)st->st_size, (unsigned long long)st->st_ino,
		 (unsigned long long)st->st_dev, (long long)st->st_mtim.tv_sec,
		 st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec,
		 st->st_ctim.tv_nsec);
}

static int still_same(int fd, const char *ident)
{
	struct stat now;
	if (fstat(fd, &now) < 0)
		return -errno;
	char line[SB_IDENT_MAX];
	identity(&now, line, sizeof line);
	return strcmp(line, ident) == 0 ? 0 : -EAGAIN;
}

/* [lo, hi) of fd to the sink, a chunk at a time; *got counts it. A file
 * that ends early shrank while it was read. */
static int copy_range(int fd, off_t lo, off_t hi, char *buf,
		      const struct sb_read_sink *sink, size_t *got)
{
	for (off_t pos = lo; pos < hi;) {
		size_t want = (size_t)(hi - pos) < READ_CHUNK ? (size_t)(hi - pos)
							       : READ_CHUNK;
		ssize_t n = pread(fd, buf, want, pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EAGAIN;
		int rc = sink->data(sink->arg, pos, buf, (size_t)n);
		if (rc < 0)
			return rc;
		pos += n;
		*got += (size_t)n;
	}
	return 0;
}

/* The window over the open file, in the guest read's segments: the same
 * block grid (the window rounded out to READ_BLOCK, segments of
 * READ_SEGMENT_BLOCKS from its first block), so the checks fall where the
 * guest's would. */
static int read_window(int fd, const struct stat *st, off_t off, size_t len,
		       const struct sb_read_sink *sink, size_t *got)
{
	char ident[SB_IDENT_MAX];
	identity(st, ident, sizeof ident);
	off_t size = st->st_size;
	int rc = sink->ident(sink->arg, ident, size);
	if (rc < 0)
		return rc;
	uint64_t first = (uint64_t)off / READ_BLOCK;
	uint64_t last = ((uint64_t)off + len + READ_BLOCK - 1) / READ_BLOCK;
	off_t want_end = (uint64_t)off + len < (uint64_t)size ? off + (off_t)len : size;
	char *buf = NULL;
	for (uint64_t block = first; block < last && block * READ_BLOCK < (uint64_t)size;) {
		uint64_t seg_end = block + READ_SEGMENT_BLOCKS < last
					   ? block + READ_SEGMENT_BLOCKS : last;
		off_t lo = (off_t)(block * READ_BLOCK) > off ? (off_t)(block * READ_BLOCK) : off;
		off_t hi = (off_t)(seg_end * READ_BLOCK) < want_end
				   ? (off_t)(seg_end * READ_BLOCK) : want_end;
		if (lo < hi && !buf && !(buf = malloc(READ_CHUNK)))
			return -ENOMEM;
		rc = lo < hi ? copy_range(fd, lo, hi, buf, sink, got) : 0;
		if (rc == 0)
			rc = still_same(fd, ident);
		if (rc == 0 && sink->checked)
			rc = sink->checked(sink->arg, hi > off ? hi : off);
		if (rc < 0)
			break;
		block = seg_end;
	}
	free(buf);
	return rc;
}

int local_read(struct sb_backend *b, const char *path, off_t off, size_t len,
	       const struct sb_read_sink *sink, size_t *got)
{
	*got = 0;
	struct local *l = b->priv;
	const char *rel = local_relative(b, path);
	if (!rel || atomic_load(&no_openat2))
		return shell_read(b, path, off, len, sink, got);
	if (!shell_path_ok(path) || off < 0)
		return -EINVAL;
	int rc = local_check_live(b);
	if (rc < 0 || len == 0)
		return rc;
	struct stat st;
	int fd = open_regular(l, rel, &st);
	if (fd == -ENOSYS && !atomic_exchange(&no_openat2, true))
		sb_info("local: this kernel has no openat2; files are read in the sandbox");
	if (fd == -ELOOP || fd == -EXDEV || fd == -ENOSYS)
		return shell_read(b, path, off, len, sink, got);
	if (fd < 0)
		return fd;
	rc = read_window(fd, &st, off, len, sink, got);
	close(fd);
	if (rc < 0)
		*got = 0; /* as the guest's read: nothing counts of a failed one */
	return rc;
}
