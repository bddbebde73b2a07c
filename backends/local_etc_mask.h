/* The local sandbox sees the host's /etc read-only, as its public
 * configuration (passwd, hosts, resolv.conf, certificates, alternatives).
 * What in it is not public (not readable by everyone: /etc/shadow, SSH
 * host keys, /etc/ssl/private, sudoers) is masked: the sandbox's root is
 * the daemon's own uid, so when sbfs runs as root it would otherwise read
 * them as their owner. A file is covered by an empty read-only file, a
 * directory by an empty tmpfs. */
#ifndef SBFS_LOCAL_ETC_MASK_H
#define SBFS_LOCAL_ETC_MASK_H

#include <stdbool.h>
#include <stddef.h>

struct etc_masks {
	char **paths;  /* absolute host paths to cover */
	bool *is_dir;
	size_t n, cap;
};

/* Collects every entry under root (not following symlinks, not descending
 * into what is masked) that others cannot read. 0 or -errno. */
int etc_masks_collect(const char *root, struct etc_masks *m);
void etc_masks_free(struct etc_masks *m);

#endif
