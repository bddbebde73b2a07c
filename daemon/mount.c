/* The lifecycle of one mount: backend → create → mount → serve → unmount →
 * flush → destroy. A failure at any step undoes the steps before it. */
#include "mount.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../control/server.h"
#include "../fs/fs.h"
#include "../fs/fuse_adapter.h"
#include "../fs/wb_journal.h"
#include "../fs/writeback.h"
#include "../util/log.h"

/* ---- daemonizing: the parent waits for the child's verdict ---- */

static int ready_fd = -1;

/* Forks; the parent exits with the child's result once the mount is ready
 * or has failed. Returns in the child. */
static void detach_and_wait(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		sb_err("cannot create a pipe: %s", strerror(errno));
		exit(1);
	}
	pid_t pid = fork();
	if (pid < 0) {
		sb_err("cannot fork: %s", strerror(errno));
		exit(1);
	}
	if (pid > 0) {
		close(p[1]);
		char status = 1;
		ssize_t n;
		do {
			n = read(p[0], &status, 1);
		} while (n < 0 && errno == EINTR);
		if (n != 1) {
			/* The child died before saying anything. */
			int ws;
			waitpid(pid, &ws, 0);
			exit(1);
		}
		exit(status);
	}
	close(p[0]);
	ready_fd = p[1];
	setsid();
}

static void report_ready(int status, const char *log_path)
{
	if (ready_fd < 0)
		return;
	/* From here on the daemon speaks only to its log. */
	int fd = log_path ? open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)
			  : -1;
	if (fd < 0)
		fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (status == 0) {
		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
		}
		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		if (chdir("/") < 0) {
			/* not fatal: only keeps a directory busy */
		}
	}
	if (null >= 0)
		close(null);
	if (fd >= 0)
		close(fd);
	char c = (char)status;
	if (write(ready_fd, &c, 1) < 0) {
		/* the parent is gone; nothing to tell */
	}
	close(ready_fd);
	ready_fd = -1;
}

/* ---- checks before anything is created ---- */

static bool is_mountpoint(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	while (!found && getline(&line, &cap, f) > 0) {
		/* id parent maj:min root mountpoint ... */
		char *save = NULL, *field = strtok_r(line, " ", &save);
		for (int i = 0; field && i < 4; i++)
			field = strtok_r(NULL, " ", &save);
		if (!field)
			continue;
		/* Undo mountinfo's octal escapes of space, tab, \n and \\. */
		char *w = field;
		for (char *r = field; *r; r++) {
			if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] && r[3]) {
				*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
				r += 3;
			} else {
				*w++ = *r;
			}
		}
		*w = '\0';
		found = strcmp(field, path) == 0;
	}
	free(line);
	fclose(f);
	return found;
}

static int check_mountpoint(const char *given, char *abs, char *err, size_t errlen)
{
	struct stat st;
	if (stat(given, &st) < 0) {
		if (errno == ENOTCONN)
			snprintf(err, errlen,
				 "%s is a dead mount (a crashed sbfs?); clear it with: fusermount3 -u -z %s",
				 given, given);
		else
			snprintf(err, errlen, "mountpoint %s: %s (create it with: mkdir -p %s)",
				 given, strerror(errno), given);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "mountpoint %s is not a directory", given);
		return -1;
	}
	if (!realpath(given, abs)) {
		snprintf(err, errlen, "mountpoint %s: %s", given, strerror(errno));
		return -1;
	}
	if (is_mountpoint(abs)) {
		snprintf(err, errlen,
			 "%.300s is already a mountpoint (busy); unmount it first or pick another directory",
			 abs);
		return -1;
	}
	if (access(abs, W_OK | X_OK) < 0 && getuid() != 0) {
		snprintf(err, errlen, "mountpoint %.300s is not writable by you", abs);
		return -1;
	}
	return 0;
}

/* ---- SIGHUP: refresh every cache ---- */

static sem_t hup_sem;
static volatile sig_atomic_t hup_stop;

static void on_sighup(int sig)
{
	(void)sig;
	sem_post(&hup_sem);
}

static void *hup_thread(void *arg)
{
	struct fs *fs = arg;
	for (;;) {
		while (sem_wait(&hup_sem) < 0 && errno == EINTR)
			;
		if (hup_stop)
			return NULL;
		sb_info("SIGHUP: dropping cached attributes, listings and data");
		fs_invalidate(fs, "");
	}
}

/* ---- control hooks over the fs core ---- */

