/* The spool's own I/O, one seam: what the spool does to its disk (make a
 * file, write, give blocks back, cut, ask for room) goes through these
 * calls, so a unit test can put a full disk or a descriptor limit under
 * the fs core, as SQLite's test_vfs.c wraps its VFS to inject a full disk
 * (https://sqlite.org/src/file/src/test_vfs.c). Process-wide: a spool
 * does not know its fs. */
#ifndef SBFS_SPOOL_IO_H
#define SBFS_SPOOL_IO_H

#include <stdint.h>
#include <sys/types.h>

struct spool_io {
	/* A new unnamed file in dir: its descriptor, or -1 with errno. */
	int (*open)(const char *dir);
	int (*close)(int fd);
	/* As pwrite(2): a short count where the disk filled part way. */
	ssize_t (*pwrite)(int fd, const void *buf, size_t len, off_t off);
	/* Gives back the blocks of [off, off + len), the size kept. 0 or -1
	 * with errno. */
	int (*punch)(int fd, off_t off, off_t len);
	int (*truncate)(int fd, off_t size);
	/* Bytes free on the disk fd's file is on, or -1 with errno. */
	int64_t (*room)(int fd);
};

/* The I/O spools use now. */
const struct spool_io *spool_io(void);
/* Puts io under every spool from now on (NULL: the real disk again);
 * for tests, with no spool in use. */
void spool_io_set(const struct spool_io *io);
/* The real disk's calls, for a wrapper to pass on to. */
extern const struct spool_io spool_io_disk;

#endif
