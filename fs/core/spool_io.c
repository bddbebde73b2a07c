#include "spool_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int disk_open(const char *dir)
{
	return open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

static ssize_t disk_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	return pwrite(fd, buf, len, off);
}

static int disk_punch(int fd, off_t off, off_t len)
{
	return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
}

static int64_t disk_room(int fd)
{
	struct statvfs sv;
	if (fstatvfs(fd, &sv) < 0)
		return -1;
	return (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
}

const struct spool_io spool_io_disk = {
	.open = disk_open,
	.close = close,
	.pwrite = disk_pwrite,
	.punch = disk_punch,
	.truncate = ftruncate,
	.room = disk_room,
};

static _Atomic(const struct spool_io *) current = &spool_io_disk;

const struct spool_io *spool_io(void)
{
	return atomic_load(&current);
}

void spool_io_set(const struct spool_io *io)
{
	atomic_store(&current, io ? io : &spool_io_disk);
}