static int hook_flush_all(void *arg, char *msg, size_t msglen)
{
	int r = fs_flush_all(arg, msg, msglen);
	if (r == 0)
		msg[0] = '\0';
	/* Write-back's queued removes the sandbox refused (their files are
	 * kept there): `sbfs sync` and sbexec name them once. */
	int rr = wb_report_removes(arg, msg, msglen);
	return r ? r : rr;
}

static void hook_invalidate(void *arg, const char *relpath)
{
	fs_invalidate(arg, relpath);
}

static void hook_status(void *arg, json_t *obj)
{
	struct fs *fs = arg;
	const struct sb_counters *c = &fs->b->counters;
	json_object_set_new(obj, "retries",
			    json_integer((json_int_t)atomic_load(&c->retries)));
	json_object_set_new(obj, "deadlines",
			    json_integer((json_int_t)atomic_load(&c->deadlines)));
	json_object_set_new(obj, "faults_injected",
			    json_integer((json_int_t)atomic_load(&c->faults_injected)));
	json_object_set_new(obj, "call_timeout",
			    json_real(fs->b->call_timeout_s > 0 ? fs->b->call_timeout_s
								: SB_CALL_TIMEOUT_DEFAULT_S));
	fs_status(arg, obj);
}

static char *default_spool_dir(void)
{
	const char *t = getenv("TMPDIR");
	return strdup(t && *t ? t : "/var/tmp");
}

/* Unmount-time flush: whatever cannot reach the sandbox is saved locally
 * and named, never dropped in silence. lost: files neither uploaded nor
 * saved (their journal entries are then kept for the next start). */
static size_t saved_count, lost_count;

static int final_flush(struct fs *fs)
{
	char msg[512] = "";
	int r = fs_flush_all(fs, msg, sizeof msg);
	if (r == 0)
		return 0;
	char state[PATH_MAX], dir[PATH_MAX + SB_NAME_MAX + 16];
	wb_state_dir(state, sizeof state);
	snprintf(dir, sizeof dir, "%s/unsaved/%s", state, fs->b->spec.name);
	struct fs_save_report rep;
	fs_save_pending(fs, dir, &rep);
	saved_count = rep.saved;
	lost_count = rep.lost;
	/* The lines a user needs: what did not reach the sandbox, where each
	 * file is now, and which are lost; the daemon then exits non-zero. */
	if (rep.saved)
		sb_err("unmount: %zu file(s) could not be uploaded (%s); saved in %s: %s",
		       rep.saved, msg, dir, rep.saved_paths ? rep.saved_paths : "?");
	if (rep.lost)
		sb_err("unmount: %zu file(s) could not be uploaded (%s) nor saved in %s; "
		       "their data is lost: %s", rep.lost, msg, dir,
		       rep.lost_paths ? rep.lost_paths : "?");
	if (!rep.saved && !rep.lost)
		sb_err("unmount: the final upload failed (%s)", msg);
	fs_save_report_free(&rep);
	return -1;
}

