/* `sbfs list`: the sbfs mounts this machine shows, each as its daemon
 * reports it (a mount whose daemon is gone says so), then the sandboxes
 * without a mount that the caller found (kept ones). */
#include "client.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"

json_t *control_mount_status(const char *mount)
{
	char err[PATH_MAX * 2 + 256] = "";
	struct control_target t;
	struct frame f = {0};
	int fd = -1;
	json_t *st = NULL;
	if (control_find_mount("sbfs", mount, NULL, &t, err, sizeof err) == 0) {
		t.reply_timeout_s = CONTROL_STATUS_TIMEOUT_S;
		st = control_request(&t, "status", NULL, &fd, &f, err, sizeof err);
	}
	frame_free(&f);
	if (fd >= 0)
		close(fd);
	if (!st)
		st = json_pack("{s:s,s:s}", "state", "unreachable", "reason",
			       strncmp(err, "sbfs: ", 6) ? err : err + 6);
	json_object_set_new(st, "mount", json_string(mount));
	return st;
}

static void age(json_int_t started, char *buf, size_t len)
{
	if (started <= 0) {
		snprintf(buf, len, "-");
		return;
	}
	long s = (long)(time(NULL) - started);
	if (s < 120)
		snprintf(buf, len, "%lds", s);
	else if (s < 7200)
		snprintf(buf, len, "%ldm", s / 60);
	else if (s < 172800)
		snprintf(buf, len, "%ldh", s / 3600);
	else
		snprintf(buf, len, "%ldd", s / 86400);
}

/* Whether a mount of all shows that backend's sandbox id. */
static bool mounted(json_t *all, const char *backend, const char *id)
{
	size_t i;
	json_t *m;
	json_array_foreach(all, i, m) {
		const char *b = json_string_value(json_object_get(m, "backend"));
		const char *s = json_string_value(json_object_get(m, "sandbox"));
		if (b && s && !strcmp(b, backend) && !strcmp(s, id))
			return true;
	}
	return false;
}

int control_client_list(bool json, json_t *unmounted, FILE *out)
{
	char **mounts = control_sbfs_mounts();
	if (!mounts) {
		fprintf(stderr, "sbfs: out of memory\n");
		return 1;
	}
	json_t *all = json_array();
	for (size_t i = 0; mounts[i]; i++)
		json_array_append_new(all, control_mount_status(mounts[i]));
	/* A kept sandbox mounted again (attach=) is listed once, as a mount. */
	size_t nmounts = json_array_size(all), i;
	json_t *m;
	json_array_foreach(unmounted, i, m) {
		const char *b = json_string_value(json_object_get(m, "backend"));
		const char *s = json_string_value(json_object_get(m, "sandbox"));
		if (b && s && !mounted(all, b, s))
			json_array_append(all, m);
	}
	if (json) {
		char *s = json_dumps(all, JSON_COMPACT);
		fprintf(out, "%s\n", s ? s : "[]");
		free(s);
	} else if (json_array_size(all) == 0) {
		fprintf(out, "no sbfs mounts or kept sandboxes\n");
	} else {
		fprintf(out, "%-8s %-24s %-11s %5s %7s  %s\n", "BACKEND", "SANDBOX",
			"STATE", "AGE", "PENDING", "MOUNT");
		json_array_foreach(all, i, m) {
			char a[32], pending[24] = "-";
			age(json_integer_value(json_object_get(m, "started")), a, sizeof a);
			const char *b = json_string_value(json_object_get(m, "backend"));
			const char *id = json_string_value(json_object_get(m, "sandbox"));
			const char *mp = json_string_value(json_object_get(m, "mount"));
			if (i < nmounts)
				snprintf(pending, sizeof pending, "%zu",
					 json_array_size(json_object_get(m, "pending_uploads")));
			fprintf(out, "%-8s %-24s %-11s %5s %7s  %s\n", b ? b : "?",
				id ? id : "?",
				json_string_value(json_object_get(m, "state")), a, pending,
				mp ? mp : "-");
		}
	}
	json_decref(all);
	for (size_t k = 0; mounts[k]; k++)
		free(mounts[k]);
	free(mounts);
	return 0;
}
