/* Command-line options of `sbfs MOUNTPOINT`: the sandbox spec, the cache
 * settings and the daemon's own. */
#ifndef SBFS_OPTIONS_H
#define SBFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../backends/backend.h"

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
	bool idmap_none;      /* -o idmap=none: ids as the sandbox has them */
};

/* Parses argv (after the program name). 0, 1 when --help/--version was
 * printed, or -1 with a one-line message in err. */
int mount_options_parse(int argc, char **argv, struct mount_options *o,
			char *err, size_t errlen);
void mount_options_free(struct mount_options *o);
void mount_options_usage(FILE *out);

#endif
