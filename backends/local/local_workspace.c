/* The local backend's workspace: the host directory bound at the
 * sandbox's workdir, made or attached, staged where a mapped user
 * namespace can reach it, discarded on destroy; the owner markers by
 * which `sbfs sweep` finds the workspaces of daemons that are gone. */
#include "local.h"
#include "local_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>


/* ---- workspace dir ---- */

static int chmod_dirs(const char *p, const struct stat *st, int flag,
		      struct FTW *f)
{
	(void)f;
	if (flag == FTW_D || flag == FTW_DNR)
		chmod(p, (st->st_mode & 07777) | S_IRWXU);
	return 0;
}

static int remove_entry(const char *p, const struct stat *st, int flag,
			struct FTW *f)
{
	(void)st;
	(void)f;
	if (flag == FTW_DP)
		rmdir(p);
	else
		unlink(p);
	return 0;
}

/* Physical walk: never follows the symlinks the guest may have planted, and
 * never crosses into another mount. */
static void remove_tree(const char *dir)
{
	nftw(dir, chmod_dirs, 16, FTW_PHYS | FTW_MOUNT);
	nftw(dir, remove_entry, 16, FTW_PHYS | FTW_MOUNT | FTW_DEPTH);
}

/* In a mapped user namespace bwrap is no host user that may walk the path
 * to the workspace (a 0700 parent of root's, as a test's temp dir), so the
 * workspace is bound under STAGE_ROOT, which anyone may pass through, and
 * bwrap binds it from there. The bind is in the host's mount table, not in
 * a mount namespace of ours: the host's mounts may be private (no
 * propagation), and a copy of its table kept alive by a sandbox would hold
 * every other FUSE mount of that moment after its unmount, so that its
 * daemon never sees the end of its session. */
#define STAGE_ROOT "/run/sbfs-ws"

static void stage_path(char *out, size_t len, const char *host_dir)
{
	const char *base = strrchr(host_dir, '/');
	/* a workspace is named sbfs-ID: one path component */
	snprintf(out, len, "%s/%.255s", STAGE_ROOT, base ? base + 1 : host_dir);
}

/* A stage left by a daemon that was killed, or ours at the end. */
static void unstage_path(const char *stage_dir)
{
	umount2(stage_dir, MNT_DETACH);
	rmdir(stage_dir);
}

/* ---- owner markers: `sbfs sweep` finds workspaces of dead daemons ---- */

/* The start time (clock ticks since boot) tells a live daemon from a new
 * process that reused its pid; 0 for a process that is gone (or a zombie,
 * which is gone but for its parent's wait). */
