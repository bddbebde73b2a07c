/* The backend contract: what the fs core and the control server may ask of a
 * sandbox, and nothing vendor-specific.
 *
 * Paths given to a backend are absolute guest paths (the fs core joins the
 * sandbox workdir and the mount-relative path). Every call returns 0 on
 * success or a negative errno. Errors come in two kinds:
 *   - recoverable: a path problem (-ENOENT, -EISDIR, -EEXIST, ...), returned
 *     as is, the sandbox stays usable;
 *   - terminal: the sandbox or its credentials are gone. The backend calls
 *     sb_backend_fail() with a one-line reason, which marks the backend dead;
 *     that call and every later one return -EIO at once.
 */
#ifndef SBFS_BACKEND_H
#define SBFS_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#define SB_DEFAULT_WORKDIR "/workspace"
#define SB_NAME_MAX 64
#define SB_REASON_MAX 512

/* What the user asked the sandbox to be. A backend that cannot enforce a
 * field refuses to create the sandbox (create returns an error with a
 * reason) rather than provisioning something weaker. */
struct sb_spec {
	char *image;            /* NULL: the backend's default */
	char *workdir;          /* absolute; SB_DEFAULT_WORKDIR unless set */
	char **env;             /* NULL-terminated "K=V" list, may be NULL */
	bool block_network;     /* default true */
	char **allow_egress_to; /* NULL-terminated hostnames, or NULL */
	double cpu;             /* cores; 0 = unset */
	uint64_t memory_mb;     /* 0 = unset */
	uint64_t disk_mb;       /* size limit of the workspace; 0 = unset */
	unsigned sandbox_timeout_s; /* lifetime; 0 = backend default */
	unsigned idle_timeout_s;    /* 0 = none */
	char **tags;            /* NULL-terminated "k=v" labels, or NULL */
	char name[SB_NAME_MAX]; /* "sbfs-<random>", filled by sb_spec_init */
	char *attach_id;        /* mount this existing sandbox instead */
	bool keep;              /* leave the sandbox running after unmount */
	char **options;         /* NULL-terminated backend-specific "k=v" */
};

/* One sandbox of list_owned. */
enum sb_owned_state {
	SB_OWNED_IN_USE, /* its daemon runs (here, or on another host) */
	SB_OWNED_KEPT,   /* left on purpose: -o keep, or attached */
	SB_OWNED_ORPHAN, /* its daemon is gone: sweep removes it */
};
struct sb_owned {
	char id[256];        /* what -o attach= and `sbfs destroy` take, and
			      * `sbfs status` shows: the sbfs name if it has one */
	char ref[128];       /* the vendor's own id where it differs: sweep
			      * removes by it; "" otherwise */
	enum sb_owned_state state;
	time_t created;      /* 0: unknown */
	char why[160];       /* what the state rests on (an orphan: why it is one) */
};
#define SB_OWNED_NONE 1

/* Output callback: return 0 to go on, negative to abort the command (the
 * backend kills it and exec returns that value). */
typedef int (*sb_output_fn)(void *arg, const char *data, size_t len);

/* A terminal for the command (sbexec -t): everything it shows comes as
 * stdout (there is no separate stderr), and stdin is what is typed. */
struct sb_exec_tty {
	unsigned short rows, cols;
	/* readable: a new size, 4 bytes (exec_tty_resize reads it) */
	int resize_fd;
};

struct sb_exec_req {
	const char *const *argv; /* argv[0] looked up in the guest's PATH */
	const char *cwd;         /* absolute guest path; NULL = spec workdir */
	const char *const *env;  /* extra "K=V" on top of the spec env, or NULL */
	int stdin_fd;            /* read until EOF and fed to the command; -1 = empty */
	double timeout_s;        /* 0 = none */
	sb_output_fn on_stdout;  /* may be NULL: output discarded */
	sb_output_fn on_stderr;
	void *cb_arg;
	int cancel_fd;           /* readable = kill the command now; -1 = none */
	/* *signal_fd readable: one byte, a signal number
	 * (exec_forwarded_signal reads it) for the command's processes, which
	 * go on running. Polled only by a backend with exec_signals. A
	 * pointer so that a request that never sets it has none (NULL). */
	const int *signal_fd;
	/* NULL = pipes. Set only for a backend with exec_tty. */
	const struct sb_exec_tty *tty;
};

