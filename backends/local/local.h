/* Private to the local backend: local.c (its life), local_workspace.c
 * (the host directory), local_bwrap.c (the sandbox process), local_exec.c
 * (commands in it), local_files.c (native file operations on the host
 * workspace dir), local_read.c (reads there), local_watch.c (its
 * changes, reported by inotify). */
#ifndef SBFS_BACKENDS_LOCAL_H
#define SBFS_BACKENDS_LOCAL_H

#include "backends/backend.h"
#include "local_userns.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

struct local {
	char host_dir[4096];  /* the workspace on the host */
	int ws_fd;            /* O_PATH of host_dir: root of all native ops */
	bool owns_dir;        /* created by us (not attached): removed on destroy */
	bool disk_mounted;    /* host_dir is its image's mount (-o disk=), by us */
	pid_t bwrap_pid;      /* our child; only the watcher reaps it */
	int bwrap_pidfd;      /* readable once bwrap has exited */
	pid_t init_pid;       /* pid 1 of the sandbox, as seen from the host */
	int init_pidfd;       /* readable once pid 1, and so every process
			       * of the sandbox's pid namespace, is gone */
	pthread_t watcher;
	bool watcher_started;
	pthread_mutex_t lock; /* serialises destroy/release */
	bool stopping;        /* we are killing it: its exit is not a failure */
	struct id_map ids;    /* sandbox ids <-> host ids (identity unless root) */
	int userns_fd;        /* the mapped user namespace, or -1 */
	char stage_dir[4200]; /* host_dir bound where the mapped ids may reach it */
	bool staged;          /* stage_dir is mounted, by us */
	/* change notifications, while watched; read by the file
	 * operations of any thread */
	struct local_watch *_Atomic watch;
};

/* local.c: a one-line reason for b->error, printf-style */
void local_set_error(struct sb_backend *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* local_workspace.c */
/* Makes l->host_dir (or attaches the one spec.attach_id names) */
int local_make_workspace(struct sb_backend *b, struct local *l);
/* Removes a workspace we made: its image, its tree, its marker */
void local_discard_workspace(struct local *l);
/* Binds the workspace where a mapped user namespace can reach it (a
 * no-op unmapped), and undoes that */
int local_stage_workspace(struct sb_backend *b, struct local *l);
void local_unstage_workspace(struct local *l);
/* `sbfs sweep`, and the listing it works from (`sbfs list`) */
int local_sweep(const struct sb_spec *spec);
int local_list_owned(const struct sb_spec *spec, struct sb_owned **v,
		     size_t *n, char *err, size_t errlen);

/* local_bwrap.c: starts the sandbox process on the workspace; from the
 * thread that will live as long as the sandbox */
int local_spawn_bwrap(struct sb_backend *b, struct local *l);
/* SIGKILL to the sandbox's pid 1 and to bwrap, each through its pidfd;
 * the watcher (or whoever reaps bwrap) still has to wait for bwrap */
void local_kill_sandbox(struct local *l);
/* 0 once every process of the sandbox is gone, -ETIMEDOUT if some still
 * runs after timeout_ms */
int local_wait_sandbox_gone(struct local *l, int timeout_ms);

/* local_orphans.c: sweep's kill of sandbox trees under root whose daemon
 * is gone (their workspace too, often); how many it killed */
size_t local_sweep_trees(const char *workdir, const char *root);
/* The parent of pid, from /proc; 0 if it cannot be read */
pid_t local_parent_of(pid_t pid);

/* local_exec.c */
int local_exec(struct sb_backend *b, const struct sb_exec_req *req,
	       struct sb_exec_result *res);

/* local_watch.c: inotify on the workspace (the backend's watch slots) */
int local_watch_start(struct sb_backend *b, const struct sb_watch_sink *sink);
int local_watch_settle(struct sb_backend *b);
void local_watch_stop(struct sb_backend *b);
/* The mount's own change to rel (mount-relative), around its syscalls:
 * see own_changes.h. No-ops unwatched. */
bool local_watch_begin(struct sb_backend *b, const char *rel);
void local_watch_end(struct sb_backend *b, const char *rel, bool marked,
		     const struct stat *left, bool gone);

/* local_files.c */
/* The part of a guest path under the workdir, or NULL when outside */
const char *local_relative(struct sb_backend *b, const char *path);
/* 0, or -EIO (the backend marked dead) once the sandbox is being
 * destroyed: its workspace may still be open here */
int local_check_live(struct sb_backend *b);
int local_write_files(struct sb_backend *b, struct sb_upload *v, size_t n);
int local_write_file(struct sb_backend *b, struct sb_upload *u);
int local_list_dir(struct sb_backend *b, const char *path,
		   struct sb_dirlist *out);
int local_stat(struct sb_backend *b, const char *path, struct stat *st,
	       char **link_target);
/* local_stat without the guest's help: -ELOOP where a symlink is on the
 * way (the watch asks from its own thread, which runs no commands) */
int local_stat_native(struct sb_backend *b, const char *path, struct stat *st,
		      char **link_target);
int local_mkdir(struct sb_backend *b, const char *path, mode_t mode);
int local_remove(struct sb_backend *b, const char *path, bool is_dir);
int local_ns_many(struct sb_backend *b, struct sb_ns_change *v, size_t n);
int local_rename(struct sb_backend *b, const char *from, const char *to,
		 bool noreplace);
int local_chmod(struct sb_backend *b, const char *path, mode_t mode);
int local_truncate(struct sb_backend *b, const char *path, off_t size);
int local_utimens(struct sb_backend *b, const char *path,
		  const struct timespec ts[2]);
int local_symlink(struct sb_backend *b, const char *target,
		  const char *linkpath);
int local_chown(struct sb_backend *b, const char *path, uid_t uid, gid_t gid);
int local_link(struct sb_backend *b, const char *from, const char *to,
	       struct stat *st);
int local_readlink(struct sb_backend *b, const char *path, char **target);
int local_statfs(struct sb_backend *b, const char *path, struct statvfs *st);

/* local_read.c: a read window served on the host, as the guest's read
 * would serve it (the backend's read slot) */
int local_read(struct sb_backend *b, const char *path, off_t off, size_t len,
	       const struct sb_read_sink *sink, size_t *got);

#endif
