/* The lifecycle of one mount: backend → create → mount → serve → unmount →
 * flush → destroy. A failure at any step undoes the steps before it. */
#include "mount.h"
#include "sandbox_claim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/fault_inject.h"
#include "control/client.h"
#include "control/frame.h"
#include "control/server.h"
#include "fs/coherence.h"
#include "fs/core/fs.h"
#include "fs/fuse_adapter.h"
#include "fs/writeback/wb_journal.h"
#include "fs/writeback/writeback.h"
#include "util/crash_report.h"
#include "util/log.h"

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

/* log_path: -o log=, or NULL for syslog (the journal); tag: the
 * mountpoint, which starts each syslog line. */
static void report_ready(int status, const char *log_path, const char *tag)
{
	if (ready_fd < 0)
		return;
	/* From here on the daemon speaks only to its log. */
	int fd = log_path ? open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)
			  : -1;
	if (fd < 0)
		fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (status == 0 && !log_path)
		sb_log_to_syslog(tag);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (status == 0) {
		sb_log_set_timestamps(true);
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

/* A directory with files would have them hidden by the mount. */
static bool dir_has_entries(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return false;
	struct dirent *e;
	bool any = false;
	while (!any && (e = readdir(d)))
		any = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return any;
}

/* The sbfs mount that abs is inside of, if any, into outer. */
static bool inside_sbfs_mount(const char *abs, char *outer, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	bool found = control_mountinfo_sbfs_ancestor(f, abs, outer, len) == 0;
	fclose(f);
	return found;
}

/* A FUSE mount whose daemon died stays mounted; only a lazy unmount
 * clears it. */
static void dead_mount_error(const char *path, int e, char *err, size_t errlen)
{
	snprintf(err, errlen,
		 "%.200s is a dead mount (%s: its daemon is gone); clear it with 'fusermount3 -u -z %.200s' and mount again",
		 path, strerror(e), path);
}

static int check_mountpoint(const char *given, bool nonempty, char *abs,
			    char *err, size_t errlen)
{
	struct stat st;
	if (stat(given, &st) < 0) {
		if (errno == ENOTCONN)
			dead_mount_error(given, errno, err, errlen);
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
		DIR *d = opendir(abs);
		int e = d ? 0 : errno;
		if (d)
			closedir(d);
		if (e == ENOTCONN || e == ECONNABORTED)
			dead_mount_error(abs, e, err, errlen);
		else
			snprintf(err, errlen,
				 "%.300s is already a mountpoint (busy); unmount it first or pick another directory",
				 abs);
		return -1;
	}
	if (access(abs, W_OK | X_OK) < 0 && getuid() != 0) {
		snprintf(err, errlen, "mountpoint %.300s is not writable by you", abs);
		return -1;
	}
	char outer[PATH_MAX];
	if (inside_sbfs_mount(abs, outer, sizeof outer)) {
		snprintf(err, errlen,
			 "%.200s is inside the sbfs mount %.200s: a mount there would hang on its own "
			 "sandbox's answers; pick a directory outside it",
			 abs, outer);
		return -1;
	}
	if (!nonempty && dir_has_entries(abs)) {
		snprintf(err, errlen,
			 "mountpoint %.300s is not empty: the mount would hide its files until "
			 "unmount; empty it, pick another directory, or pass -o nonempty",
			 abs);
		return -1;
	}
	return 0;
}

/* Where libfuse looks for fusermount3: its own directory, then PATH. */
static bool fusermount_found(void)
{
	if (access("/usr/bin/fusermount3", X_OK) == 0 ||
	    access("/bin/fusermount3", X_OK) == 0)
		return true;
	const char *path = getenv("PATH");
	char dir[PATH_MAX + 16];
	for (const char *p = path; p && *p;) {
		size_t n = strcspn(p, ":");
		if (n > 0 && n < PATH_MAX) {
			snprintf(dir, sizeof dir, "%.*s/fusermount3", (int)n, p);
			if (access(dir, X_OK) == 0)
				return true;
		}
		p += n + (p[n] == ':');
	}
	return false;
}

/* What the kernel mount needs, checked before a sandbox is made (on
 * modal and e2b a create costs money, and a failed mount's undo is one
 * more way to leave it running): /dev/fuse that this user can open
 * read-write (libfuse opens it itself, also where fusermount3 mounts),
 * and fusermount3 where the daemon cannot mount by itself (not root). */
static int check_fuse_access(char *err, size_t errlen)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		struct stat st;
		if (e == ENOENT)
			snprintf(err, errlen,
				 "no /dev/fuse on this machine: load the module (modprobe fuse), or give a container the device (docker run --device /dev/fuse)");
		else if (stat("/dev/fuse", &st) == 0)
			snprintf(err, errlen,
				 "no access to /dev/fuse: %s (mode %04o, owner %u:%u; you are %u:%u): it must be readable and writable by you, as most systems ship it (mode 0666)",
				 strerror(e), (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
				 (unsigned)st.st_gid, (unsigned)getuid(), (unsigned)getgid());
		else
			snprintf(err, errlen, "no access to /dev/fuse: %s", strerror(e));
		return -1;
	}
	close(fd);
	if (geteuid() != 0 && !fusermount_found()) {
		snprintf(err, errlen,
			 "fusermount3 is not installed: sbfs needs it to mount as a user other than root (install the fuse3 package)");
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

static void hook_command_ended(void *arg)
{
	fs_command_ended(arg);
}

/* ---- the backend's watch ---- */

static void watch_changed(void *arg, const char *relpath, const struct stat *st)
{
	fs_changed(arg, relpath, st);
}

static void watch_lost(void *arg, const char *why)
{
	(void)why; /* the backend logs it */
	struct fs *fs = arg;
	fs_watch_lost(fs);
	/* A watcher ends with its sandbox: one question tells whether the
	 * sandbox is still there, so that a mount whose sandbox was destroyed
	 * says so (status, the next call) rather than "running". */
	struct stat st;
	int r = sb_stat(fs->b, fs->workdir, &st, NULL);
	if (r < 0 && !sb_backend_is_dead(fs->b))
		sb_info("after the watch ended, the sandbox's workdir %s: %s", fs->workdir,
			strerror(-r));
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
	fs_fuse_status(fs, obj);
}

/* The session's -o string. The source names the control socket
 * (SBFS_MOUNT_SOURCE_PREFIX), with the commas and backslashes of its path
 * escaped for libfuse's option parser; nosuid,nodev last, after what the
 * user passed: a setuid file or a device node the sandbox made never acts
 * with this machine's rights. NULL when out of memory. */
static char *fuse_options(const char *sock, const char *user_opts)
{
	char escaped[2 * PATH_MAX], *e = escaped;
	for (const char *p = sock; *p; p++) {
		if (*p == ',' || *p == '\\')
			*e++ = '\\';
		*e++ = *p;
	}
	*e = '\0';
	char *s = NULL;
	if (asprintf(&s, "fsname=%s%s,subtype=sbfs,default_permissions%s%s,nosuid,nodev",
		     SBFS_MOUNT_SOURCE_PREFIX, escaped, user_opts ? "," : "",
		     user_opts ? user_opts : "") < 0)
		return NULL;
	return s;
}

/* Unmount-time flush: whatever cannot reach the sandbox is saved locally
 * and named, never dropped in silence. lost: files neither uploaded nor
 * saved (their journal entries are then kept for the next start). */
static size_t saved_count, lost_count;
/* What the teardown has to tell `sbfs umount`, as the lines it logged. */
static json_t *teardown_lines;

static void teardown_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void teardown_say(const char *fmt, ...)
{
	char line[SB_REASON_MAX * 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	sb_err("%s", line);
	if (!teardown_lines)
		teardown_lines = json_array();
	json_array_append_new(teardown_lines, json_string(line));
}

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
		teardown_say("unmount: %zu file(s) could not be uploaded (%s); saved in %s: %s",
			     rep.saved, msg, dir, rep.saved_paths ? rep.saved_paths : "?");
	if (rep.lost)
		teardown_say("unmount: %zu file(s) could not be uploaded (%s) nor saved in %s; "
			     "their data is lost: %s", rep.lost, msg, dir,
			     rep.lost_paths ? rep.lost_paths : "?");
	if (!rep.saved && !rep.lost)
		teardown_say("unmount: the final upload failed (%s)", msg);
	fs_save_report_free(&rep);
	return -1;
}

/* Tells the `sbfs umount` waiting on fd (if one is) how the teardown
 * went, once the sandbox is gone. */
static void send_teardown_report(int fd, int status, const char *id,
				 bool kept, bool destroyed)
{
	if (fd >= 0) {
		json_t *lines = teardown_lines ? json_incref(teardown_lines) : json_array();
		json_t *o = json_pack("{s:i,s:s,s:b,s:b,s:o}", "status", status,
				      "sandbox", id, "kept", kept, "destroyed",
				      destroyed, "messages", lines);
		struct frame_writer w;
		frame_writer_init(&w, fd);
		if (!o || frame_write_json(&w, FRAME_JSON, o) < 0)
			sb_debug("unmount report not delivered (its client left)");
		frame_writer_destroy(&w);
		json_decref(o);
		close(fd);
	}
	json_decref(teardown_lines);
	teardown_lines = NULL;
}

int sbfs_mount_run(struct mount_options *o)
{
	char err[SB_REASON_MAX] = "";
	char mountpoint[PATH_MAX];
	if (sb_backend_check_spec(o->backend, &o->spec, err, sizeof err) < 0 ||
	    check_mountpoint(o->mountpoint, o->nonempty, mountpoint, err, sizeof err) < 0 ||
	    check_fuse_access(err, sizeof err) < 0) {
		sb_err("%s", err);
		return 1;
	}
	if (o->debug)
		sb_log_set_level(SB_LOG_DEBUG);
	if (o->log_level >= 0)
		sb_log_set_level((enum sb_log_level)o->log_level);
	if (!o->foreground)
		detach_and_wait();

	/* The sandbox is created here, on the main thread, which lives until
	 * exit: the local backend ties the sandbox's life to this thread. */
	char name[SB_NAME_MAX];
	snprintf(name, sizeof name, "%s", o->spec.name);
	/* An attached sandbox is claimed before anything touches it: one
	 * already mounted is refused, and left as it is. */
	int claim = -1;
	if (o->spec.attach_id) {
		claim = sandbox_claim(o->backend->name, o->spec.attach_id, mountpoint,
				      err, sizeof err);
		if (claim == -2) {
			sb_err("%s", err);
			report_ready(1, NULL, NULL);
			return 1;
		}
	}
	struct sb_backend *b = sb_backend_create(o->backend, &o->spec, o->shell_ops,
						 err, sizeof err);
	if (!b) {
		sb_err("%s", err);
		sandbox_claim_drop(claim, o->backend->name, o->spec.attach_id);
		report_ready(1, NULL, NULL);
		return 1;
	}
	char claimed_id[sizeof b->id];
	snprintf(claimed_id, sizeof claimed_id, "%s",
		 o->spec.attach_id ? o->spec.attach_id : b->id);
	if (!o->spec.attach_id)
		claim = sandbox_claim(o->backend->name, b->id, mountpoint, err, sizeof err);

	b->inject_latency_ms = o->inject_latency_ms;
	b->call_timeout_s = o->call_timeout;
	b->faults = o->inject_faults; /* the backend object owns it now */
	o->inject_faults = NULL;
	fault_after_create(b);
	int status = 1;
	char sock[PATH_MAX] = "", log_path[PATH_MAX] = "";
	struct control_server *ctl = NULL;
	struct fuse_session *se = NULL;
	struct fs_fuse fuse_link;
	struct fs fs;
	bool fs_ready = false, mounted = false;
	pthread_t hup;
	bool hup_started = false, watching = false;
	int report_fd = -1;
	const char *log_where = o->log_path ? o->log_path
				: o->foreground ? "the messages above"
						: "the system log: journalctl -t sbfs";
	int r = control_socket_path(name, sock, sizeof sock);
	if (r < 0) {
		sb_err("cannot make a directory for the control socket: %s", strerror(-r));
		goto out;
	}
	/* Without -o log=, a daemon's lines go to syslog, a foreground one's
	 * to the terminal. */
	if (o->log_path)
		snprintf(log_path, sizeof log_path, "%s", o->log_path);
	if (!o->spool_dir)
		o->spool_dir = strdup(wb_default_spool_dir());

	struct fs_config cfg = {
		.attr_timeout = o->attr_timeout,
		.dir_timeout = o->dir_timeout,
		.spool_dir = o->spool_dir,
		.log_path = o->log_path ? log_path : o->foreground ? NULL : "syslog",
		.writeback = o->writeback,
		.max_nodes = o->max_nodes,
		.idmap_none = o->idmap_none,
		.owner_uid = o->owner_uid,
		.owner_gid = o->owner_gid,
		.timeouts_set = o->timeouts_set,
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
		.command_ended = hook_command_ended,
		.status = hook_status,
	};
	ctl = control_server_start(sock, mountpoint, b, &hooks, err, sizeof err);
	if (!ctl) {
		sb_err("%s", err);
		goto out;
	}

	char *fsname = fuse_options(sock, o->fuse_opts);
	if (!fsname) {
		sb_err("out of memory");
		goto out;
	}
	char *fargv[] = {"sbfs", "-o", fsname, o->debug ? "-d" : NULL, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, fargv);
	se = fuse_session_new(&args, fs_fuse_ops(), sizeof *fs_fuse_ops(), &fs);
	fuse_opt_free_args(&args);
	free(fsname);
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
	if (fault_plan_fails_mount(b->faults)) {
		sb_warn("inject_faults: error fault on the mount step");
		sb_err("cannot mount at %s: %s", mountpoint, strerror(EIO));
		goto out;
	}
	if (fuse_session_mount(se, mountpoint) < 0) {
		sb_err("cannot mount at %s (see the message above)", mountpoint);
		goto out;
	}
	mounted = true;
	/* Watched from the mount on: the kernel's notifications need it. */
	const struct sb_watch_sink sink = {.arg = &fs, .changed = watch_changed,
					   .lost = watch_lost};
	if (o->watch == WATCH_ON && sb_watch_start(b, &sink) < 0)
		sb_warn("this sandbox cannot be watched (see above): cached attributes and listings expire after their timeouts");
	else if (o->watch == WATCH_ON) {
		watching = true;
		atomic_store(&fs.watched, true);
	}
	if (b->spec.keep)
		printf("%s\n", b->id);
	fflush(stdout);
	report_ready(0, o->log_path ? log_path : NULL, mountpoint);
	sb_crash_report_install();
	sb_info("sandbox %s (%s%s%s) mounted at %s", b->id, b->ops->name,
		b->endpoint[0] ? " at " : "", b->endpoint, mountpoint);
	/* after the line above: idle time never starts before it */
	atomic_store(&b->ready, true);

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_max_threads(lc, 16);
	fuse_loop_cfg_set_idle_threads(lc, 8);
	r = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	status = r < 0 ? 1 : 0;

out:
	/* Teardown, in reverse. */
	report_fd = control_server_take_unmount_fd(ctl);
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
	/* After the commands (which settle it) and the last uploads (which
	 * tell it their changes), before the session, the fs and the
	 * sandbox go. */
	if (watching)
		sb_watch_stop(b);
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
	bool destroyed = false;
	if (sb_backend_destroy(b) < 0) {
		status = 1;
		teardown_say("the sandbox %s may still run (see %s); `sbfs sweep -o backend=%s` removes what sbfs left",
			     id, log_where, o->backend->name);
	} else if (keep) {
		sb_info("sandbox %s kept; mount it again with -o attach=%s", id, id);
	} else {
		destroyed = true;
		sb_info("sandbox %s destroyed", id);
	}
	/* Free for the next attach= once the sandbox is kept or gone, before
	 * `sbfs umount` hears that the unmount ended. */
	sandbox_claim_drop(claim, o->backend->name, claimed_id);
	/* A clean unmount leaves nothing behind: the socket went with the
	 * control server, and there is no log file but one given with -o
	 * log=, which is the user's. */
	if (!mounted)
		report_ready(1, NULL, NULL);
	send_teardown_report(report_fd, status, id, keep, destroyed);
	return status;
}
