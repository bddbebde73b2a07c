/* The `local` backend: a bubblewrap sandbox on this machine. The host
 * system is visible read-only (/usr, /etc, /opt), the workspace is a host
 * directory bound at the workdir, nothing else of the host is. Commands
 * enter the running sandbox's namespaces with nsenter and drop every
 * capability with setpriv before running. */
#include "local.h"
#include "local_disk.h"
#include "local_etc_mask.h"
#include "util/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <sched.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 10000
#define GUEST_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define GUEST_HOME "HOME=/root"

static const char *const local_option_keys[] = {"local_root", NULL};

/* ---- small helpers ---- */

struct strv {
	const char **v;
	size_t n, cap;
	bool oom;
};

static void strv_add(struct strv *s, const char *x)
{
	if (s->n + 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		const char **v = realloc(s->v, cap * sizeof(*v));
		if (!v) {
			s->oom = true;
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	s->v[s->n] = NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void pidfd_kill(int pidfd)
{
	if (pidfd >= 0)
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

static const char *find_tool(const char *name, char *buf, size_t n)
{
	static const char *const dirs[] = {"/usr/bin", "/usr/sbin", "/bin",
					   "/sbin", "/usr/local/bin", NULL};
	for (size_t i = 0; dirs[i]; i++) {
		snprintf(buf, n, "%s/%s", dirs[i], name);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return NULL;
}

static void set_error(struct sb_backend *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_error(struct sb_backend *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->error, sizeof(b->error), fmt, ap);
	va_end(ap);
}

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

static int local_sweep(const struct sb_spec *spec)
{
	struct id_map ids;
	char why[SB_REASON_MAX];
	if (id_map_choose(&ids, why, sizeof why) < 0)
		ids.mapped = false;
	const char *root = workspace_root(spec);
	DIR *d = opendir(root);
	if (!d) {
		fprintf(stderr, "sbfs: cannot read %s: %s\n", root, strerror(errno));
		return -1;
	}
	size_t removed = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (strncmp(e->d_name, "sbfs-", 5) != 0 || len < 7 ||
		    strcmp(e->d_name + len - 6, ".owner") != 0)
			continue;
		char owner[4200], dir[4200];
		snprintf(owner, sizeof owner, "%s/%s", root, e->d_name);
		snprintf(dir, sizeof dir, "%s/%.*s", root, (int)(len - 6), e->d_name);
		FILE *f = fopen(owner, "re");
		int pid = 0;
		if (f) {
			if (fscanf(f, "%d", &pid) != 1)
				pid = 0;
			fclose(f);
		}
		struct stat st;
		if (owner_alive(owner))
			continue;
		if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && workspace_ours(&st, &ids)) {
			char stage[4200];
			stage_path(stage, sizeof stage, dir);
			unstage_path(stage); /* a killed daemon leaves its mounts */
			local_disk_remove(dir);
			remove_tree(dir);
		}
		unlink(owner);
		printf("removed %s (its sbfs daemon, pid %d, is gone)\n", dir, pid);
		removed++;
	}
	closedir(d);
	if (!removed)
		printf("no orphaned local workspaces under %s\n", root);
	return 0;
}

/* The workspace is <root>/<sandbox name>; the name is the sandbox's id,
 * and `-o attach=` takes it back (or a path to a workspace directory). */
static int make_workspace(struct sb_backend *b, struct local *l)
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
			set_error(b, "attach: no workspace '%.300s' of yours under %.300s "
				  "(give the id that -o keep printed, with the same local_root)",
				  spec->attach_id, root);
			return -ENOENT;
		}
		if (!realpath(given, l->host_dir)) {
			set_error(b, "attach: cannot resolve '%.300s'", given);
			return -ENOENT;
		}
		l->owns_dir = false;
		disown_attached(l->host_dir);
		if (local_disk_exists(l->host_dir)) {
			char err[400];
			if (geteuid() != 0) {
				set_error(b, "attach: workspace '%.300s' is a disk image (-o disk=), which only root can mount; run sbfs as root",
					  spec->attach_id);
				return -EPERM;
			}
			int rc = local_disk_mount(l->host_dir, err, sizeof err);
			if (rc < 0) {
				set_error(b, "attach: cannot mount the workspace image: %s", err);
				return rc;
			}
			l->disk_mounted = true;
		}
		return 0;
	}
	int n = snprintf(l->host_dir, sizeof(l->host_dir), "%s/%s", root, spec->name);
	if (n < 0 || (size_t)n >= sizeof(l->host_dir) - 16) {
		set_error(b, "workspace root path too long: %.300s", root);
		return -ENAMETOOLONG;
	}
	if (mkdir(l->host_dir, 0700) < 0) {
		int e = errno;
		set_error(b, "cannot create the workspace directory %.300s: %s "
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
			set_error(b, "disk=: %s", err);
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
		set_error(b, "cannot give the workspace directory %.300s to the sandbox's ids %u:%u: %s",
			  l->host_dir, (unsigned)l->ids.uid_base,
			  (unsigned)l->ids.gid_base, strerror(e));
		return -e;
	}
	return 0;
}

/* ---- sandbox process ---- */

static bool refuse_unenforceable(struct sb_backend *b)
{
	const struct sb_spec *s = &b->spec;
	const char *why = NULL;
	if (s->image)
		why = "backend 'local' has no images (it runs the host's /usr read-only); drop image=";
	else if (s->allow_egress_to && s->allow_egress_to[0])
		why = "backend 'local' cannot enforce allow_egress_to (it has no egress filter); use block_network or drop the allowlist";
	else if (s->cpu > 0)
		why = "backend 'local' cannot enforce a cpu limit; drop cpu=";
	else if (s->memory_mb > 0)
		why = "backend 'local' cannot enforce a memory limit; drop memory=";
	else if (s->disk_mb > 0 && s->attach_id)
		why = "disk= sizes a new workspace; an attached one keeps the size it was made with: drop disk=";
	else if (s->disk_mb > 0)
		why = local_disk_unenforceable(s->disk_mb);
	else if (!s->workdir || s->workdir[0] != '/' || !s->workdir[1])
		why = "backend 'local' needs an absolute workdir other than /";
	for (size_t i = 0; !why && s->env && s->env[i]; i++)
		if (!strchr(s->env[i], '=') || s->env[i][0] == '=')
			why = "environment entries must be K=V";
	if (why)
		snprintf(b->error, sizeof(b->error), "%s", why);
	return why != NULL;
}

/* The host's /bin, /lib, ... are symlinks into /usr on merged-/usr systems:
 * recreate them as such; bind them read-only where they are real dirs. */
static void add_system_dirs(struct strv *a, char links[][4096])
{
	static const char *const dirs[] = {"/bin", "/sbin", "/lib", "/lib32",
					   "/lib64", "/libx32", NULL};
	for (size_t i = 0; dirs[i]; i++) {
		struct stat st;
		if (lstat(dirs[i], &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(dirs[i], links[i], 4095);
			if (n <= 0)
				continue;
			links[i][n] = '\0';
			strv_add(a, "--symlink");
			strv_add(a, links[i]);
			strv_add(a, dirs[i]);
		} else if (S_ISDIR(st.st_mode)) {
			strv_add(a, "--ro-bind");
			strv_add(a, dirs[i]);
			strv_add(a, dirs[i]);
		}
	}
	struct stat st;
	if (stat("/opt", &st) == 0 && S_ISDIR(st.st_mode)) {
		strv_add(a, "--ro-bind");
		strv_add(a, "/opt");
		strv_add(a, "/opt");
	}
}

static int read_info(int fd, pid_t *init_pid)
{
	char buf[4096];
	size_t len = 0;
	double deadline = now_s() + READY_TIMEOUT_MS / 1000.0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((deadline - now_s()) * 1000);
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&p, 1, left) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf) - 1)
			break;
	}
	buf[len] = '\0';
	json_t *j = json_loads(buf, 0, NULL);
	json_t *pid = j ? json_object_get(j, "child-pid") : NULL;
	int rc = json_is_integer(pid) && json_integer_value(pid) > 0 ? 0 : -EPROTO;
	if (rc == 0)
		*init_pid = (pid_t)json_integer_value(pid);
	json_decref(j);
	return rc;
}

