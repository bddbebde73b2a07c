/* The local sandbox sees the host's /etc read-only, as its public
 * configuration (passwd, hosts, resolv.conf, certificates, alternatives).
 * What in it is not public (not readable by everyone: /etc/shadow, SSH
 * host keys, /etc/ssl/private, sudoers) is masked: the sandbox's root is
 * the daemon's own uid, so when sbfs runs as root it would otherwise read
 * them as their owner. It is left out of the sandbox's /etc altogether
 * (see etc_view_build). */
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

/* bwrap arguments that build the sandbox's view of root (the host's /etc)
 * without a mount over any masked entry, whose name would then show in
 * the sandbox's /proc/self/mountinfo: a read-only tmpfs at root holding
 * read-only binds of what is public, recreated symlinks, and directories
 * that hold something masked rebuilt the same way, one level down. What
 * is masked is simply absent. */
struct etc_view {
	char **args;   /* owned strings, in bwrap order */
	size_t n, cap;
};

/* 0 or -errno (a masks list too long, or out of memory). */
int etc_view_build(const char *root, struct etc_view *v);
void etc_view_free(struct etc_view *v);

#endif
