/* What sbfs keeps on the host about each sandbox it made, since sbx has
 * no labels to carry it: one line in $XDG_STATE_HOME/sbfs/sbx/NAME (the
 * daemon's pid and start time, host, -o keep, the workspace directory),
 * read by `sbfs sweep` to tell an orphan from a sandbox in use or kept.
 * And the sandbox's private directory of ours (0700): ws/, the host
 * directory sbx mounts into every sandbox, kept empty (never the user's
 * directory nor a FUSE mount, sbx-cli.md), and env/, the env files of its
 * commands. The record names the directory, so whatever a killed daemon
 * left in it goes with it. */
#include "sbx.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define FUSE_SUPER_MAGIC 0x65735546

static int mkdir_p(char *path, mode_t mode)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int r = mkdir(path, mode);
		*p = '/';
		if (r < 0 && errno != EEXIST)
			return -errno;
	}
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int sbx_record_dir(char *out, size_t n)
{
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	int w;
	if (state && state[0] == '/')
		w = snprintf(out, n, "%s/sbfs/sbx", state);
	else if (home && home[0] == '/')
		w = snprintf(out, n, "%s/.local/state/sbfs/sbx", home);
	else
		w = snprintf(out, n, "/tmp/sbfs-sbx-state-%u", (unsigned)getuid());
	if (w < 0 || (size_t)w >= n)
		return -ENAMETOOLONG;
	return mkdir_p(out, 0700);
}

static int record_path(const char *name, char *out, size_t n)
{
	char dir[PATH_MAX];
	int rc = sbx_record_dir(dir, sizeof(dir));
	if (rc < 0)
		return rc;
	if (!*name || strchr(name, '/') || name[0] == '.')
		return -EINVAL;
	return snprintf(out, n, "%s/%s", dir, name) < (int)n ? 0 : -ENAMETOOLONG;
}

int sbx_record_write(const char *name, const struct sbx_record *r)
{
	char p[PATH_MAX], tmp[PATH_MAX + 8];
	int rc = record_path(name, p, sizeof(p));
	if (rc < 0)
		return rc;
	snprintf(tmp, sizeof(tmp), "%s.new", p);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return -errno;
	/* the directory last: a path may hold spaces */
	fprintf(f, "%d %llu %s %d %s\n", r->pid, r->start, r->host[0] ? r->host : "-",
		r->keep ? 1 : 0, r->dir[0] ? r->dir : "-");
	if (fclose(f) != 0 || rename(tmp, p) < 0) {
		rc = -errno;
		unlink(tmp);
		return rc;
	}
	return 0;
}

int sbx_record_read(const char *name, struct sbx_record *r)
{
	memset(r, 0, sizeof(*r));
	char p[PATH_MAX], line[2048];
	int rc = record_path(name, p, sizeof(p));
	if (rc < 0)
		return rc;
	FILE *f = fopen(p, "re");
	if (!f)
		return -errno;
	bool ok = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	int keep = 0, used = 0;
	if (!ok || sscanf(line, "%d %llu %255s %d %n", &r->pid, &r->start, r->host,
			  &keep, &used) < 4 || !used)
		return -EPROTO;
	r->keep = keep != 0;
	line[strcspn(line, "\n")] = '\0';
	snprintf(r->dir, sizeof(r->dir), "%s", strcmp(line + used, "-") ? line + used : "");
	if (!strcmp(r->host, "-"))
		r->host[0] = '\0';
	return 0;
}

void sbx_record_remove(const char *name)
{
	char p[PATH_MAX];
	if (record_path(name, p, sizeof(p)) == 0)
		unlink(p);
}

static unsigned long long start_time_of(int pid)
{
	char p[64], st[1024];
	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return 0;
	size_t n = fread(st, 1, sizeof(st) - 1, f);
	fclose(f);
	st[n] = '\0';
	const char *s = strrchr(st, ')');
	if (!s)
		return 0;
	/* field 22; s points at the end of field 2 */
	unsigned long long v = 0;
	int field = 2;
	for (const char *q = s + 1; *q; q++)
		if (*q == ' ' && ++field == 22) {
			v = strtoull(q + 1, NULL, 10);
			break;
		}
	return v;
}

void sbx_record_self(struct sbx_record *r)
{
	r->pid = (int)getpid();
	r->start = start_time_of(r->pid);
	gethostname(r->host, sizeof(r->host) - 1);
	for (char *p = r->host; *p; p++)
		if (*p == ' ' || *p == '\n')
			*p = '_';
}

bool sbx_record_owner_gone(const struct sbx_record *r)
{
	if (sb_daemon_gone(r->pid))
		return true;
	/* the same pid, a later sbfs: not the daemon that made it */
	return r->start && start_time_of(r->pid) != r->start;
}

int sbx_private_make(char *dir, size_t n, bool with_ws, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	struct statfs sf;
	if (statfs(tmp, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC) {
		/* a FUSE mount (maybe ours) under the sandbox is refused by sbx's
		 * advice and would loop through this daemon */
		tmp = "/tmp";
	}
	if (snprintf(dir, n, "%s/" SBX_PRIVATE_PREFIX "XXXXXX", tmp) >= (int)n - 8)
		return -ENAMETOOLONG;
	if (!mkdtemp(dir)) {
		int e = errno;
		snprintf(err, errlen, "cannot make a private directory %.200s: %s (set TMPDIR to a writable local directory)",
			 dir, strerror(e));
		return -e;
	}
	char sub[PATH_MAX];
	int rc = 0;
	snprintf(sub, sizeof(sub), "%s/env", dir);
	if (mkdir(sub, 0700) < 0)
		rc = -errno;
	snprintf(sub, sizeof(sub), "%s/ws", dir);
	if (rc == 0 && with_ws && mkdir(sub, 0700) < 0)
		rc = -errno;
	if (rc < 0) {
		snprintf(err, errlen, "cannot make the directories of %.200s: %s", dir, strerror(-rc));
		sbx_private_remove(dir);
	}
	return rc;
}

static int remove_entry(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	if (type == FTW_DP)
		rmdir(p);
	else
		unlink(p);
	return 0;
}

void sbx_private_remove(const char *dir)
{
	/* only a directory this backend names */
	const char *base = dir ? strrchr(dir, '/') : NULL;
	if (!base || strncmp(base + 1, SBX_PRIVATE_PREFIX, strlen(SBX_PRIVATE_PREFIX)))
		return;
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}