int sbfs_mount_run(struct mount_options *o)
{
	char err[SB_REASON_MAX] = "";
	char mountpoint[PATH_MAX];
	if (check_mountpoint(o->mountpoint, mountpoint, err, sizeof err) < 0) {
		sb_err("%s", err);
		return 1;
	}
	if (o->debug)
		sb_log_set_level(SB_LOG_DEBUG);
	if (!o->foreground)
		detach_and_wait();

	/* The sandbox is created here, on the main thread, which lives until
	 * exit: the local backend ties the sandbox's life to this thread. */
	char name[SB_NAME_MAX];
	snprintf(name, sizeof name, "%s", o->spec.name);
	struct sb_backend *b = sb_backend_create(o->backend, &o->spec, o->shell_ops,
						 err, sizeof err);
	if (!b) {
		sb_err("%s", err);
		report_ready(1, NULL);
		return 1;
	}

	b->inject_latency_ms = o->inject_latency_ms;
	b->call_timeout_s = o->call_timeout;
	b->faults = o->inject_faults; /* the backend object owns it now */
	o->inject_faults = NULL;
	int status = 1;
	char sock[PATH_MAX], log_path[PATH_MAX];
	struct control_server *ctl = NULL;
	struct fuse_session *se = NULL;
	struct fs_fuse fuse_link;
	struct fs fs;
	bool fs_ready = false, mounted = false;
	pthread_t hup;
	bool hup_started = false;
	int r = control_socket_path(name, sock, sizeof sock);
	if (r < 0) {
		sb_err("cannot make a directory for the control socket: %s", strerror(-r));
		goto out;
	}
	if (o->log_path)
		snprintf(log_path, sizeof log_path, "%s", o->log_path);
	else
		snprintf(log_path, sizeof log_path, "%.*s.log",
			 (int)(strlen(sock) - strlen(".sock")), sock);
	if (!o->spool_dir)
		o->spool_dir = default_spool_dir();

	struct fs_config cfg = {
		.attr_timeout = o->attr_timeout,
		.dir_timeout = o->dir_timeout,
		.spool_dir = o->spool_dir,
		.control_socket = sock,
		.log_path = log_path,
		.writeback = o->writeback,
		.max_nodes = o->max_nodes,
		.idmap_none = o->idmap_none,
	};
	if (fs_init(&fs, b, &cfg) < 0) {
		sb_err("out of memory");
		goto out;
	}
	fs_ready = true;
	int probe = open(o->spool_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (probe < 0) {
		sb_err("spool directory %s is not usable: %s (set -o spool_dir=DIR)",
		       o->spool_dir, strerror(errno));
		goto out;
	}
	close(probe);
	if (o->writeback && wb_start(&fs, name, err, sizeof err) < 0) {
		sb_err("%s", err);
		goto out;
	}

	struct control_hooks hooks = {
		.arg = &fs,
		.flush_all = hook_flush_all,
		.invalidate = hook_invalidate,
		.status = hook_status,
	};
	ctl = control_server_start(sock, mountpoint, b, &hooks, err, sizeof err);
	if (!ctl) {
		sb_err("%s", err);
		goto out;
	}

	char fsname[SB_NAME_MAX + 64];
	snprintf(fsname, sizeof fsname,
		 "fsname=sbfs:%s,subtype=sbfs,default_permissions,nosuid,nodev", name);
	char *fargv[] = {"sbfs", "-o", fsname, o->debug ? "-d" : NULL, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, fargv);
	se = fuse_session_new(&args, fs_fuse_ops(), sizeof *fs_fuse_ops(), &fs);
	fuse_opt_free_args(&args);
	if (!se) {
		sb_err("cannot start the FUSE session (is /dev/fuse there and fuse3 installed?)");
		goto out;
	}
	fs_fuse_attach(&fs, &fuse_link, se);
	if (fuse_set_signal_handlers(se) < 0) {
		sb_err("cannot install signal handlers");
		goto out;
	}
	sem_init(&hup_sem, 0, 0);
	if (pthread_create(&hup, NULL, hup_thread, &fs) == 0) {
		hup_started = true;
		struct sigaction sa = {.sa_handler = on_sighup};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGHUP, &sa, NULL);
	}
	if (fuse_session_mount(se, mountpoint) < 0) {
		sb_err("cannot mount at %s (see the message above; is fusermount3 installed?)",
		       mountpoint);
		goto out;
	}
	mounted = true;
	if (b->spec.keep)
		printf("%s\n", b->id);
	fflush(stdout);
	report_ready(0, log_path);
	sb_info("sandbox %s (%s) mounted at %s", b->id, b->ops->name, mountpoint);

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_max_threads(lc, 16);
	fuse_loop_cfg_set_idle_threads(lc, 8);
	r = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	status = r < 0 ? 1 : 0;

out:
	/* Teardown, in reverse. */
	if (ctl)
		control_server_stop(ctl);
	if (fs_ready) {
		bool unsaved = final_flush(&fs) < 0;
		if (unsaved)
			status = 1;
		/* The journal goes once every file reached the sandbox or the
		 * unsaved folder. */
		wb_stop(&fs, unsaved && (lost_count > 0 || saved_count == 0));
	}
	if (hup_started) {
		hup_stop = 1;
		sem_post(&hup_sem);
		pthread_join(hup, NULL);
		signal(SIGHUP, SIG_DFL);
	}
	if (se) {
		if (mounted)
			fuse_session_unmount(se);
		fuse_remove_signal_handlers(se);
		fuse_session_destroy(se);
	}
	if (fs_ready)
		fs_destroy(&fs);
	/* A sandbox we created but never mounted is not left behind. */
	if (!mounted && !b->spec.attach_id)
		b->spec.keep = false;
	bool keep = b->spec.keep;
	char id[sizeof b->id];
	snprintf(id, sizeof id, "%s", b->id);
	if (sb_backend_destroy(b) < 0)
		status = 1;
	else if (keep)
		sb_info("sandbox %s kept; mount it again with -o attach=%s", id, id);
	if (!mounted)
		report_ready(1, NULL);
	return status;
}
