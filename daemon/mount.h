#ifndef SBFS_MOUNT_H
#define SBFS_MOUNT_H

#include "options.h"

/* Provisions, mounts and serves until unmounted; returns the process exit
 * status (0 clean, 1 on failure or data that could not be uploaded). */
int sbfs_mount_run(struct mount_options *o);

#endif