struct sb_exec_result {
	int exit_code;           /* valid when !timed_out && term_signal == 0 */
	int term_signal;         /* killed by this signal, 0 if exited */
	bool timed_out;          /* the timeout fired and the command was killed */
	bool cancelled;          /* cancel_fd fired and the command was killed */
	bool sandbox_terminated; /* the sandbox died during the command */
	double timeout_applied_s;/* the deadline actually enforced (0 = none) */
};

/* One directory entry, attributes as lstat would give them (symlinks not
 * followed). Ownership is the guest's; the fs core maps it. An owner or
 * group the sandbox named without a number (a user name only its passwd
 * maps) is SB_ID_UNTOLD: the entry's attributes are then only a reason to
 * stat it. */
#define SB_ID_UNTOLD ((unsigned)-1)
struct sb_dirent {
	char *name;
	struct stat st;
	char *link_target; /* symlinks only; NULL otherwise or if unknown */
};

struct sb_dirlist {
	struct sb_dirent *v;
	size_t n, cap;
};

struct sb_backend;

/* One file to upload: size bytes read with pread from fd offset 0 go to
 * path (absolute guest path). In a batch, rc is set by the call: 0 or a
 * negative errno for that file. */
struct sb_upload {
	const char *path;
	int fd;
	off_t size;
	mode_t mode;
	/* Unless tv_nsec is UTIME_OMIT: the mtime the file should get. A
	 * backend that gave it sets mtime_set, with what it gave here (see
	 * write_file); the fs core then knows the sandbox's mtime without
	 * asking. */
	struct timespec mtime;
	bool mtime_set;
	int rc;
};

/* One entry of a batch of namespace changes (write-back's queue, in
 * order): mkdir with mode when make, else rmdir when is_dir, else unlink
 * (a symlink itself, never its target). rc: 0 or a negative errno for
 * that entry. */
struct sb_ns_change {
	const char *path;
	bool is_dir;
	bool make;
	mode_t mode;
	int rc;
};

/* Where a backend's watch reports changes (watch_start). */
struct sb_watch_sink {
	void *arg;
	/* relpath (mount-relative, "" the root) changed: st is what the
	 * backend's stat would say of it now, or NULL when it is gone.
	 * relpath NULL: changes were lost, anything may have changed. */
	void (*changed)(void *arg, const char *relpath, const struct stat *st);
	/* The watch ended for good, for a one-line reason. */
	void (*lost)(void *arg, const char *why);
};

/* Each backend is a folder, backends/NAME/, defining one of these as
 * sb_NAME_ops, and NAME in backend_names (backends/meson.build). Required
 * slots: name, create, exec, destroy. Every file-op slot may be NULL: the
 * dispatcher then uses the shell implementation (shell_ops.h) over exec.
 * Reads run in the guest, capped (shell_read), unless the backend can keep
 * every promise of that read outside it (the read slot). */
struct sb_read_sink;
struct sb_backend_ops {
	const char *name;
	const char *summary;              /* one line for `sbfs --help` */
	const char *const *option_keys;   /* backend-specific -o keys accepted */
	/* Optional: why this backend cannot give what spec asks for (one
	 * line: what, and what to do), or NULL. Asked before anything is
	 * made, and before the mount's own checks (bad input is named
	 * first); create may refuse for what only it can find out. */
	const char *(*refuse)(const struct sb_spec *spec);

