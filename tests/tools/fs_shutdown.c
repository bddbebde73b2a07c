/* fs_shutdown: shuts the file system holding PATH down at once, as a
 * power cut would: EXT4_IOC_SHUTDOWN with EXT4_GOING_FLAGS_NOLOGFLUSH
 * (the same ioctl as XFS_IOC_GOINGDOWN), so what its journal has not
 * committed yet is lost, and every later call on it fails with EIO. The
 * e2e suite's power-cut test (lose_nothing.bats) runs it on ext4 images.
 * Needs CAP_SYS_ADMIN. Definitions from linux/fs/ext4/ext4.h.
 *
 *   fs_shutdown PATH
 *
 * Exit status 0 when it is down, 1 with the reason otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define EXT4_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#define EXT4_GOING_FLAGS_NOLOGFLUSH 0x2

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fs_shutdown PATH\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "fs_shutdown: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	uint32_t how = EXT4_GOING_FLAGS_NOLOGFLUSH;
	if (ioctl(fd, EXT4_IOC_SHUTDOWN, &how) < 0) {
		fprintf(stderr, "fs_shutdown: cannot shut down the file system of %s: %s\n",
			argv[1], strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	return 0;
}
