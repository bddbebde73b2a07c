/* The control server: a unix socket (mode 0600, owner-only, peer uid
 * checked) that `sbexec` and `sbfs status|sync|refresh` talk to. The daemon
 * keeps the credentials and the backend; clients are thin.
 *
 * An exec is a coherence point: flush_all runs before the command starts,
 * invalidate("") after it ends. */
#ifndef SBFS_CONTROL_SERVER_H
#define SBFS_CONTROL_SERVER_H

#include <jansson.h>
#include <stddef.h>

#include "backends/backend.h"

struct control_hooks {
	void *arg;
	/* Uploads every dirty file. 0, or -errno with a one-line reason. */
	int (*flush_all)(void *arg, char *msg, size_t msglen);
	/* Drops cached attributes, listings and the kernel's caches for the
	 * mount-relative path relpath and below ("" = everything). */
	void (*invalidate)(void *arg, const char *relpath);
	/* An sbexec command ended: forgets what it may have changed (all
	 * that is cached, unless the backend's watch reports changes). */
	void (*command_ended)(void *arg);
	/* Adds the fs core's figures (pending uploads, ...) to a status
	 * object. */
	void (*status)(void *arg, json_t *obj);
};

struct control_server;

/* Picks the socket path for a sandbox name: $XDG_RUNTIME_DIR/sbfs/NAME.sock,
 * /run/sbfs/NAME.sock for root, else /tmp/sbfs-UID/NAME.sock; the folder is
 * created mode 0700. Returns 0 or -errno. */
int control_socket_path(const char *name, char *buf, size_t len);

/* Binds and starts serving in its own threads. mount is the host
 * mountpoint (shown in status). NULL on failure with a reason in err. */
struct control_server *control_server_start(const char *socket_path,
					    const char *mount,
					    struct sb_backend *b,
					    const struct control_hooks *hooks,
					    char *err, size_t errlen);

/* The connection of the last `sbfs umount` request, for the teardown
 * report (control_write_unmount_report); the caller owns it. -1: none. */
int control_server_take_unmount_fd(struct control_server *s);

/* Kills running commands, closes every connection, joins the threads and
 * removes the socket. */
void control_server_stop(struct control_server *s);

/* A mount's source (mountinfo's field, fsname to libfuse) is this prefix
 * and its control socket's path: clients find the socket without a
 * request to the mount. */
#define SBFS_MOUNT_SOURCE_PREFIX "sbfs:"

#endif