/* Ready once the sandbox's root has the workspace bound at workdir. */
static int wait_ready(struct local *l, const char *workdir)
{
	struct stat host, guest;
	if (fstat(l->ws_fd, &host) < 0)
		return -errno;
	char p[4200];
	snprintf(p, sizeof(p), "/proc/%d/root%s", (int)l->init_pid, workdir);
	double deadline = now_s() + READY_TIMEOUT_MS / 1000.0;
	while (now_s() < deadline) {
		struct pollfd pf = {.fd = l->bwrap_pidfd, .events = POLLIN};
		if (poll(&pf, 1, 0) > 0)
			return -ECHILD;
		if (stat(p, &guest) == 0 && guest.st_dev == host.st_dev &&
		    guest.st_ino == host.st_ino)
			return 0;
		usleep(5000);
	}
	return -ETIMEDOUT;
}

static void *watch_sandbox(void *arg)
{
	struct sb_backend *b = arg;
	struct local *l = b->priv;
	unsigned life = b->spec.sandbox_timeout_s;
	double end = now_s() + life;
	for (;;) {
		int wait_ms = -1;
		if (life) {
			double left = end - now_s();
			wait_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
		}
		struct pollfd p = {.fd = l->bwrap_pidfd, .events = POLLIN};
		int n = poll(&p, 1, wait_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			sb_backend_fail(b, "sandbox lifetime (%u s) ended", life);
			pidfd_kill(l->bwrap_pidfd);
			life = 0;
			continue;
		}
		break;
	}
	int status = 0;
	while (waitpid(l->bwrap_pid, &status, 0) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&l->lock);
	bool expected = l->stopping;
	pthread_mutex_unlock(&l->lock);
	if (!expected) {
		if (WIFSIGNALED(status))
			sb_backend_fail(b, "sandbox (bwrap pid %d) was killed by signal %d",
					(int)l->bwrap_pid, WTERMSIG(status));
		else
			sb_backend_fail(b, "sandbox (bwrap pid %d) exited with status %d",
					(int)l->bwrap_pid, WEXITSTATUS(status));
	}
	return NULL;
}

