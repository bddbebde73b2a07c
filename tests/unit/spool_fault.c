#include "tests/unit/spool_fault.h"
#include "fs/core/spool_io.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>

#define MAX_TRACKED 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t disk_cap;
static unsigned open_cap;
static int fds[MAX_TRACKED];
static unsigned nfds;
static unsigned long enospc, emfile;

/* Bytes the tracked spools hold on disk. lock held. */
static int64_t used(void)
{
	int64_t sum = 0;
	for (unsigned i = 0; i < nfds; i++) {
		struct stat st;
		if (fstat(fds[i], &st) == 0)
			sum += (int64_t)st.st_blocks * 512;
	}
	return sum;
}

static int fault_open(const char *dir)
{
	pthread_mutex_lock(&lock);
	int fd = -1;
	if ((open_cap && nfds >= open_cap) || nfds == MAX_TRACKED) {
		emfile++;
		errno = EMFILE;
	} else if ((fd = spool_io_disk.open(dir)) >= 0) {
		fds[nfds++] = fd;
	}
	int e = errno;
	pthread_mutex_unlock(&lock);
	errno = e;
	return fd;
}

static int fault_close(int fd)
{
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nfds; i++) {
		if (fds[i] == fd) {
			fds[i] = fds[--nfds];
			break;
		}
	}
	int r = spool_io_disk.close(fd);
	pthread_mutex_unlock(&lock);
	return r;
}

static ssize_t fault_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	pthread_mutex_lock(&lock);
	int64_t room = disk_cap ? disk_cap - used() : (int64_t)len;
	ssize_t r;
	if (room <= 0) {
		enospc++;
		errno = ENOSPC;
		r = -1;
	} else {
		r = spool_io_disk.pwrite(fd, buf, (int64_t)len < room ? len : (size_t)room, off);
	}
	int e = errno;
	pthread_mutex_unlock(&lock);
	errno = e;
	return r;
}

static int64_t fault_room(int fd)
{
	if (!disk_cap)
		return spool_io_disk.room(fd);
	pthread_mutex_lock(&lock);
	int64_t room = disk_cap - used();
	pthread_mutex_unlock(&lock);
	return room > 0 ? room : 0;
}

static int fault_punch(int fd, off_t off, off_t len)
{
	return spool_io_disk.punch(fd, off, len);
}

static int fault_truncate(int fd, off_t size)
{
	return spool_io_disk.truncate(fd, size);
}

static const struct spool_io fault_io = {
	.open = fault_open,
	.close = fault_close,
	.pwrite = fault_pwrite,
	.punch = fault_punch,
	.truncate = fault_truncate,
	.room = fault_room,
};

void spool_fault_install(int64_t disk_bytes, unsigned max_open)
{
	pthread_mutex_lock(&lock);
	disk_cap = disk_bytes;
	open_cap = max_open;
	nfds = 0;
	enospc = emfile = 0;
	pthread_mutex_unlock(&lock);
	spool_io_set(&fault_io);
}

void spool_fault_remove(void)
{
	spool_io_set(NULL);
}

unsigned long spool_fault_enospc(void)
{
	pthread_mutex_lock(&lock);
	unsigned long n = enospc;
	pthread_mutex_unlock(&lock);
	return n;
}

unsigned long spool_fault_emfile(void)
{
	pthread_mutex_lock(&lock);
	unsigned long n = emfile;
	pthread_mutex_unlock(&lock);
	return n;
}

int64_t spool_fault_used(void)
{
	pthread_mutex_lock(&lock);
	int64_t n = used();
	pthread_mutex_unlock(&lock);
	return n;
}
