/* The local backend's user namespace when the daemon runs as root: the
 * sandbox's ids 0..count-1 are host ids base..base+count-1, so the
 * sandbox's root is no host user and host root's files on bound paths are
 * "other" to it. Without root the sandbox keeps bwrap's unprivileged user
 * namespace, where the user maps to itself (nothing here applies). */
#ifndef SBFS_BACKENDS_LOCAL_USERNS_H
#define SBFS_BACKENDS_LOCAL_USERNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Identity when !mapped. */
struct id_map {
	bool mapped;
	uid_t uid_base;
	gid_t gid_base;
	unsigned count;
};

/* Where no /etc/subuid (/etc/subgid) range is given for root. */
#define LOCAL_IDMAP_DEFAULT_BASE 100000u
#define LOCAL_IDMAP_DEFAULT_COUNT 65536u

/* The range for this daemon: none unless it runs as root; then root's
 * first range in /etc/subuid and /etc/subgid, else the default range,
 * refused (-EEXIST, one line in err) if a host user or group has an id
 * in it. */
int id_map_choose(struct id_map *m, char *err, size_t errlen);

/* A new user namespace with m's mapping, as an open /proc/PID/ns/user fd
 * (O_CLOEXEC), or a negative errno. */
int id_map_open_userns(const struct id_map *m);

/* Host ids of sandbox ids and back; (uid_t)-1 stays. A sandbox id outside
 * the range has no host id: -1 from the *_host calls, which callers turn
 * into EINVAL as chown(2) does. A host id outside the range shows as the
 * overflow id 65534, as the kernel shows it inside. */
uid_t id_map_uid_host(const struct id_map *m, uid_t guest);
gid_t id_map_gid_host(const struct id_map *m, gid_t guest);
uid_t id_map_uid_guest(const struct id_map *m, uid_t host);
gid_t id_map_gid_guest(const struct id_map *m, gid_t host);

#endif
