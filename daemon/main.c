/* sbfs: mount a sandbox's workspace, or talk to a running mount. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../control/client.h"
#include "../fs/wb_journal.h"
#include "../util/log.h"
#include "mount.h"
#include "options.h"

static int usage_error(const char *msg)
{
	fprintf(stderr, "sbfs: %s (see sbfs --help)\n", msg);
	return 2;
}

/* status|sync|refresh [--json] [MOUNT [PATH]] */
static int client_command(const char *op, int argc, char **argv)
{
	bool json = false;
	const char *mount = NULL, *path = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (argv[i][0] == '-' && argv[i][1])
			return usage_error("unknown option for this command");
		else if (!mount)
			mount = argv[i];
		else if (!path && !strcmp(op, "refresh"))
			path = argv[i];
		else
			return usage_error("too many arguments");
	}
	return control_client_command(mount, op, path, json, stdout);
}

static int sweep_command(int argc, char **argv)
{
	struct mount_options o;
	char err[512];
	/* sweep takes the same -o options; a dummy mountpoint satisfies the
	 * parser, which wants one. */
	char **args = calloc((size_t)argc + 2, sizeof *args);
	if (!args)
		return 1;
	for (int i = 0; i < argc; i++)
		args[i] = argv[i];
	args[argc] = "/";
	int r = mount_options_parse(argc + 1, args, &o, err, sizeof err);
	free(args);
	if (r != 0) {
		if (r < 0)
			fprintf(stderr, "sbfs: %s\n", err);
		return r < 0 ? 2 : 0;
	}
	int status = 0;
	if (!o.backend->sweep) {
		fprintf(stderr, "sbfs: backend '%s' has nothing to sweep (its sandboxes die with their daemon)\n",
			o.backend->name);
	} else if (o.backend->sweep(&o.spec) < 0) {
		status = 1;
	}
	mount_options_free(&o);
	return status;
}

int main(int argc, char **argv)
{
	sb_log_set_prefix("sbfs");
	if (argc >= 2) {
		const char *cmd = argv[1];
		/* Files a killed write-back daemon left queued are saved and
		 * named by the next status, sweep or mount. */
		if (!strcmp(cmd, "status") || !strcmp(cmd, "sweep"))
			wb_journal_recover(stderr);
		if (!strcmp(cmd, "status") || !strcmp(cmd, "sync") ||
		    !strcmp(cmd, "refresh"))
			return client_command(cmd, argc - 2, argv + 2);
		if (!strcmp(cmd, "sweep"))
			return sweep_command(argc - 2, argv + 2);
	}
	struct mount_options o;
	char err[512];
	int r = mount_options_parse(argc - 1, argv + 1, &o, err, sizeof err);
	if (r != 0) {
		if (r < 0)
			fprintf(stderr, "sbfs: %s\n", err);
		mount_options_free(&o);
		return r < 0 ? 2 : 0;
	}
	wb_journal_recover(stderr);
	int status = sbfs_mount_run(&o);
	mount_options_free(&o);
	return status;
}