	int (*create)(struct sb_backend *b, const struct sb_spec *spec);
	int (*exec)(struct sb_backend *b, const struct sb_exec_req *req,
		    struct sb_exec_result *res);
	/* exec delivers req->signal_fd's signals to the command (sbexec's
	 * Ctrl-C reaches a trap); without it a Ctrl-C kills the command. */
	bool exec_signals;
	/* exec gives the command a terminal when req->tty asks (sbexec -t) */
	bool exec_tty;
	/* The most argv and env one exec passes to the sandbox, in bytes as
	 * exec_arg_text_only says; 0: SB_EXEC_ARG_MAX (exec_args.c). */
	size_t exec_arg_max;
	/* The limit counts each string and its NUL only (a vendor API's own
	 * check); otherwise a pointer per string too, as execve(2) does. */
	bool exec_arg_text_only;
	/* What the limit is, for the refusal: "ARG_MAX" if NULL. */
	const char *exec_arg_max_what;
	/* Idempotent: destroying a sandbox that is already gone is success.
	 * Called only when spec.keep is clear: for an attached sandbox, that
	 * is `sbfs destroy` asking for exactly this.
	 * Must work on a backend that sb_backend_fail() marked dead. */
	int (*destroy)(struct sb_backend *b);
	/* Release client-side resources; the sandbox itself is left alone. */
	void (*release)(struct sb_backend *b);

	/* Write u->size bytes read with pread from u->fd offset 0 to u->path,
	 * creating or truncating it; u->mode applies when the file is
	 * created. Parent directories are created. A backend that can give
	 * the file u->mtime in the same call does, and sets u->mtime_set
	 * (the dispatcher clears it before each attempt); one whose stat
	 * tells whole seconds gives the whole second and leaves it in
	 * u->mtime. */
	int (*write_file)(struct sb_backend *b, struct sb_upload *u);
	int (*list_dir)(struct sb_backend *b, const char *path,
			struct sb_dirlist *out);
	/* lstat semantics; *link_target (may be NULL) is set for symlinks.
	 * st_nlink 0: this call cannot tell a directory's link count (the
	 * Docker archive API); the fs core keeps the count it knew.
	 * st_uid and st_gid SB_ID_UNTOLD: this call cannot tell the owner
	 * (the same API); the fs core keeps the owner a listing or the
	 * mount's own chown told, else shows the sandbox's user. */
	int (*stat)(struct sb_backend *b, const char *path, struct stat *st,
		    char **link_target);
	int (*mkdir)(struct sb_backend *b, const char *path, mode_t mode);
	int (*remove)(struct sb_backend *b, const char *path, bool is_dir);
	/* Replaces an existing target atomically (rename(2) semantics);
	 * noreplace: fail with -EEXIST instead. */
	int (*rename)(struct sb_backend *b, const char *from, const char *to,
		      bool noreplace);
	int (*chmod)(struct sb_backend *b, const char *path, mode_t mode);
	int (*truncate)(struct sb_backend *b, const char *path, off_t size);
	/* ts[0] atime, ts[1] mtime; tv_nsec may be UTIME_NOW / UTIME_OMIT */
	int (*utimens)(struct sb_backend *b, const char *path,
		       const struct timespec ts[2]);
	int (*symlink)(struct sb_backend *b, const char *target,
		       const char *linkpath);
	/* lchown semantics: a symlink itself, never its target. Ids are the
	 * guest's; (uid_t)-1 / (gid_t)-1 leave that id as it is. */
	int (*chown)(struct sb_backend *b, const char *path, uid_t uid,
		     gid_t gid);
	/* link(2): a new name for an existing non-directory (-EPERM for a
	 * directory, -EEXIST when to exists). st (never NULL) is zeroed by
	 * the caller; a backend that has the new name's lstat at no extra
	 * cost fills it (st_ino set), so no stat call follows. */
	int (*link)(struct sb_backend *b, const char *from, const char *to,
		    struct stat *st);
	int (*readlink)(struct sb_backend *b, const char *path, char **target);
	int (*statfs)(struct sb_backend *b, const char *path, struct statvfs *st);
	/* A read window as sb_read_stream describes it, served without a
	 * command in the guest, with the guest read's promises: a regular
	 * file only (the same errnos), reached without following a symlink,
	 * nothing past the window or the size its identity gave, the
	 * identity taken from the open file before the data and after each
	 * segment (shell_read.c). A path it cannot serve so it hands to
	 * shell_read itself. */
	int (*read)(struct sb_backend *b, const char *path, off_t off, size_t len,
		    const struct sb_read_sink *sink, size_t *got);

