/* The client half of the control protocol, shared by sbexec and
 * `sbfs status|sync|refresh`: find the mount, reach its daemon, make a
 * request. Every error is one line, prefixed with the program's name. */
#ifndef SBFS_CONTROL_CLIENT_H
#define SBFS_CONTROL_CLIENT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/* How long a status request waits for its answer: a stopped daemon must
 * not hang `sbfs status` or `sbfs list`. */
#define CONTROL_STATUS_TIMEOUT_S 10

struct control_target {
	char mount[PATH_MAX];  /* the mountpoint, physical */
	char socket[PATH_MAX]; /* the daemon's control socket */
	char rel[PATH_MAX];    /* dir relative to the mount root; "" = root */
	int reply_timeout_s;   /* control_request's wait for the answer; 0 = none */
};

/* Finds the mount and its socket (named by the mount's source in
 * mountinfo: no request to the mount). explicit_mount: the -m argument
 * (the mount or a folder in it), or NULL for the mount that dir is in. dir: an
 * absolute physical path whose mount-relative form goes into t->rel, or
 * NULL for the current directory. prog names the caller in messages.
 * 0, or -1 with a one-line message in err. */
int control_find_mount(const char *prog, const char *explicit_mount,
		       const char *dir, struct control_target *t, char *err,
		       size_t errlen);

/* Connects to t->socket; the fd, or -1 with a message in err. */
int control_connect(const char *prog, const struct control_target *t,
		    char *err, size_t errlen);

struct frame;
/* Sends request op (with the mount-relative path rel, unless NULL) and
 * reads the first reply into f (frame_free it). The reply object, with the
 * connection left open in *fdp for what else the daemon sends; NULL with a
 * one-line message in err (the daemon's error, or why there was no
 * answer). */
json_t *control_request(const struct control_target *t, const char *op,
			const char *rel, int *fdp, struct frame *f, char *err,
			size_t errlen);

/* `sbfs status|sync|refresh [PATH]`: mount may be NULL (found from the
 * current directory, or from path for refresh). status prints one line of
 * raw JSON with json, else readable text; sync and refresh print their raw
 * JSON reply with json, nothing without. Errors go to stderr. Returns a
 * process exit status: 0 ok, 1 error. */
int control_client_command(const char *mount, const char *op,
			   const char *path, bool json, FILE *out);

/* `sbfs umount [-l] MOUNT` (mount NULL: the one the current directory is
 * in): unmounts, waits until the daemon has uploaded or saved what was
 * pending and destroyed (or kept) the sandbox, prints what it reported
 * (json: its raw report). Returns the daemon's exit status, or 1. */
int control_client_unmount(const char *mount, bool lazy, bool json, FILE *out);

/* The mountpoints of every sbfs mount this process can see, in mount
 * order; a NULL-terminated malloc'd array of malloc'd strings (NULL only
 * when out of memory). */
char **control_sbfs_mounts(void);

/* The status object mount's daemon reports, with "mount" set; when it
 * does not answer, one with state "unreachable" and the reason. */
json_t *control_mount_status(const char *mount);

/* `sbfs list [--json]`: every sbfs mount with its backend, sandbox,
 * state, age and pending uploads, as its daemon reports them, then each
 * of unmounted (objects with backend, sandbox, state, started, mount
 * null; may be NULL) that no mount shows. Returns a process exit
 * status. */
int control_client_list(bool json, json_t *unmounted, FILE *out);

/* ---- exposed for tests ---- */

/* Decodes mountinfo's octal escapes (\040 for a space...) in place. */
void control_mountinfo_unescape(char *s);
/* The mount that dir is in, from a mountinfo stream: the longest
 * mountpoint that is dir or contains it. 0 with the mountpoint in out and
 * its source in src (when not NULL) if it is an sbfs mount, else -1. */
int control_mountinfo_find(FILE *mountinfo, const char *dir, char *out,
			   size_t outlen, char *src, size_t srclen);
/* The longest sbfs mountpoint in the mountinfo stream that is dir or
 * contains it, even with another mount between them. 0 with it in out, or
 * -1. */
int control_mountinfo_sbfs_ancestor(FILE *mountinfo, const char *dir,
				    char *out, size_t outlen);
/* The mount table read to find mounts: /proc/self/mountinfo; tests point
 * it at a file of their own. */
extern const char *control_mountinfo_path;
/* Is path dir itself or below it? On success *rest is the part after
 * dir's trailing slash ("" for dir itself). */
bool control_path_within(const char *dir, const char *path, const char **rest);

#endif
