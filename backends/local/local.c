/* The `local` backend: a bubblewrap sandbox on this machine. The host
 * system is visible read-only (/usr, /etc, /opt), the workspace is a host
 * directory bound at the workdir, nothing else of the host is. Commands
 * enter the running sandbox's namespaces with nsenter and drop every
 * capability with setpriv before running (local_exec.c).
 *
 * This file: what the sandbox may be asked for, and its life (create,
 * the watcher, destroy, release); local_workspace.c makes the host
 * directory, local_bwrap.c starts the sandbox process on it. */
#include "local.h"
#include "local_disk.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const local_option_keys[] = {"local_root", NULL};

/* How long a killed sandbox may take to be gone: its processes have to
 * be scheduled to die, which on a loaded machine takes a while. */
#define GONE_TIMEOUT_MS 30000

void local_set_error(struct sb_backend *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->error, sizeof(b->error), fmt, ap);
	va_end(ap);
}

/* ---- what may be asked for ---- */

static const char *local_refuse(const struct sb_spec *s)
{
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
	return why;
}

/* ---- lifecycle ---- */

static void *watch_sandbox(void *arg)
{
	struct sb_backend *b = arg;
	struct local *l = b->priv;
	unsigned life = b->spec.sandbox_timeout_s;
	double end = call_deadline_now() + life;
	for (;;) {
		int wait_ms = -1;
		if (life) {
			double left = end - call_deadline_now();
			wait_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
		}
		struct pollfd p = {.fd = l->bwrap_pidfd, .events = POLLIN};
		int n = poll(&p, 1, wait_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			sb_backend_fail(b, "sandbox lifetime (%u s) ended", life);
			local_kill_sandbox(l);
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

/* 0 once every process of the sandbox is gone; -ETIMEDOUT while one
 * still runs (then a later call waits again). */
static int stop_sandbox(struct local *l)
{
	pthread_mutex_lock(&l->lock);
	l->stopping = true;
	pthread_mutex_unlock(&l->lock);
	local_kill_sandbox(l);
	if (l->watcher_started) {
		pthread_join(l->watcher, NULL); /* it reaps bwrap */
		l->watcher_started = false;
	} else if (l->bwrap_pid > 0) {
		waitpid(l->bwrap_pid, NULL, 0);
	}
	l->bwrap_pid = 0;
	int rc = local_wait_sandbox_gone(l, GONE_TIMEOUT_MS);
	if (rc == 0 && l->init_pidfd >= 0) {
		close(l->init_pidfd);
		l->init_pidfd = -1;
	}
	local_unstage_workspace(l);
	return rc;
}

static int local_create(struct sb_backend *b, const struct sb_spec *spec)
{
	(void)spec; /* b->spec is the same, and owned; local_refuse took it */
	struct local *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->ws_fd = l->bwrap_pidfd = l->init_pidfd = l->userns_fd = -1;
	pthread_mutex_init(&l->lock, NULL);
	b->priv = l;
	int rc = id_map_choose(&l->ids, b->error, sizeof b->error);
	if (rc < 0)
		return rc;
	if (l->ids.mapped && (l->userns_fd = id_map_open_userns(&l->ids)) < 0) {
		rc = l->userns_fd;
		l->userns_fd = -1;
		local_set_error(b, "cannot make the sandbox's user namespace (host ids %u+%u): %s",
			  (unsigned)l->ids.uid_base, l->ids.count, strerror(-rc));
		return rc;
	}
	rc = local_make_workspace(b, l);
	if (rc < 0)
		return rc;
	l->ws_fd = open(l->host_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (l->ws_fd < 0) {
		rc = -errno;
		local_set_error(b, "cannot open the workspace directory %.400s", l->host_dir);
	}
	if (rc == 0)
		rc = local_spawn_bwrap(b, l);
	if (rc == 0) {
		int e = pthread_create(&l->watcher, NULL, watch_sandbox, b);
		l->watcher_started = e == 0;
		rc = -e;
	}
	if (rc < 0) {
		stop_sandbox(l);
		if (l->owns_dir)
			local_discard_workspace(l);
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
	int rc = stop_sandbox(l);
	if (rc < 0) {
		/* its workspace stays, so that `sbfs sweep` finds the tree */
		local_set_error(b, "sandbox %s: processes of it still run %d s after they were killed",
				b->id, GONE_TIMEOUT_MS / 1000);
		sb_err("%s", b->error);
		return rc;
	}
	/* an attached workspace is destroyed only when asked to be (`sbfs
	 * destroy`): an unmount keeps it */
	if (l->owns_dir || b->spec.attach_id)
		local_discard_workspace(l);
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
	if (stop_sandbox(l) < 0)
		sb_warn("sandbox %s: processes of it still run after they were killed (`sbfs sweep -o backend=local` kills them)",
			b->id);
	if (l->bwrap_pidfd >= 0)
		close(l->bwrap_pidfd);
	if (l->init_pidfd >= 0)
		close(l->init_pidfd);
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
	.refuse = local_refuse,
	.create = local_create,
	.exec = local_exec,
	.exec_signals = true,
	.exec_tty = true,
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
	.read = local_read,
	.sweep = local_sweep,
	.list_owned = local_list_owned,
	.ns_many = local_ns_many,
	.confirm_alive = local_confirm_alive,
	.watch_start = local_watch_start,
	.watch_settle = local_watch_settle,
	.watch_stop = local_watch_stop,
};