	/* `sbfs sweep`: destroy sandboxes labelled by sbfs whose owning mount
	 * is gone; print one line per sandbox handled. May be NULL. */
	int (*sweep)(const struct sb_spec *spec);
	/* The sandboxes sbfs made for this user on this backend, as `sbfs
	 * list` shows them and sweep judges them (each backend's sweep
	 * works from this one listing). Creates nothing, answers within a
	 * few seconds. 0 with *v (malloc'd, free it) and *n; SB_OWNED_NONE
	 * when the backend is not set up here (no credentials: nothing to
	 * say); else -errno with a one-line reason in err (the engine cannot
	 * be reached). May be NULL: its sandboxes die with their daemon. */
	int (*list_owned)(const struct sb_spec *spec, struct sb_owned **v,
			  size_t *n, char *err, size_t errlen);

	/* Batch upload (write-back mode): every v[i] as write_file would,
	 * in one vendor call where the vendor has one. Sets each v[i].rc and
	 * returns 0 if all succeeded, else the first error. May be NULL: the
	 * dispatcher then loops over write_file. */
	int (*write_files)(struct sb_backend *b, struct sb_upload *v, size_t n);

	/* Batch of namespace changes (write-back mode): every v[i], in
	 * order, as mkdir or remove would; sets each v[i].rc and goes on
	 * after a failure. Returns 0, or an error of the call as a whole
	 * (then the rc of what was not tried stays as the dispatcher set it).
	 * May be NULL: the shell fallback does it in one guest command. */
	int (*ns_many)(struct sb_backend *b, struct sb_ns_change *v, size_t n);

	/* Asked after an upload put its data in place: whether the sandbox
	 * was still alive then. An upload into a sandbox that died on the
	 * way is lost with it, so it must not count. 0: alive; otherwise the
	 * backend is marked dead (sb_backend_fail, with the reason) and
	 * -EIO returned. As cheap as the backend allows: it runs once per
	 * upload call (once per batch). May be NULL where a successful
	 * upload already proves the sandbox ran when it ended. */
	int (*confirm_alive)(struct sb_backend *b);

	/* Change notifications (may be NULL: the mount then expires what it
	 * caches after its timeouts). watch_start reports every later change
	 * under the workspace, whoever made it, through sink, from a thread
	 * of the backend's own; 0, or -errno when the workspace cannot be
	 * watched. watch_settle delivers every change made before the call
	 * (the end of an sbexec command): 0, or -errno once the watch is
	 * lost. watch_stop ends it; no sink call runs after it returns. */
	int (*watch_start)(struct sb_backend *b, const struct sb_watch_sink *sink);
	int (*watch_settle)(struct sb_backend *b);
	void (*watch_stop)(struct sb_backend *b);
};

/* Backend calls by kind, for `sbfs status`, tests and benchmarks. */
enum sb_call {
	SB_CALL_CREATE,
	SB_CALL_EXEC,     /* sbexec commands */
	SB_CALL_READ,     /* capped in-guest read windows */
	SB_CALL_WRITE,
	SB_CALL_LIST,
	SB_CALL_STAT,
	SB_CALL_MKDIR,
	SB_CALL_REMOVE,
	SB_CALL_RENAME,
	SB_CALL_CHMOD,
	SB_CALL_TRUNCATE,
	SB_CALL_UTIMENS,
	SB_CALL_SYMLINK,
	SB_CALL_READLINK,
	SB_CALL_STATFS,
	SB_CALL_CHOWN,
	SB_CALL_LINK,
	SB_CALL_DESTROY,
	SB_CALL_COUNT
};

