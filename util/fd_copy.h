/* Copying a file's bytes between two descriptors in the kernel. */
#ifndef SBFS_FD_COPY_H
#define SBFS_FD_COPY_H

#include <sys/types.h>

/* Copies bytes [0, size) of src to the same offsets of dst: with
 * copy_file_range (a reflink where the file system has them), else read
 * and write. 0, or -errno; -EIO when src is shorter than size. */
int sb_fd_copy(int dst, int src, off_t size);

#endif
