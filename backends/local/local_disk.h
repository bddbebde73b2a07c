/* -o disk=SIZE on the local backend: the workspace is an ext4 file system
 * in a sparse image file beside it (<workspace>.img), loop-mounted at the
 * workspace directory, so a sandbox that fills it gets ENOSPC and the
 * host's disk holds at most SIZE for it. A disk image rather than a
 * tmpfs with size=: a large workspace must not land in RAM (and swap) by
 * surprise, and the image survives -o keep. Mounting needs root. */
#ifndef SBFS_BACKENDS_LOCAL_DISK_H
#define SBFS_BACKENDS_LOCAL_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOCAL_DISK_MIN_MIB 16 /* ext4 with a journal needs a few MiB itself */

/* Why the limit cannot be enforced here, or NULL when it can. */
const char *local_disk_unenforceable(uint64_t mib);
/* Makes the image of mib MiB and mounts it at host_dir (an empty
 * directory), owned by uid:gid, mode 0700. 0, or -errno with a one-line
 * reason in err. */
int local_disk_create(const char *host_dir, uint64_t mib, char *err,
		      size_t errlen);
/* The workspace host_dir has an image. */
bool local_disk_exists(const char *host_dir);
/* Mounts host_dir's existing image unless it is mounted already. */
int local_disk_mount(const char *host_dir, char *err, size_t errlen);
/* Unmounts host_dir if it is a mount point (lazily when busy). */
void local_disk_unmount(const char *host_dir);
/* Unmounts and deletes the image (the directory is the caller's). */
void local_disk_remove(const char *host_dir);

#endif