struct sb_counters {
	atomic_uint_fast64_t calls[SB_CALL_COUNT];
	atomic_uint_fast64_t errors[SB_CALL_COUNT];
	atomic_uint_fast64_t shell_fallbacks; /* calls served by shell_ops */
	atomic_uint_fast64_t bytes_up;        /* file data sent to the sandbox */
	atomic_uint_fast64_t bytes_down;      /* file data read from it */
	/* ---- faults (dispatch.c, fault_inject.c) ---- */
	atomic_uint_fast64_t retries;         /* attempts repeated after a transient error */
	atomic_uint_fast64_t deadlines;       /* calls ended by their deadline */
	atomic_uint_fast64_t faults_injected; /* -o inject_faults */
};

struct fault_plan;

struct guest_watch;

struct sb_backend {
	const struct sb_backend_ops *ops;
	void *priv;                 /* the backend's own state */
	struct sb_spec spec;        /* copy owned by the backend object */
	char id[256];               /* sandbox id, set by create/attach */
	/* Where the sandbox lives when the backend found it rather than was
	 * told (docker: the engine, its context): for the log and status.
	 * "" = nothing to say. */
	char endpoint[512];
	/* The user the sandbox runs its commands as, in its own ids: set by
	 * create (-o idmap=user shows it as the mounting user). */
	uid_t guest_uid;
	gid_t guest_gid;
	bool shell_only;            /* testing aid: ignore native file ops */
	unsigned inject_latency_ms; /* testing aid: each call waits this long */
	struct fault_plan *faults;  /* testing aid: -o inject_faults; owned */
	double call_timeout_s;      /* deadline of each file call; 0 = default */
	atomic_bool dead;
	char dead_reason[SB_REASON_MAX];
	char error[SB_REASON_MAX];  /* last create/exec failure, one line */
	struct sb_counters counters;
	/* Commands started and ended (sb_exec): while they differ, the
	 * sandbox may be changing under the mount; see sb_exec_quiet_mark. */
	atomic_uint_fast64_t execs_started, execs_ended;
	/* Set by the daemon once the mount serves: the idle clock
	 * (lifetime.h) does not run before, however long create took. */
	atomic_bool ready;
	/* Files open on the mount (the fs core's opens less its releases):
	 * a program holding one is using the sandbox. */
	atomic_uint_fast64_t files_open;
	/* The watcher inside the sandbox, for a backend whose watch slots
	 * are guest_watch.h's; NULL when none runs. */
	_Atomic(struct guest_watch *) guest_watch;
	/* Set by the fs core in write-back mode (queued removes), NULL
	 * otherwise; see struct sb_call_hooks. */
	const struct sb_call_hooks *hooks;
};

/* What the dispatcher asks the fs core around each call, so removes the
 * fs queued without a call stay invisible and ordered:
 *   before: ahead of every call except create, destroy and the batch
 *           remove itself, with the call's paths (to: link's and rename's
 *           new name, symlink's linkpath; once per file of a batch
 *           upload): lands whatever the call could conflict with or
 *           observe (rmq_call_waits in fs/writeback/wb_removes_queue.h);
 *   drain:  lands everything queued; true when anything was. A call the
 *           sandbox refused for want of space is tried once more after
 *           that (a queued remove would have freed it);
 *   gone:   stat of a path removed but not yet landed: true answers
 *           -ENOENT without a call;
 *   filter: after a successful list_dir: drops such entries. */
struct sb_call_hooks {
	void (*before)(void *arg, enum sb_call kind, const char *path,
		       const char *to);
	bool (*drain)(void *arg);
	bool (*gone)(void *arg, const char *path);
	void (*filter)(void *arg, const char *dir, struct sb_dirlist *l);
	void *arg;
};

