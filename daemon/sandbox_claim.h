/* One mount per sandbox. A second mount of a sandbox already mounted
 * (attach=ID) would see it destroyed under it when the first unmounts,
 * and neither mount knows of the other's files. */
#ifndef SBFS_SANDBOX_CLAIM_H
#define SBFS_SANDBOX_CLAIM_H

#include <stddef.h>

/* Claims sandbox id of backend for the mount at mountpoint, for as long
 * as this process runs or until sandbox_claim_drop: a file in the state
 * directory, locked (flock), that names the mount. A claim whose daemon
 * died is free again (the kernel drops its lock). The fd to pass to
 * sandbox_claim_drop; -1 when the claim could not be recorded (a warning
 * is logged; the mount goes on); -2 with a one-line err when another
 * mount holds the sandbox. */
int sandbox_claim(const char *backend, const char *id, const char *mountpoint,
		  char *err, size_t errlen);

/* Gives the claim up (unmount): removes the file, then the lock. */
void sandbox_claim_drop(int fd, const char *backend, const char *id);

#endif