/* bwrap's options (after its own name) NUL-separated in a memfd read
 * from offset 0, for `bwrap --args FD`. The fd is above 4, so that the
 * child's dup2 onto 3 and 4 cannot clobber it or keep it close-on-exec. */
static int bwrap_args_memfd(const char *const *args)
{
	int mfd = memfd_create("sbfs-bwrap-args", MFD_CLOEXEC);
	if (mfd < 0)
		return -errno;
	int fd = fcntl(mfd, F_DUPFD_CLOEXEC, 5);
	close(mfd);
	if (fd < 0)
		return -errno;
	for (size_t i = 0; args[i]; i++) {
		size_t len = strlen(args[i]) + 1, off = 0;
		while (off < len) {
			ssize_t n = write(fd, args[i] + off, len - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				int e = n < 0 ? -errno : -EIO;
				close(fd);
				return e;
			}
			off += (size_t)n;
		}
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* The namespaces bwrap makes. In a mapped user namespace (a root daemon)
 * bwrap runs as its root and makes no user namespace of its own, so the
 * sandbox's ids are the whole mapped range (bwrap's own would map one). */
static void add_namespace_args(struct strv *a, const struct local *l)
{
	if (l->userns_fd < 0) {
		strv_add(a, "--unshare-all");
		strv_add(a, "--unshare-user"); /* caps stay namespaced */
		return;
	}
	/* --unshare-all without its --unshare-user-try */
	strv_add(a, "--unshare-ipc");
	strv_add(a, "--unshare-pid");
	strv_add(a, "--unshare-net");
	strv_add(a, "--unshare-uts");
	strv_add(a, "--unshare-cgroup-try");
}

static int stage_workspace(struct sb_backend *b, struct local *l)
{
	if (l->userns_fd < 0 || l->staged)
		return 0;
	stage_path(l->stage_dir, sizeof l->stage_dir, l->host_dir);
	if ((mkdir(STAGE_ROOT, 0711) < 0 && errno != EEXIST) ||
	    (mkdir(l->stage_dir, 0700) < 0 && errno != EEXIST) ||
	    mount(l->host_dir, l->stage_dir, NULL, MS_BIND, NULL) < 0) {
		int e = errno;
		rmdir(l->stage_dir);
		set_error(b, "cannot bind the workspace at %s for the sandbox's ids: %s",
			  l->stage_dir, strerror(e));
		return -e;
	}
	l->staged = true;
	return 0;
}

static void unstage_workspace(struct local *l)
{
	if (!l->staged)
		return;
	unstage_path(l->stage_dir);
	l->staged = false;
}

static void add_workspace_bind(struct strv *a, const struct local *l,
			       const char *workdir)
{
	strv_add(a, "--bind");
	strv_add(a, l->staged ? l->stage_dir : l->host_dir);
	strv_add(a, workdir);
}

/* In the forked child, before bwrap: become the mapped namespace's root
 * (host id uid_base, no capability outside it). async-signal-safe. */
static int enter_userns(const struct local *l)
{
	if (l->userns_fd < 0)
		return 0;
	if (setns(l->userns_fd, CLONE_NEWUSER) < 0)
		return -6;
	if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 ||
	    setresuid(0, 0, 0) < 0)
		return -7;
	return 0;
}

