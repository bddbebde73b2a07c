/* The local backend's sandbox process: bwrap's arguments (the host
 * system read-only, /etc masked, the workspace bound at the workdir),
 * started from the thread that creates the sandbox, and ready once the
 * workspace is in place in the sandbox's root. */
#include "local.h"
#include "local_etc_mask.h"
#include "util/call_deadline.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 10000
#define GUEST_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
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
	double deadline = call_deadline_now() + READY_TIMEOUT_MS / 1000.0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((deadline - call_deadline_now()) * 1000);
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

/* A pidfd for the sandbox's pid 1, made while bwrap still runs and then
 * checked to be bwrap's child: the pid info-fd gave cannot have been
 * reused by then, since only bwrap reaps its child and it lives on. */
static int open_init_pidfd(struct local *l)
{
	int fd = pidfd_open_(l->init_pid);
	if (fd < 0)
		return -errno;
	struct pollfd p = {.fd = l->bwrap_pidfd, .events = POLLIN};
	if (local_parent_of(l->init_pid) != l->bwrap_pid || poll(&p, 1, 0) != 0) {
		close(fd);
		return -ECHILD;
	}
	l->init_pidfd = fd;
	return 0;
}

void local_kill_sandbox(struct local *l)
{
	/* pid 1 first: bwrap's --die-with-parent alone lost it (a failed
	 * mount's destroy, soon after create, under load: 2 of 10 left pid
	 * 1 running with parent 1); killed, the kernel kills the rest of
	 * its pid namespace */
	if (l->init_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, l->init_pidfd, SIGKILL, NULL, 0);
	if (l->bwrap_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, l->bwrap_pidfd, SIGKILL, NULL, 0);
}

int local_wait_sandbox_gone(struct local *l, int timeout_ms)
{
	if (l->init_pidfd < 0)
		return 0;
	/* A pid namespace's init finishes its exit only after every other
	 * process of the namespace is gone; its pidfd is readable from then. */
	double deadline = call_deadline_now() + timeout_ms / 1000.0;
	for (;;) {
		struct pollfd p = {.fd = l->init_pidfd, .events = POLLIN};
		int left = (int)((deadline - call_deadline_now()) * 1000);
		int n = poll(&p, 1, left > 0 ? left : 0);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Ready once the sandbox's root has the workspace bound at workdir. */
static int wait_ready(struct local *l, const char *workdir)
{
	struct stat host, guest;
	if (fstat(l->ws_fd, &host) < 0)
		return -errno;
	char p[4200];
	snprintf(p, sizeof(p), "/proc/%d/root%s", (int)l->init_pid, workdir);
	double deadline = call_deadline_now() + READY_TIMEOUT_MS / 1000.0;
	while (call_deadline_now() < deadline) {
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
		local_set_error(b, "%s", "backend 'local' needs bubblewrap (bwrap), which is not installed");
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
		local_set_error(b, "cannot scan /etc for files to hide from the sandbox: %s",
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
		rc = open_init_pidfd(l);
	if (rc == 0)
		rc = wait_ready(l, b->spec.workdir);
	if (rc < 0) {
		char msg[300] = "";
		ssize_t n = pread(errfd, msg, sizeof(msg) - 1, 0);
		msg[n > 0 ? n : 0] = '\0';
		msg[strcspn(msg, "\n")] = '\0';
		snprintf(b->error, sizeof(b->error), "bwrap failed to start the sandbox: %s",
			 msg[0] ? msg : strerror(-rc));
		if (l->bwrap_pidfd < 0)
			kill(pid, SIGKILL);
		local_kill_sandbox(l);
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
int local_spawn_bwrap(struct sb_backend *b, struct local *l)
{
	int rc = local_stage_workspace(b, l);
	if (rc == 0)
		rc = start_bwrap(b, l);
	local_unstage_workspace(l);
	return rc;
}
