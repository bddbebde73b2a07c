/* The one-entry tar stream that the Docker archive upload (PUT
 * /containers/{id}/archive) takes: header blocks built here, the file's
 * bytes streamed by the caller, then padding and the end-of-archive
 * blocks. ustar, with a pax extended header when the name is longer than
 * ustar's 100 bytes or the size does not fit its 11 octal digits (8 GiB). */
#ifndef SBFS_BACKENDS_DOCKER_TAR_H
#define SBFS_BACKENDS_DOCKER_TAR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define DK_TAR_BLOCK 512
/* Room enough for every header dk_tar_file_header writes. */
#define DK_TAR_HEADER_MAX (4 * DK_TAR_BLOCK)
#define DK_TAR_NAME_MAX 255

/* Writes the header block(s) of a regular file entry into out (at least
 * DK_TAR_HEADER_MAX bytes) and returns their length, a multiple of 512;
 * -ENAMETOOLONG or -EINVAL for a name that is empty, has a '/' or a NUL,
 * or is longer than DK_TAR_NAME_MAX. */
ssize_t dk_tar_file_header(char *out, const char *name, mode_t mode,
			   uint64_t size, time_t mtime, unsigned uid,
			   unsigned gid);
/* The same for an entry of a many-file archive: relpath is relative to
 * the extraction directory and may have '/' (every component a plain
 * name: no "", "." or ".."); at most DK_TAR_PATH_MAX bytes. */
#define DK_TAR_PATH_MAX 900
ssize_t dk_tar_path_header(char *out, const char *relpath, mode_t mode,
			   uint64_t size, time_t mtime, unsigned uid,
			   unsigned gid);
/* Zero bytes after size bytes of data to reach a block boundary. */
size_t dk_tar_pad(uint64_t size);
/* Length of the end-of-archive marker (two zero blocks). */
#define DK_TAR_TRAILER (2 * DK_TAR_BLOCK)

#endif
