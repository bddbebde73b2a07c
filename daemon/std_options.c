/* The mount options every file system takes (mount(8), fstab, FUSE):
 * passed to the kernel through libfuse, ignored where they only mean
 * something to mount(8), or refused with the reason. */
#include "options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kernel and libfuse act on these; sbfs only hands them on. */
static const char *const passed[] = {
	"ro", "rw", "exec", "noexec", "atime", "noatime", "diratime",
	"nodiratime", "relatime", "norelatime", "strictatime",
	"nostrictatime", "lazytime", "nolazytime", "sync", "async", "dirsync",
	"allow_other", "auto_unmount", "nosuid", "nodev",
	"default_permissions", /* always on: the kernel checks modes */
	NULL,
};

/* mount(8)'s and fstab's own words (mount.fuse3 passes some on). */
static const char *const for_mount[] = {
	"defaults", "auto", "noauto", "user", "nouser", "users", "owner",
	"group", "_netdev", "nofail",
	/* mount.fuse3 adds these for root; a sandbox's setuid file or
	 * device node must never act with this machine's rights, so the
	 * mount is nosuid,nodev whatever is asked */
	"suid", "dev",
	NULL,
};

static bool listed(const char *const *list, const char *key)
{
	for (size_t i = 0; list[i]; i++)
		if (!strcmp(list[i], key))
			return true;
	return false;
}

static int append_fuse_opt(struct mount_options *o, const char *key)
{
	size_t old = o->fuse_opts ? strlen(o->fuse_opts) : 0;
	char *s = realloc(o->fuse_opts, old + strlen(key) + 2);
	if (!s)
		return -1;
	sprintf(s + old, "%s%s", old ? "," : "", key);
	o->fuse_opts = s;
	return 0;
}

static int parse_id(const char *key, const char *val, long *out, char *err,
		    size_t errlen)
{
	char *end;
	errno = 0;
	long v = val ? strtol(val, &end, 10) : -1;
	if (!val || !*val || errno || *end || v < 0 || v > 0x7fffffffL) {
		snprintf(err, errlen, "-o %s needs a numeric id (-o %s=1000)", key, key);
		return -1;
	}
	*out = v;
	return 0;
}

int std_option_apply(struct mount_options *o, const char *key, const char *val,
		     char *err, size_t errlen)
{
	if (listed(passed, key) || listed(for_mount, key)) {
		if (val) {
			snprintf(err, errlen, "-o %s takes no value", key);
			return -1;
		}
		if (listed(passed, key) && append_fuse_opt(o, key) < 0) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		return 1;
	}
	if (!strncmp(key, "x-", 2) || !strcmp(key, "comment"))
		return 1; /* fstab annotations for other programs */
	if (!strcmp(key, "nonempty")) {
		o->nonempty = true;
		return 1;
	}
	if (!strcmp(key, "uid"))
		return parse_id(key, val, &o->owner_uid, err, errlen) < 0 ? -1 : 1;
	if (!strcmp(key, "gid"))
		return parse_id(key, val, &o->owner_gid, err, errlen) < 0 ? -1 : 1;
	if (!strcmp(key, "fsname") || !strcmp(key, "subtype")) {
		snprintf(err, errlen,
			 "-o %s is sbfs's own (it names the control socket in mount listings); leave it out",
			 key);
		return -1;
	}
	return 0;
}
