/* The client half of the control protocol, shared by sbexec and
 * `sbfs status|sync|refresh`: find the mount, reach its daemon, make a
 * request. Every error is one line, prefixed with the program's name. */
#ifndef SBFS_CONTROL_CLIENT_H
#define SBFS_CONTROL_CLIENT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct control_target {
	char mount[PATH_MAX];  /* the mountpoint, physical */
	char socket[PATH_MAX]; /* the daemon's control socket */
	char rel[PATH_MAX];    /* dir relative to the mount root; "" = root */
};

/* Finds the mount and its socket. explicit_mount: the -m argument, or NULL
 * to use the longest fuse.sbfs mountpoint that contains dir. dir: an
 * absolute physical path whose mount-relative form goes into t->rel, or
 * NULL for the current directory. prog names the caller in messages.
 * 0, or -1 with a one-line message in err. */
int control_find_mount(const char *prog, const char *explicit_mount,
		       const char *dir, struct control_target *t, char *err,
		       size_t errlen);

/* Connects to t->socket; the fd, or -1 with a message in err. */
int control_connect(const char *prog, const struct control_target *t,
		    char *err, size_t errlen);

/* `sbfs status|sync|refresh [PATH]`: mount may be NULL (found from the
 * current directory, or from path for refresh). status prints one line of
 * raw JSON with json, else readable text; sync and refresh print their raw
 * JSON reply with json, nothing without. Errors go to stderr. Returns a
 * process exit status: 0 ok, 1 error. */
int control_client_command(const char *mount, const char *op,
			   const char *path, bool json, FILE *out);

/* ---- exposed for tests ---- */

/* Decodes mountinfo's octal escapes (\040 for a space...) in place. */
void control_mountinfo_unescape(char *s);
/* The longest mountpoint of fstype fuse.sbfs in the mountinfo stream that
 * is dir or contains it. 0 with the mountpoint in out, or -1. */
int control_mountinfo_find(FILE *mountinfo, const char *dir, char *out,
			   size_t outlen);
/* Is path dir itself or below it? On success *rest is the part after
 * dir's trailing slash ("" for dir itself). */
bool control_path_within(const char *dir, const char *path, const char **rest);

#endif