static unsigned long long process_start_time(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long long start = 0;
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
		return 0;
	/* after the command name: state is field 3, starttime field 22 */
	for (int field = 2; p && *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (p && sscanf(p, "%llu", &start) != 1)
		start = 0;
	return start;
}

static void owner_path(const char *host_dir, char *out, size_t len)
{
	snprintf(out, len, "%s.owner", host_dir);
}

static void write_owner(const char *host_dir)
{
	char path[4200];
	owner_path(host_dir, path, sizeof path);
	FILE *f = fopen(path, "wxe");
	if (!f)
		return; /* only sweep needs it */
	fprintf(f, "%d %llu\n", (int)getpid(), process_start_time(getpid()));
	fclose(f);
}

static void remove_owner(const char *host_dir)
{
	char path[4200];
	owner_path(host_dir, path, sizeof path);
	unlink(path);
}

/* The daemon named by an owner marker still runs. */
static bool owner_alive(const char *owner_file)
{
	FILE *f = fopen(owner_file, "re");
	int pid = 0;
	unsigned long long start = 0;
	if (f) {
		if (fscanf(f, "%d %llu", &pid, &start) != 2)
			pid = 0;
		fclose(f);
	}
	return pid > 0 && start && process_start_time(pid) == start;
}

/* An attached workspace is kept after unmount, so no marker may make it
 * look orphaned: one left by a daemon that is gone (a kept workspace made
 * before keep stopped writing markers, or a killed daemon's) goes. */
static void disown_attached(const char *host_dir)
{
	char path[4200];
	owner_path(host_dir, path, sizeof path);
	if (access(path, F_OK) == 0 && !owner_alive(path))
		unlink(path);
}

static const char *workspace_root(const struct sb_spec *spec)
{
	const char *root = sb_spec_option(spec, "local_root");
	if (!root || !*root)
		root = getenv("TMPDIR");
	if (!root || !*root)
		root = "/var/tmp";
	return root;
}

/* A workspace of ours: made by this user, or by a root daemon for its
 * sandbox's root (the mapped range's first id). */
static bool workspace_ours(const struct stat *st, const struct id_map *ids)
{
	return st->st_uid == geteuid() ||
	       (ids->mapped && st->st_uid == ids->uid_base);
}

static int owner_pid(const char *owner_file)
{
	FILE *f = fopen(owner_file, "re");
	int pid = 0;
	if (f) {
		if (fscanf(f, "%d", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	return pid;
}

static time_t created_at(int dirfd, const char *name)
{
	struct statx stx;
	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_BTIME | STATX_CTIME, &stx) < 0)
		return 0;
	return (time_t)((stx.stx_mask & STATX_BTIME) ? stx.stx_btime.tv_sec
						     : stx.stx_ctime.tv_sec);
}

static int add_owned(struct sb_owned **v, size_t *n, size_t *cap)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct sb_owned *nv = realloc(*v, c * sizeof **v);
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	memset(&(*v)[*n], 0, sizeof **v);
	(*n)++;
	return 0;
}

/* Workspaces sbfs-ID of ours under the root: with a marker of a live
 * daemon in use, of a dead one orphaned, without one kept (-o keep, or
 * attached: an attach writes none). A marker whose workspace is gone is
 * an orphan too, for sweep to clear. */
int local_list_owned(const struct sb_spec *spec, struct sb_owned **out,
		     size_t *nout, char *err, size_t errlen)
{
	struct id_map ids;
	char why[SB_REASON_MAX];
	if (id_map_choose(&ids, why, sizeof why) < 0)
		ids.mapped = false;
	const char *root = workspace_root(spec);
	*out = NULL;
	*nout = 0;
	DIR *d = opendir(root);
	if (!d) {
		snprintf(err, errlen, "cannot read %s: %s", root, strerror(errno));
		return -errno;
	}
	struct sb_owned *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		bool marker = len > 11 && !strcmp(e->d_name + len - 6, ".owner");
		/* sbfs-HEX (sb_spec_init's names): not the sbx backend's
		 * private sbfs-sbx-XXXXXX directories, which share $TMPDIR */
		size_t idlen = marker ? len - 6 : len;
		if (strncmp(e->d_name, "sbfs-", 5) != 0 || idlen < 6 ||
		    strspn(e->d_name + 5, "0123456789abcdef") != idlen - 5)
			continue;
		char dir[4200], owner[4300];
		snprintf(dir, sizeof dir, "%s/%.*s", root, (int)idlen, e->d_name);
		owner_path(dir, owner, sizeof owner);
		struct stat st;
		bool ws = lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && workspace_ours(&st, &ids);
		/* each workspace once: from its directory, or from a marker
		 * that has none */
		if (marker ? ws : !ws)
			continue;
		bool has_owner = marker || access(owner, F_OK) == 0;
		if ((rc = add_owned(&v, &n, &cap)) < 0)
			break;
		struct sb_owned *o = &v[n - 1];
		snprintf(o->id, sizeof o->id, "%.*s", (int)idlen, e->d_name);
		o->created = created_at(dirfd(d), e->d_name);
		if (!has_owner) {
			o->state = SB_OWNED_KEPT;
		} else if (owner_alive(owner)) {
			o->state = SB_OWNED_IN_USE;
		} else {
			o->state = SB_OWNED_ORPHAN;
			snprintf(o->why, sizeof o->why, "its sbfs daemon, pid %d, is gone",
				 owner_pid(owner));
		}
	}
	closedir(d);
	if (rc < 0) {
		free(v);
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	*out = v;
	*nout = n;
	return 0;
}

int local_sweep(const struct sb_spec *spec)
{
	struct id_map ids;
	char why[SB_REASON_MAX];
	if (id_map_choose(&ids, why, sizeof why) < 0)
		ids.mapped = false;
	const char *root = workspace_root(spec);
	struct sb_owned *v;
	size_t n;
	if (local_list_owned(spec, &v, &n, why, sizeof why) < 0) {
		fprintf(stderr, "sbfs: %s\n", why);
		return -1;
	}
	/* the processes first: a tree still running holds its workspace */
	size_t removed = local_sweep_trees(spec->workdir ? spec->workdir : "/workspace", root);
	for (size_t i = 0; i < n; i++) {
		if (v[i].state != SB_OWNED_ORPHAN)
			continue;
		char owner[4300], dir[4200];
		snprintf(dir, sizeof dir, "%s/%s", root, v[i].id);
		owner_path(dir, owner, sizeof owner);
		struct stat st;
		if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && workspace_ours(&st, &ids)) {
			char stage[4200];
			stage_path(stage, sizeof stage, dir);
			unstage_path(stage); /* a killed daemon leaves its mounts */
			local_disk_remove(dir);
			remove_tree(dir);
		}
		unlink(owner);
		printf("removed %s (%s)\n", dir, v[i].why);
		removed++;
	}
	free(v);
	if (!removed)
		printf("no orphaned local sandboxes (workspaces or processes) under %s\n", root);
	return 0;
}