/* ---- registry, lifecycle (registry.c) ---- */

const struct sb_backend_ops *sb_backend_find(const char *name);
/* Whether opt ("key" or "key=value") is one of ops' option_keys. */
bool sb_backend_option_known(const struct sb_backend_ops *ops, const char *opt);
/* NULL-terminated list of every compiled-in backend */
const struct sb_backend_ops *const *sb_backend_all(void);

void sb_spec_init(struct sb_spec *spec);   /* defaults + random name */
void sb_spec_free(struct sb_spec *spec);
/* Looks up a backend-specific "-o key=value" option; NULL if absent.
 * A bare flag "-o key" gives "". */
const char *sb_spec_option(const struct sb_spec *spec, const char *key);
/* For a vendor that enforces an egress allowlist by name only: an
 * allowlist needs block_network and -o egress_enforcement=sni, the user's
 * consent to what the vendor leaves open (how: a sentence saying so, for
 * the error). 0, or -EINVAL with the reason in b->error. The entries are
 * the vendor's to check. */
int sb_spec_check_sni_allowlist(struct sb_backend *b, const char *how);

/* 0 when ops takes every option of spec and can give what it asks for;
 * else -EINVAL with the one-line reason in err. Nothing is made. */
int sb_backend_check_spec(const struct sb_backend_ops *ops,
			  const struct sb_spec *spec, char *err, size_t errlen);
/* Allocates the backend object (taking ownership of *spec, which is
 * zeroed) and provisions or attaches the sandbox (sb_backend_check_spec
 * first). On failure returns NULL
 * and writes a one-line reason into err. */
struct sb_backend *sb_backend_create(const struct sb_backend_ops *ops,
				     struct sb_spec *spec, bool shell_only,
				     char *err, size_t errlen);
/* Destroys the sandbox unless spec.keep, then frees everything. */
int sb_backend_destroy(struct sb_backend *b);
/* The sbfs daemon with that pid is gone: no such process, a zombie, or
 * not sbfs (the pid was reused). For sweeps (daemon_gone.c). */
bool sb_daemon_gone(int pid);
void sb_backend_free(struct sb_backend *b);

/* Marks the backend dead with a reason (first reason wins), logs it once,
 * returns -EIO for the caller to pass up. printf-style. */
