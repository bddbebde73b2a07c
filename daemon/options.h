/* Command-line options of `sbfs MOUNTPOINT`: the sandbox spec, the cache
 * settings and the daemon's own. */
#ifndef SBFS_OPTIONS_H
#define SBFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backends/backend.h"

struct mount_options {
	const struct sb_backend_ops *backend;
	struct sb_spec spec;
	char *mountpoint;     /* absolute */
	bool foreground;
	bool debug;
	bool shell_ops;
	unsigned inject_latency_ms;
	struct fault_plan *inject_faults; /* testing aid; owned until mounted */
	double call_timeout;              /* 0 = SB_CALL_TIMEOUT_DEFAULT_S */
	double attr_timeout;
	double dir_timeout;
	size_t max_nodes;     /* bound of the node cache */
	char *spool_dir;
	char *log_path;
	bool writeback;       /* -o writeback: uploads after close() returns */
	/* the backend's change notifications: -o watch, -o nowatch, or by
	 * default wherever the backend has them */
	enum { WATCH_DEFAULT, WATCH_ON, WATCH_OFF } watch;
	bool timeouts_set;    /* -o attr_timeout or dir_timeout given */
	bool idmap_none;      /* -o idmap=none: ids as the sandbox has them */
	int log_level;        /* enum sb_log_level; -1: info (debug with -d) */
	/* Standard mount options (std_options.c) */
	char *fuse_opts;      /* handed to the kernel through libfuse; NULL: none */
	bool nonempty;        /* mount over a directory that has files */
	long owner_uid, owner_gid; /* -o uid=, gid=: whom the sandbox's user
				    * shows as; -1: the mounting user */
};

/* One standard mount option (ro, allow_other, noauto, uid=...): 1 when
 * it is one (applied or ignored), 0 when it is not, -1 with a reason in
 * err when it is refused. */
int std_option_apply(struct mount_options *o, const char *key, const char *val,
		     char *err, size_t errlen);

/* Parses argv (after the program name) over the defaults of the config
 * file (config_file.c). 0, 1 when --help/--version was printed, or -1
 * with a one-line message in err. */
int mount_options_parse(int argc, char **argv, struct mount_options *o,
			char *err, size_t errlen);
void mount_options_free(struct mount_options *o);
/* One KEY[=VALUE] option, as -o gives it (opt is modified). 0 or -1 with
 * err. */
int mount_option_apply(struct mount_options *o, char *opt, char *err,
		       size_t errlen);
/* The options of the config file ($XDG_CONFIG_HOME/sbfs/config, else
 * ~/.config/sbfs/config; $SBFS_CONFIG names another) that apply to
 * section: NULL for the lines before any [BACKEND] header, else that
 * backend's. A missing file is no error. 0, or -1 with err naming the
 * file and line. */
int config_file_apply(struct mount_options *o, const char *section,
		      char *err, size_t errlen);
void mount_options_usage(FILE *out);

#endif
