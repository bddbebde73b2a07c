/* `sbfs sweep` on local, from the processes rather than the workspaces:
 * a sandbox tree whose daemon is gone. A local sandbox dies with its
 * daemon through parent-death signals (ours on bwrap, bwrap's on its
 * pid 1), and one that was lost (bwrap's pid 1 arms its own again only
 * once it enters its init loop) leaves bwrap's pid 1 running with parent
 * 1, often with its workspace deleted, so no marker leads to it. It is
 * found by bwrap's command line, which every local sandbox shares
 * (local_bwrap.c), and by the workspace its mount table binds at the
 * workdir, which must be one under the swept root. */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define GONE_WAIT_MS 10000

/* bwrap's arguments after its own path, as local_bwrap.c starts it */
static const char *const sandbox_argv[] = {
	"--args", "4", "--", "/bin/sh", "-c", "while :; do sleep 3600; done", NULL,
};

static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == cap - 1)
			break;
	}
	close(fd);
	buf[len] = '\0';
	return (ssize_t)len;
}

pid_t local_parent_of(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof buf) <= 0)
		return 0;
	/* after the command name's last ')': state, then ppid */
	const char *rp = strrchr(buf, ')');
	int ppid = 0;
	if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

/* pid is bwrap running a local sandbox (its pid 1, or bwrap itself). */
static bool is_sandbox_bwrap(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	ssize_t len = read_small(path, buf, sizeof buf);
	if (len <= 0)
		return false;
	const char *arg = buf, *end = buf + len;
	const char *base = strrchr(arg, '/');
	if (strcmp(base ? base + 1 : arg, "bwrap") != 0)
		return false;
	arg += strlen(arg) + 1;
	for (size_t i = 0; sandbox_argv[i]; i++) {
		if (arg >= end || strcmp(arg, sandbox_argv[i]) != 0)
			return false;
		arg += strlen(arg) + 1;
	}
	return arg >= end;
}

static bool comm_is(pid_t pid, const char *name)
{
	char path[64], buf[64];
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	if (read_small(path, buf, sizeof buf) <= 0)
		return false;
	buf[strcspn(buf, "\n")] = '\0';
	return strcmp(buf, name) == 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] && r[3]) {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

static bool is_sandbox_name(const char *s)
{
	size_t len = strlen(s);
	return len >= 6 && !strncmp(s, "sbfs-", 5) &&
	       strspn(s + 5, "0123456789abcdef") == len - 5;
}

/* The id of the workspace pid has bound at workdir, if it is one under
 * root (the root's real path): mountinfo's root field is the path within
 * its file system, a tail of root/ID; "//deleted" once the directory is
 * gone. */
static bool workspace_of(pid_t pid, const char *workdir, const char *root,
			 char *id, size_t idlen, bool *deleted)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mountinfo", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	while (!found && getline(&line, &cap, f) > 0) {
		char *save = NULL, *fld[5] = {0};
		fld[0] = strtok_r(line, " ", &save);
		for (int i = 1; i < 5 && fld[i - 1]; i++)
			fld[i] = strtok_r(NULL, " ", &save);
		if (!fld[4])
			continue;
		unescape(fld[3]);
		unescape(fld[4]);
		if (strcmp(fld[4], workdir) != 0)
			continue;
		char *src = fld[3];
		size_t n = strlen(src);
		*deleted = n > 9 && !strcmp(src + n - 9, "//deleted");
		if (*deleted)
			src[n - 9] = '\0';
		const char *base = strrchr(src, '/');
		if (!base || !is_sandbox_name(base + 1))
			continue;
		char full[PATH_MAX + 64];
		snprintf(full, sizeof full, "%s/%s", root, base + 1);
		size_t fl = strlen(full), sl = strlen(src);
		if (sl > fl || strcmp(full + fl - sl, src) != 0)
			continue;
		snprintf(id, idlen, "%s", base + 1);
		found = true;
	}
	free(line);
	fclose(f);
	return found;
}

/* Whether a daemon still owns the tree whose top bwrap is top: one of its
 * ancestors is an sbfs process (not so once it was reparented). */
static bool daemon_owns(pid_t top)
{
	for (pid_t p = local_parent_of(top); p > 1; p = local_parent_of(p))
		if (comm_is(p, "sbfs"))
			return true;
	return false;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Kills the sandbox whose pid 1 is init (and the bwrap above it, top, if
 * it still runs); 0 once pid 1 is gone. The pidfds are taken first and
 * the command line read again, so a pid reused meanwhile is not hit. */
static int kill_tree(pid_t init, pid_t top)
{
	int ifd = pidfd_open_(init);
	if (ifd < 0)
		return errno == ESRCH ? 0 : -errno;
	int tfd = top != init ? pidfd_open_(top) : -1;
	int rc = 0;
	if (!is_sandbox_bwrap(init)) {
		rc = 0; /* gone, and its pid taken by another process */
	} else {
		syscall(SYS_pidfd_send_signal, ifd, SIGKILL, NULL, 0);
		if (tfd >= 0 && is_sandbox_bwrap(top))
			syscall(SYS_pidfd_send_signal, tfd, SIGKILL, NULL, 0);
		struct pollfd p = {.fd = ifd, .events = POLLIN};
		int n;
		while ((n = poll(&p, 1, GONE_WAIT_MS)) < 0 && errno == EINTR)
			;
		rc = n > 0 ? 0 : -ETIMEDOUT;
	}
	if (tfd >= 0)
		close(tfd);
	close(ifd);
	return rc;
}

size_t local_sweep_trees(const char *workdir, const char *root)
{
	char rroot[PATH_MAX];
	if (!realpath(root, rroot))
		snprintf(rroot, sizeof rroot, "%s", root);
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	size_t killed = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long v = strtol(e->d_name, &end, 10);
		if (*end || v <= 1)
			continue;
		pid_t pid = (pid_t)v;
		char id[256];
		bool deleted = false;
		/* bwrap's pid 1: the one of its two processes in the sandbox's
		 * mount namespace */
		if (!is_sandbox_bwrap(pid) ||
		    !workspace_of(pid, workdir, rroot, id, sizeof id, &deleted))
			continue;
		pid_t top = pid;
		while (is_sandbox_bwrap(local_parent_of(top)))
			top = local_parent_of(top);
		if (daemon_owns(top))
			continue;
		const char *why = deleted ? "its workspace is gone" : "its sbfs daemon is gone";
		pid_t parent = local_parent_of(top);
		if (kill_tree(pid, top) < 0) {
			fprintf(stderr, "sbfs: sweep: the sandbox %s (pid %d) still runs %d s after it was killed: %s\n",
				id, (int)pid, GONE_WAIT_MS / 1000, why);
			continue;
		}
		printf("killed the processes of sandbox %s (pid %d, parent %d: %s)\n", id,
		       (int)pid, (int)parent, why);
		killed++;
	}
	closedir(d);
	return killed;
}
