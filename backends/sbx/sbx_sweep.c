/* What sbfs made on sbx, judged by our records: the listing `sbfs list`
 * shows (list_owned) and the one `sbfs sweep` works from. */
#include "sbx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* `sbx ls --json`, parsed. 0, or -errno with err. */
static int sbx_listing(const char *cli, double timeout_s, struct sbx_listed **v,
		       size_t *n, char *err, size_t errlen)
{
	static const char *const args[] = {"ls", "--json", NULL};
	struct sbx_outcome o;
	char *out = NULL, *serr = NULL;
	*v = NULL;
	*n = 0;
	int rc = sbx_cli_capture(cli, args, timeout_s, 64u << 20, &o, &out, &serr);
	if (rc < 0 || !o.exited || o.status != 0) {
		if (rc < 0)
			snprintf(err, errlen, "cannot run %.200s: %s", cli, strerror(-rc));
		else if (o.timed_out)
			snprintf(err, errlen, "`sbx ls --json` did not answer within %.0f s",
				 timeout_s);
		else
			sbx_describe(err, errlen, "ls", serr, o.status);
		free(out);
		free(serr);
		return -EIO;
	}
	rc = sbx_ls_parse(out ? out : "", out ? strlen(out) : 0, v, n);
	free(out);
	free(serr);
	if (rc < 0)
		snprintf(err, errlen, "`sbx ls --json` printed something this sbfs cannot read (%s)",
			 strerror(-rc));
	return rc;
}

static time_t created_at(const char *dir)
{
	struct statx stx;
	if (statx(AT_FDCWD, dir, AT_SYMLINK_NOFOLLOW, STATX_BTIME | STATX_CTIME, &stx) < 0)
		return 0;
	return (time_t)((stx.stx_mask & STATX_BTIME) ? stx.stx_btime.tv_sec
						     : stx.stx_ctime.tv_sec);
}

/* One listed sandbox as ours: false when no record of ours names it (not
 * made here), with the reason in o->why. */
static bool judge(const struct sbx_listed *e, const char *host, struct sb_owned *o,
		  struct sbx_record *rec)
{
	memset(o, 0, sizeof *o);
	snprintf(o->id, sizeof o->id, "%s", e->name);
	if (sbx_record_read(e->name, rec) < 0) {
		char dir[PATH_MAX] = "?";
		sbx_record_dir(dir, sizeof(dir));
		snprintf(o->why, sizeof o->why, "no record of it in %.100s: not made here", dir);
		return false;
	}
	o->created = created_at(rec->dir);
	if (rec->host[0] && strcmp(rec->host, host)) {
		o->state = SB_OWNED_IN_USE;
		snprintf(o->why, sizeof o->why, "mounted from host %.100s", rec->host);
	} else if (rec->keep) {
		o->state = SB_OWNED_KEPT;
		snprintf(o->why, sizeof o->why, "kept with -o keep");
	} else if (!sbx_record_owner_gone(rec)) {
		o->state = SB_OWNED_IN_USE;
		snprintf(o->why, sizeof o->why, "in use by sbfs pid %d", rec->pid);
	} else {
		o->state = SB_OWNED_ORPHAN;
		snprintf(o->why, sizeof o->why, "daemon pid %d is gone", rec->pid);
	}
	return true;
}

static bool ours_by_name(const struct sbx_listed *e)
{
	return !strncmp(e->name, SBX_NAME_PREFIX, strlen(SBX_NAME_PREFIX));
}

int sbx_list_owned(const struct sb_spec *spec, struct sb_owned **out, size_t *nout,
		   char *err, size_t errlen)
{
	char cli[1024];
	*out = NULL;
	*nout = 0;
	if (sbx_find_cli(spec, cli, sizeof(cli), err, errlen) < 0)
		return SB_OWNED_NONE; /* no sbx here: nothing of it to list */
	struct sbx_listed *v;
	size_t n;
	int rc = sbx_listing(cli, SBX_LIST_TIMEOUT_S, &v, &n, err, errlen);
	if (rc < 0)
		return rc;
	struct sb_owned *o = calloc(n + 1, sizeof *o);
	if (!o) {
		free(v);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	struct sbx_record self, rec;
	memset(&self, 0, sizeof(self));
	sbx_record_self(&self);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (ours_by_name(&v[i]) && judge(&v[i], self.host, &o[k], &rec))
			k++;
	free(v);
	*out = o;
	*nout = k;
	return 0;
}

/* Records of sandboxes sbx no longer has (removed with `sbx rm`, or
 * lost): their workspace directories and records go once their daemon
 * is gone (a live one forgets its own at unmount). */
static void sweep_records(const struct sbx_listed *v, size_t n, const char *host,
			  int *handled)
{
	char dir[PATH_MAX];
	if (sbx_record_dir(dir, sizeof(dir)) < 0)
		return;
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *name = e->d_name;
		size_t len = strlen(name);
		if (strncmp(name, SBX_NAME_PREFIX, strlen(SBX_NAME_PREFIX)) ||
		    (len > 4 && !strcmp(name + len - 4, ".new")))
			continue;
		bool listed = false;
		for (size_t i = 0; i < n && !listed; i++)
			listed = !strcmp(v[i].name, name);
		struct sbx_record rec;
		if (listed || sbx_record_read(name, &rec) < 0 ||
		    (rec.host[0] && strcmp(rec.host, host)) || !sbx_record_owner_gone(&rec))
			continue;
		sbx_private_remove(rec.dir);
		sbx_record_remove(name);
		printf("%s: forgotten (sbx no longer has it; its workspace directory was removed)\n", name);
		(*handled)++;
	}
	closedir(d);
}

int sbx_sweep(const struct sb_spec *spec)
{
	char cli[1024], err[SB_REASON_MAX];
	if (sbx_find_cli(spec, cli, sizeof(cli), err, sizeof(err)) < 0) {
		fprintf(stderr, "sbfs: %s\n", err);
		return -EINVAL;
	}
	struct sbx_listed *v;
	size_t n;
	if (sbx_listing(cli, SBX_QUICK_TIMEOUT_S, &v, &n, err, sizeof(err)) < 0) {
		fprintf(stderr, "sbfs: %s: nothing was removed\n", err);
		return -EIO;
	}
	struct sbx_record self, rec;
	memset(&self, 0, sizeof(self));
	sbx_record_self(&self);
	int handled = 0, rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct sb_owned o;
		if (!ours_by_name(&v[i]))
			continue;
		if (!judge(&v[i], self.host, &o, &rec)) {
			printf("%s: skipped (%s; `sbx rm -f %s` removes it)\n", o.id, o.why, o.id);
			continue;
		}
		if (o.state != SB_OWNED_ORPHAN) {
			bool elsewhere = !strncmp(o.why, "mounted from host", 17);
			printf(elsewhere ? "%s: skipped (%s)\n" : "%s: %s\n", o.id, o.why);
			continue;
		}
		if (sbx_remove_sandbox(cli, o.id, err, sizeof(err)) < 0) {
			printf("%s: %s\n", o.id, err);
			rc = -EIO;
			continue;
		}
		sbx_private_remove(rec.dir);
		sbx_record_remove(o.id);
		printf("%s: removed (%s)\n", o.id, o.why);
		handled++;
	}
	sweep_records(v, n, self.host, &handled);
	free(v);
	if (!handled)
		printf("no orphaned sbx sandboxes\n");
	return rc;
}