/* Called from the thread that calls create: bwrap's --die-with-parent is
 * PR_SET_PDEATHSIG, which fires when the *thread* that forked it exits, so
 * that thread must live as long as the sandbox (the daemon creates it from
 * its main thread). Also what makes a kill -9 of the daemon take the
 * sandbox with it. */
static int start_bwrap(struct sb_backend *b, struct local *l)
{
	char bwrap[256];
	if (!find_tool("bwrap", bwrap, sizeof(bwrap))) {
		set_error(b, "%s", "backend 'local' needs bubblewrap (bwrap), which is not installed");
		return -ENOENT;
	}
	struct strv a = {0};
	char links[6][4096];
	strv_add(&a, bwrap);
	add_namespace_args(&a, l);
	if (!b->spec.block_network)
		strv_add(&a, "--share-net");
	strv_add(&a, "--die-with-parent");
	strv_add(&a, "--new-session"); /* no TIOCSTI into our terminal */
	strv_add(&a, "--ro-bind"); strv_add(&a, "/usr"); strv_add(&a, "/usr");
	add_system_dirs(&a, links);
	struct etc_view etc;
	int mrc = etc_view_build("/etc", &etc);
	if (mrc < 0) {
		free(a.v);
		set_error(b, "cannot scan /etc for files to hide from the sandbox: %s",
			  strerror(-mrc));
		return mrc;
	}
	for (size_t i = 0; i < etc.n; i++)
		strv_add(&a, etc.args[i]);
	strv_add(&a, "--proc"); strv_add(&a, "/proc");
	strv_add(&a, "--dev"); strv_add(&a, "/dev");
	strv_add(&a, "--tmpfs"); strv_add(&a, "/tmp");
	strv_add(&a, "--dir"); strv_add(&a, "/root");
	add_workspace_bind(&a, l, b->spec.workdir);
	strv_add(&a, "--hostname"); strv_add(&a, "sbfs");
	strv_add(&a, "--clearenv");
	strv_add(&a, "--setenv"); strv_add(&a, "PATH"); strv_add(&a, GUEST_PATH + 5);
	strv_add(&a, "--chdir"); strv_add(&a, b->spec.workdir);
	strv_add(&a, "--info-fd"); strv_add(&a, "3");
	int argsfd = a.oom ? -1 : bwrap_args_memfd(a.v + 1);
	free(a.v);
	etc_view_free(&etc);
	if (argsfd < 0)
		return a.oom ? -ENOMEM : argsfd;
	/* bwrap stays as the sandbox's pid 1, whose cmdline the sandbox can
	 * read: it shows only this, the options (host paths of the workspace
	 * and of /etc) are read from the fd, which bwrap closes after; the
	 * command must be on the command line */
	const char *argv[] = {bwrap, "--args", "4", "--", "/bin/sh", "-c",
			      "while :; do sleep 3600; done", NULL};
	int info[2] = {-1, -1};
	int errfd = memfd_create("sbfs-bwrap-stderr", MFD_CLOEXEC);
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (errfd < 0 || devnull < 0 || pipe2(info, O_CLOEXEC) < 0) {
		int e = -errno;
		close(argsfd);
		if (errfd >= 0) close(errfd);
		if (devnull >= 0) close(devnull);
		return e;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		/* async-signal-safe only from here */
		setsid();
		int step = enter_userns(l);
		if (step < 0) {
			/* one line for b->error: which step, and errno */
			int e = errno;
			char msg[] = "cannot stage the sandbox's user namespace (step N, errno NNN)\n";
			char *p = strchr(msg, 'N');
			p[0] = (char)('0' - step);
			p = strstr(msg, "NNN");
			p[0] = (char)('0' + e / 100 % 10);
			p[1] = (char)('0' + e / 10 % 10);
			p[2] = (char)('0' + e % 10);
			if (write(errfd, msg, sizeof msg - 1) < 0)
				_exit(126);
			_exit(126);
		}
		/* after the credential change, which clears it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(errfd, 2);
		dup2(info[1], 3);
		dup2(argsfd, 4);
		syscall(SYS_close_range, 5U, ~0U, 0U);
		/* bwrap stays as the sandbox's pid 1, whose environ the
		 * sandbox can read: it must not carry the daemon's (vendor
		 * tokens, the caller's secrets) */
		static char *const no_env[] = {NULL};
		execve(bwrap, (char *const *)argv, no_env);
		_exit(127);
	}
	close(argsfd);
	close(info[1]);
	close(devnull);
	if (pid < 0) {
		int e = -errno;
		close(info[0]);
		close(errfd);
		return e;
	}
	l->bwrap_pid = pid;
	l->bwrap_pidfd = pidfd_open_(pid);
	int rc = l->bwrap_pidfd < 0 ? -errno : read_info(info[0], &l->init_pid);
	close(info[0]);
	if (rc == 0)
		rc = wait_ready(l, b->spec.workdir);
	if (rc < 0) {
		char msg[300] = "";
		ssize_t n = pread(errfd, msg, sizeof(msg) - 1, 0);
		msg[n > 0 ? n : 0] = '\0';
		msg[strcspn(msg, "\n")] = '\0';
		snprintf(b->error, sizeof(b->error), "bwrap failed to start the sandbox: %s",
			 msg[0] ? msg : strerror(-rc));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		l->bwrap_pid = 0;
	}
	close(errfd);
	return rc;
}