/* The workspace is <root>/<sandbox name>; the name is the sandbox's id,
 * and `-o attach=` takes it back (or a path to a workspace directory). */
int local_make_workspace(struct sb_backend *b, struct local *l)
{
	const struct sb_spec *spec = &b->spec;
	const char *root = workspace_root(spec);
	if (spec->attach_id) {
		char given[4200];
		if (strchr(spec->attach_id, '/'))
			snprintf(given, sizeof given, "%s", spec->attach_id);
		else
			snprintf(given, sizeof given, "%s/%s", root, spec->attach_id);
		struct stat st;
		if (lstat(given, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    !workspace_ours(&st, &l->ids)) {
			local_set_error(b, "attach: no workspace '%.300s' of yours under %.300s "
				  "(give the id that -o keep printed, with the same local_root)",
				  spec->attach_id, root);
			return -ENOENT;
		}
		if (!realpath(given, l->host_dir)) {
			local_set_error(b, "attach: cannot resolve '%.300s'", given);
			return -ENOENT;
		}
		l->owns_dir = false;
		disown_attached(l->host_dir);
		if (local_disk_exists(l->host_dir)) {
			char err[400];
			if (geteuid() != 0) {
				local_set_error(b, "attach: workspace '%.300s' is a disk image (-o disk=), which only root can mount; run sbfs as root",
					  spec->attach_id);
				return -EPERM;
			}
			int rc = local_disk_mount(l->host_dir, err, sizeof err);
			if (rc < 0) {
				local_set_error(b, "attach: cannot mount the workspace image: %s", err);
				return rc;
			}
			l->disk_mounted = true;
		}
		return 0;
	}
	int n = snprintf(l->host_dir, sizeof(l->host_dir), "%s/%s", root, spec->name);
	if (n < 0 || (size_t)n >= sizeof(l->host_dir) - 16) {
		local_set_error(b, "workspace root path too long: %.300s", root);
		return -ENAMETOOLONG;
	}
	if (mkdir(l->host_dir, 0700) < 0) {
		int e = errno;
		local_set_error(b, "cannot create the workspace directory %.300s: %s "
			  "(set -o local_root=DIR to an existing writable directory)",
			  l->host_dir, strerror(e));
		return -e;
	}
	l->owns_dir = true;
	if (spec->disk_mb) {
		char err[400];
		int rc = local_disk_create(l->host_dir, spec->disk_mb, err, sizeof err);
		if (rc < 0) {
			rmdir(l->host_dir);
			l->owns_dir = false;
			local_set_error(b, "disk=: %s", err);
			return rc;
		}
		l->disk_mounted = true;
	}
	/* A kept workspace is no orphan whatever becomes of this daemon:
	 * sweep finds only workspaces with a marker. */
	if (!spec->keep)
		write_owner(l->host_dir);
	/* the sandbox's root owns its workspace, as on any other backend */
	if (l->ids.mapped &&
	    chown(l->host_dir, l->ids.uid_base, l->ids.gid_base) < 0) {
		int e = errno;
		local_set_error(b, "cannot give the workspace directory %.300s to the sandbox's ids %u:%u: %s",
			  l->host_dir, (unsigned)l->ids.uid_base,
			  (unsigned)l->ids.gid_base, strerror(e));
		return -e;
	}
	return 0;
}

int local_stage_workspace(struct sb_backend *b, struct local *l)
{
	if (l->userns_fd < 0 || l->staged)
		return 0;
	stage_path(l->stage_dir, sizeof l->stage_dir, l->host_dir);
	if ((mkdir(STAGE_ROOT, 0711) < 0 && errno != EEXIST) ||
	    (mkdir(l->stage_dir, 0700) < 0 && errno != EEXIST) ||
	    mount(l->host_dir, l->stage_dir, NULL, MS_BIND, NULL) < 0) {
		int e = errno;
		rmdir(l->stage_dir);
		local_set_error(b, "cannot bind the workspace at %s for the sandbox's ids: %s",
			  l->stage_dir, strerror(e));
		return -e;
	}
	l->staged = true;
	return 0;
}

void local_unstage_workspace(struct local *l)
{
	if (!l->staged)
		return;
	unstage_path(l->stage_dir);
	l->staged = false;
}

/* Removes a workspace we made: its image (if any), its tree, its marker.
 * The O_PATH fd goes first, or the image's unmount would find it busy. */
void local_discard_workspace(struct local *l)
{
	if (l->ws_fd >= 0) {
		close(l->ws_fd);
		l->ws_fd = -1;
	}
	if (l->disk_mounted)
		local_disk_remove(l->host_dir);
	l->disk_mounted = false;
	remove_tree(l->host_dir);
	remove_owner(l->host_dir);
	l->owns_dir = false;
}
