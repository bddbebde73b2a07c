/* sbfs: mount a sandbox's workspace, or talk to a running mount. */
#include <limits.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "control/client.h"
#include "control/progress.h"
#include "fs/core/fs.h"
#include "fs/writeback/wb_journal.h"
#include "util/log.h"
#include "list_owned.h"
#include "mount.h"
#include "options.h"

static int usage_error(const char *msg)
{
	fprintf(stderr, "sbfs: %s (see sbfs --help)\n", msg);
	return 2;
}

/* status|sync|refresh [--json] [MOUNT [PATH]]; status --watch, sync
 * --progress */
static int client_command(const char *op, int argc, char **argv)
{
	bool json = false, progress = false;
	const char *mount = NULL, *path = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if ((!strcmp(op, "status") && !strcmp(argv[i], "--watch")) ||
			 (!strcmp(op, "sync") && !strcmp(argv[i], "--progress")))
			progress = true;
		else if (argv[i][0] == '-' && argv[i][1])
			return usage_error("unknown option for this command");
		else if (!mount)
			mount = argv[i];
		else if (!path && !strcmp(op, "refresh"))
			path = argv[i];
		else
			return usage_error("too many arguments");
	}
	if (progress && json)
		return usage_error(!strcmp(op, "sync") ? "sync takes --progress or --json, not both"
						       : "status takes --watch or --json, not both");
	if (progress)
		return control_client_progress(mount, !strcmp(op, "sync"), stdout);
	return control_client_command(mount, op, path, json, stdout);
}

/* The mount showing sandbox id, if any, into mount. */
static bool sandbox_mounted(const char *id, char *mount, size_t len)
{
	char **mounts = control_sbfs_mounts();
	bool found = false;
	for (size_t i = 0; mounts && mounts[i]; i++) {
		json_t *st = found ? NULL : control_mount_status(mounts[i]);
		const char *sid = json_string_value(json_object_get(st, "sandbox"));
		if (sid && !strcmp(sid, id)) {
			found = true;
			snprintf(mount, len, "%s", mounts[i]);
		}
		json_decref(st);
		free(mounts[i]);
	}
	free(mounts);
	return found;
}

/* destroy [-o backend=NAME,...] ID: a kept sandbox, attached and
 * destroyed. */
static int destroy_command(int argc, char **argv)
{
	const char *id = NULL;
	char **args = calloc((size_t)argc + 2, sizeof *args);
	int n = 0;
	if (!args)
		return 1;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			args[n++] = argv[i++];
			args[n++] = argv[i];
		} else if (argv[i][0] == '-') {
			free(args);
			return usage_error("destroy takes -o options and one sandbox id");
		} else if (id) {
			free(args);
			return usage_error("destroy takes one sandbox id");
		} else {
			id = argv[i];
		}
	}
	if (!id) {
		free(args);
		return usage_error("destroy needs the sandbox id (sbfs destroy [-o backend=NAME] ID)");
	}
	args[n++] = "/"; /* the parser wants a mountpoint */
	struct mount_options o;
	char err[512];
	int r = mount_options_parse(n, args, &o, err, sizeof err);
	free(args);
	if (r != 0) {
		if (r < 0)
			fprintf(stderr, "sbfs: %s\n", err);
		mount_options_free(&o);
		return r < 0 ? 2 : 0;
	}
	char mount[PATH_MAX];
	if (sandbox_mounted(id, mount, sizeof mount)) {
		fprintf(stderr, "sbfs: sandbox %s is mounted at %s; `sbfs umount %s` destroys it\n",
			id, mount, mount);
		mount_options_free(&o);
		return 1;
	}
	free(o.spec.attach_id);
	o.spec.attach_id = strdup(id);
	struct sb_backend *b = sb_backend_create(o.backend, &o.spec, false, err, sizeof err);
	int status = 1;
	if (!b) {
		fprintf(stderr, "sbfs: cannot reach sandbox %s on backend %s: %s\n", id,
			o.backend->name, err);
	} else {
		b->spec.keep = false;
		if (sb_backend_destroy(b) == 0) {
			printf("sandbox %s destroyed\n", id);
			status = 0;
		}
	}
	mount_options_free(&o);
	return status;
}

/* list [--json] [-o backend=NAME,...]: -o narrows the sandboxes looked
 * up to that backend's, with those options (local_root=, ca_file=...). */
static int list_command(int argc, char **argv)
{
	bool json = false;
	char **args = calloc((size_t)argc + 2, sizeof *args);
	int n = 0;
	if (!args)
		return 1;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			args[n++] = argv[i++];
			args[n++] = argv[i];
		} else {
			free(args);
			return usage_error("list takes --json and -o options");
		}
	}
	struct mount_options o;
	bool only = n > 0;
	if (only) {
		char err[512];
		args[n++] = "/"; /* the parser wants a mountpoint */
		int r = mount_options_parse(n, args, &o, err, sizeof err);
		if (r != 0) {
			free(args);
			if (r < 0)
				fprintf(stderr, "sbfs: %s\n", err);
			mount_options_free(&o);
			return r < 0 ? 2 : 0;
		}
	}
	free(args);
	bool abandoned;
	json_t *kept = list_owned_sandboxes(only ? &o : NULL, &abandoned);
	int status = control_client_list(json, kept, stdout);
	json_decref(kept);
	if (only && !abandoned)
		mount_options_free(&o);
	return status;
}

/* umount [-l|--lazy] [--json] [MOUNT] */
static int umount_command(int argc, char **argv)
{
	bool lazy = false, json = false;
	const char *mount = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-l") || !strcmp(argv[i], "--lazy"))
			lazy = true;
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else if (argv[i][0] == '-' && argv[i][1])
			return usage_error("unknown option for umount (it takes -l and --json)");
		else if (!mount)
			mount = argv[i];
		else
			return usage_error("umount takes one mountpoint");
	}
	return control_client_unmount(mount, lazy, json, stdout);
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
		if (!strcmp(cmd, "umount") || !strcmp(cmd, "unmount"))
			return umount_command(argc - 2, argv + 2);
		if (!strcmp(cmd, "list"))
			return list_command(argc - 2, argv + 2);
		if (!strcmp(cmd, "destroy"))
			return destroy_command(argc - 2, argv + 2);
	}
	/* A word that names no directory is a mistyped command, never a
	 * mountpoint to be reported missing. */
	if (argc == 2 && argv[1][0] != '-' && !strchr(argv[1], '/') &&
	    access(argv[1], F_OK) < 0) {
		fprintf(stderr, "sbfs: '%s' is neither a command (status, sync, refresh, umount, list, destroy, sweep) "
			"nor an existing directory to mount on (see sbfs --help)\n", argv[1]);
		return 2;
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
	fs_raise_open_files_limit();
	int status = sbfs_mount_run(&o);
	mount_options_free(&o);
	return status;
}