/* bwrap started on the workspace, staged first where it must be. Once
 * the sandbox is up its mount namespace holds its own bind, so the stage
 * goes at once: nothing is left in the host's table, even after a kill -9
 * of the daemon. */
static int spawn_bwrap(struct sb_backend *b, struct local *l)
{
	int rc = stage_workspace(b, l);
	if (rc == 0)
		rc = start_bwrap(b, l);
	unstage_workspace(l);
	return rc;
}

/* ---- lifecycle ---- */

/* Removes a workspace we made: its image (if any), its tree, its marker.
 * The O_PATH fd goes first, or the image's unmount would find it busy. */
static void discard_workspace(struct local *l)
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

static void stop_sandbox(struct local *l)
{
	pthread_mutex_lock(&l->lock);
	l->stopping = true;
	pthread_mutex_unlock(&l->lock);
	pidfd_kill(l->bwrap_pidfd);
	if (l->watcher_started) {
		pthread_join(l->watcher, NULL); /* it reaps bwrap */
		l->watcher_started = false;
	} else if (l->bwrap_pid > 0) {
		waitpid(l->bwrap_pid, NULL, 0);
	}
	l->bwrap_pid = 0;
	unstage_workspace(l);
}

static int local_create(struct sb_backend *b, const struct sb_spec *spec)
{
	(void)spec; /* b->spec is the same, and owned */
	if (refuse_unenforceable(b))
		return -EINVAL;
	struct local *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->ws_fd = l->bwrap_pidfd = l->userns_fd = -1;
	pthread_mutex_init(&l->lock, NULL);
	b->priv = l;
	int rc = id_map_choose(&l->ids, b->error, sizeof b->error);
	if (rc < 0)
		return rc;
	if (l->ids.mapped && (l->userns_fd = id_map_open_userns(&l->ids)) < 0) {
		rc = l->userns_fd;
		l->userns_fd = -1;
		set_error(b, "cannot make the sandbox's user namespace (host ids %u+%u): %s",
			  (unsigned)l->ids.uid_base, l->ids.count, strerror(-rc));
		return rc;
	}
	rc = make_workspace(b, l);
	if (rc < 0)
		return rc;
	l->ws_fd = open(l->host_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (l->ws_fd < 0) {
		rc = -errno;
		set_error(b, "cannot open the workspace directory %.400s", l->host_dir);
	}
	if (rc == 0)
		rc = spawn_bwrap(b, l);
	if (rc == 0) {
		int e = pthread_create(&l->watcher, NULL, watch_sandbox, b);
		l->watcher_started = e == 0;
		rc = -e;
	}
	if (rc < 0) {
		stop_sandbox(l);
		if (l->owns_dir)
			discard_workspace(l);
		return rc;
	}
	/* its root in a mapped range; else our user, mapped to itself */
	b->guest_uid = l->ids.mapped ? 0 : getuid();
	b->guest_gid = l->ids.mapped ? 0 : getgid();
	/* the id is what `-o attach=` takes back */
	const char *base = strrchr(l->host_dir, '/');
	snprintf(b->id, sizeof(b->id), "%.*s", (int)sizeof(b->id) - 1,
		 base ? base + 1 : l->host_dir);
	return 0;
}

static int local_destroy(struct sb_backend *b)
{
	struct local *l = b->priv;
	if (!l)
		return 0;
	stop_sandbox(l);
	if (l->owns_dir)
		discard_workspace(l);
	return 0;
}

/* Whether bwrap still runs, from its pidfd (readable once it exited), so
 * no call to the sandbox: the watcher may not have noticed a death yet. */
static int local_confirm_alive(struct sb_backend *b)
{
	struct local *l = b->priv;
	pthread_mutex_lock(&l->lock);
	bool stopped = l->stopping;
	pthread_mutex_unlock(&l->lock);
	if (stopped)
		return sb_backend_fail(b, "sandbox %s was destroyed while an upload "
				       "was in flight", b->id);
	struct pollfd p = {.fd = l->bwrap_pidfd, .events = POLLIN};
	if (l->bwrap_pidfd >= 0 && poll(&p, 1, 0) == 0)
		return 0;
	return sb_backend_fail(b, "sandbox (bwrap pid %d) exited while an upload "
			       "was in flight", (int)l->bwrap_pid);
}

/* Leaves the workspace dir (keep/attach), but a local sandbox cannot
 * outlive the daemon anyway, so its processes go. */
static void local_release(struct sb_backend *b)
{
	struct local *l = b->priv;
	if (!l)
		return;
	stop_sandbox(l);
	if (l->bwrap_pidfd >= 0)
		close(l->bwrap_pidfd);
	if (l->ws_fd >= 0)
		close(l->ws_fd);
	/* a kept workspace's image is mounted again by attach */
	if (l->disk_mounted)
		local_disk_unmount(l->host_dir);
	if (l->userns_fd >= 0)
		close(l->userns_fd);
	pthread_mutex_destroy(&l->lock);
	free(l);
	b->priv = NULL;
}

const struct sb_backend_ops sb_local_ops = {
	.name = "local",
	.summary = "bubblewrap sandbox on this machine (host /usr read-only, no network by default)",
	.option_keys = local_option_keys,
	.create = local_create,
	.exec = local_exec,
	.destroy = local_destroy,
	.release = local_release,
	.write_file = local_write_file,
	.write_files = local_write_files,
	.list_dir = local_list_dir,
	.stat = local_stat,
	.mkdir = local_mkdir,
	.remove = local_remove,
	.rename = local_rename,
	.chmod = local_chmod,
	.truncate = local_truncate,
	.utimens = local_utimens,
	.symlink = local_symlink,
	.chown = local_chown,
	.link = local_link,
	.readlink = local_readlink,
	.statfs = local_statfs,
	.sweep = local_sweep,
	.remove_many = local_remove_many,
	.confirm_alive = local_confirm_alive,
};