int sb_backend_fail(struct sb_backend *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
bool sb_backend_is_dead(const struct sb_backend *b);
/* SB_EXEC_BUSY while a command runs, else how many have started: two equal
 * marks mean no command ran in between (a view of the sandbox taken under
 * the first is still all the sandbox did, as far as sbexec goes). */
#define SB_EXEC_BUSY UINT64_MAX
uint64_t sb_exec_quiet_mark(struct sb_backend *b);

/* ---- dispatch (dispatch.c): what the fs core and control server call ----
 * Each counts the call, refuses at once when the backend is dead, and uses
 * the native slot or the shell fallback. */

int sb_exec(struct sb_backend *b, const struct sb_exec_req *req,
	    struct sb_exec_result *res);

/* exec_args.c: what a command's argv and env may take in an exec. The
 * room left for them (the backend's limit less the spec's environment and
 * what the backend itself adds), what one string of len bytes costs of
 * it, and a one-line refusal for a command that does not fit. */
size_t sb_exec_arg_room(const struct sb_backend *b);
size_t sb_exec_arg_cost(const struct sb_backend *b, size_t len);
void sb_exec_arg_refusal(const struct sb_backend *b, char *msg, size_t msglen);
/* Reads at most len bytes at off of a regular file, in the guest, into
 * buf; *got is what was read (short only at end of file). Non-regular
 * files are refused with -EINVAL and never opened. */
int sb_read(struct sb_backend *b, const char *path, off_t off, size_t len,
	    char *buf, size_t *got);

/* Where a streamed read window goes. The guest opens the file once and
 * reports the identity of what it opened before any byte of it: ident is
 * an opaque line (size, inode, mtime, ctime) that differs between versions
 * of a file, size is the file's size. Then data comes in order, as file
 * offsets within the requested range. Along the way checked (if set) says
 * the guest found the file's identity unchanged after the data up to end:
 * what came before end is of the version ident names, even if the read
 * fails later. A callback returning negative aborts the read with that
 * value. The read fails with -EAGAIN when the file changed while it was
 * being read (what came after the last check is then not one version). */
#define SB_IDENT_MAX 128
struct sb_read_sink {
	int (*ident)(void *arg, const char *ident, off_t size);
	int (*data)(void *arg, off_t off, const char *d, size_t n);
	int (*checked)(void *arg, off_t end);
	void *arg;
};
int sb_read_stream(struct sb_backend *b, const char *path, off_t off,
		   size_t len, const struct sb_read_sink *sink, size_t *got);
/* One file; u->rc is not used. */
int sb_write_file(struct sb_backend *b, struct sb_upload *u);
/* Uploads many files as one counted write call (dispatch.c, "batch
 * upload"): the native write_files slot, or a loop over write_file. */
int sb_write_files(struct sb_backend *b, struct sb_upload *v, size_t n);
int sb_list_dir(struct sb_backend *b, const char *path, struct sb_dirlist *out);
int sb_stat(struct sb_backend *b, const char *path, struct stat *st,
	    char **link_target);
int sb_mkdir(struct sb_backend *b, const char *path, mode_t mode);
int sb_remove(struct sb_backend *b, const char *path, bool is_dir);
int sb_rename(struct sb_backend *b, const char *from, const char *to,
	      bool noreplace);
int sb_chmod(struct sb_backend *b, const char *path, mode_t mode);
int sb_truncate(struct sb_backend *b, const char *path, off_t size);
int sb_utimens(struct sb_backend *b, const char *path,
	       const struct timespec ts[2]);
int sb_symlink(struct sb_backend *b, const char *target, const char *linkpath);
int sb_chown(struct sb_backend *b, const char *path, uid_t uid, gid_t gid);
/* On success *st is the new name's lstat (with *link_target as sb_stat
 * gives it): from the link call itself where the backend has it, else
 * from a stat call. */
int sb_link(struct sb_backend *b, const char *from, const char *to,
	    struct stat *st, char **link_target);
int sb_readlink(struct sb_backend *b, const char *path, char **target);
int sb_statfs(struct sb_backend *b, const char *path, struct statvfs *st);
/* Makes and removes many paths, in order, as one call counted as the
 * first entry's kind (dispatch.c, "namespace batch"): the native ns_many
 * slot or the shell fallback. Each v[i].rc is set; returns 0 or the
 * first error. */
int sb_ns_many(struct sb_backend *b, struct sb_ns_change *v, size_t n);
/* The watch slots (sb_backend_ops); -ENOTSUP where the backend has none. */
int sb_watch_start(struct sb_backend *b, const struct sb_watch_sink *sink);
int sb_watch_settle(struct sb_backend *b);
void sb_watch_stop(struct sb_backend *b);

/* ---- deadlines and transient errors (dispatch.c) ----
 * Every dispatched call except sbexec's exec (which keeps the user's -t)
 * runs under a deadline, call_timeout_s from its start (retries included).
 * A backend or transport that waits bounds the wait with
 * call_deadline_clamp() (util/call_deadline.h); a call that hits it
 * returns -ETIMEDOUT and the sandbox stays usable. */

#define SB_CALL_TIMEOUT_DEFAULT_S 60.0

/* An error a repeat of the same call may not get: the connection to the
 * sandbox dropped, not a verdict on the path. */
bool sb_error_is_transient(int rc);

/* ---- directory lists ---- */
struct sb_dirent *sb_dirlist_add(struct sb_dirlist *l, const char *name);
void sb_dirlist_free(struct sb_dirlist *l);

const char *sb_call_name(enum sb_call c);

#endif
