/* The dispatcher every caller of a backend goes through. Each call counts
 * its attempts, is refused at once when the sandbox is dead, runs the
 * native slot or the shell fallback (through the fault wrapper when a
 * testing aid asks for it), and repeats transient failures where a repeat
 * is safe, within the call's deadline. Every kind of call goes through
 * the one attempt loop, call_run(); what differs between kinds is said
 * once each in call_backend(), settle() and reconcile(). */
#include "backend.h"
#include "fault_inject.h"
#include "shell_ops.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

bool sb_error_is_transient(int rc)
{
	return rc == -ECONNRESET || rc == -ECONNREFUSED || rc == -EPIPE ||
	       rc == -ECONNABORTED || rc == -ENETRESET;
}

/* Bounded retries of transient errors: at most RETRY_ATTEMPTS tries, the
 * n-th wait up to RETRY_BASE_MS * 2^(n-1) (full jitter), all within the call's
 * deadline. */
#define RETRY_ATTEMPTS 4
#define RETRY_BASE_MS 50.0

static void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec d = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&d, &d) < 0 && errno == EINTR)
		;
}

/* One call through the dispatcher: what it is, its arguments as the
 * contract's slot names them, and where it is across its attempts. */
struct call {
	enum sb_call kind;        /* what it is counted as */
	bool batch;               /* write: write_files; mkdir, remove: ns_many */

	const char *path;         /* symlink: the target */
	const char *to;           /* rename, link: the new name; symlink: the link */
	mode_t mode;
	off_t size;               /* write, truncate */
	bool flag;                /* remove: is_dir; rename: noreplace */
	uid_t uid;
	gid_t gid;
	const struct timespec *ts;
	struct sb_dirlist *list;
	struct stat *st;
	char **target;            /* stat: the link target; readlink */
	struct statvfs *vfs;
	const struct sb_exec_req *req;
	struct sb_exec_result *res;
	off_t off;                /* read: the window */
	size_t len;
	const struct sb_read_sink *sink;
	size_t *got;
	struct sb_upload *up;     /* write: the file, or the batch's */
	struct sb_ns_change *rm;  /* namespace batch */
	size_t n;

	int attempt;              /* 1-based */
	bool had_transient;       /* an earlier attempt may have done the work */
	bool reached;             /* this attempt got to the backend */
	bool shell;               /* ... and went to shell_ops */
	double saved_deadline;
};

#define USE_NATIVE(b, slot) ((b)->ops->slot && !(b)->shell_only)

/* The native slot when there is one, else the shell implementation;
 * c->shell says which ran. */
#define NATIVE_OR_SHELL(slot, shell_fn, ...)                                   \
	((c->shell = !USE_NATIVE(b, slot)) ? shell_fn(b, __VA_ARGS__)         \
					    : b->ops->slot(b, __VA_ARGS__))

/* ---- batch upload (write-back mode) ----
 * One counted write call however many files: the call a remote vendor
 * makes once (one tar PUT for docker). Without a native slot, or in
 * shell_ops mode, it loops over the single-file write; every file's rc is
 * set either way. A native batch that fails as a whole is retried file by
 * file (sb_write_files), so each file gets its own error. */

/* One file, natively or by the shell (which cannot set the mtime). */
static int write_one(struct sb_backend *b, struct sb_upload *u, bool native)
{
	return native ? b->ops->write_file(b, u)
		      : shell_write_file(b, u->path, u->fd, u->size, u->mode);
}

static int write_files_loop(struct sb_backend *b, struct sb_upload *v,
			    size_t n, bool native)
{
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		v[i].rc = write_one(b, &v[i], native);
		if (v[i].rc < 0 && !first)
			first = v[i].rc;
		if (sb_backend_is_dead(b)) {
			for (size_t j = i + 1; j < n; j++)
				v[j].rc = -EIO;
			return first ? first : -EIO;
		}
	}
	return first;
}

static int write_batch(struct sb_backend *b, struct call *c)
{
	if (USE_NATIVE(b, write_files))
		return b->ops->write_files(b, c->up, c->n);
	bool native_one = USE_NATIVE(b, write_file);
	c->shell = !native_one;
	return write_files_loop(b, c->up, c->n, native_one);
}

/* The backend's part of one attempt (what the fault wrapper wraps). */
static int call_backend(struct sb_backend *b, void *arg)
{
	struct call *c = arg;
	c->reached = true;
	switch (c->kind) {
	case SB_CALL_EXEC:
		return b->ops->exec(b, c->req, c->res);
	case SB_CALL_READ:
		return NATIVE_OR_SHELL(read, shell_read, c->path, c->off, c->len,
				       c->sink, c->got);
	case SB_CALL_WRITE:
		if (c->batch)
			return write_batch(b, c);
		c->shell = !USE_NATIVE(b, write_file);
		return write_one(b, c->up, !c->shell);
	case SB_CALL_LIST:
		return NATIVE_OR_SHELL(list_dir, shell_list_dir, c->path, c->list);
	case SB_CALL_STAT:
		return NATIVE_OR_SHELL(stat, shell_stat, c->path, c->st, c->target);
	case SB_CALL_MKDIR: case SB_CALL_REMOVE:
		if (c->batch)
			return NATIVE_OR_SHELL(ns_many, shell_ns_many, c->rm, c->n);
		if (c->kind == SB_CALL_MKDIR)
			return NATIVE_OR_SHELL(mkdir, shell_mkdir, c->path, c->mode);
		return NATIVE_OR_SHELL(remove, shell_remove, c->path, c->flag);
	case SB_CALL_RENAME:
		return NATIVE_OR_SHELL(rename, shell_rename, c->path, c->to, c->flag);
	case SB_CALL_CHMOD:
		return NATIVE_OR_SHELL(chmod, shell_chmod, c->path, c->mode);
	case SB_CALL_TRUNCATE:
		return NATIVE_OR_SHELL(truncate, shell_truncate, c->path, c->size);
	case SB_CALL_UTIMENS:
		return NATIVE_OR_SHELL(utimens, shell_utimens, c->path, c->ts);
	case SB_CALL_SYMLINK:
		return NATIVE_OR_SHELL(symlink, shell_symlink, c->path, c->to);
	case SB_CALL_READLINK:
		return NATIVE_OR_SHELL(readlink, shell_readlink, c->path, c->target);
	case SB_CALL_STATFS:
		return NATIVE_OR_SHELL(statfs, shell_statfs, c->path, c->vfs);
	case SB_CALL_CHOWN:
		return NATIVE_OR_SHELL(chown, shell_chown, c->path, c->uid, c->gid);
	case SB_CALL_LINK:
		return NATIVE_OR_SHELL(link, shell_hardlink, c->path, c->to, c->st);
	case SB_CALL_CREATE: case SB_CALL_DESTROY: case SB_CALL_COUNT:
		break; /* lifecycle, not dispatched (registry.c) */
	}
	return -ENOSYS;
}

/* ---- the attempt loop ---- */

/* An upload counts only if the sandbox was alive when it completed: one
 * check per upload call, after the data is in place. */
static int confirm_alive(struct sb_backend *b)
{
	if (sb_backend_is_dead(b))
		return -EIO;
	return b->ops->confirm_alive ? b->ops->confirm_alive(b) : 0;
}

/* A batch where some file landed: unless the sandbox was alive at its
 * end, none of them counts. */
static int confirm_batch_alive(struct sb_backend *b, struct sb_upload *v,
			       size_t n, int rc)
{
	bool any = false;
	for (size_t i = 0; i < n && !any; i++)
		any = v[i].rc == 0;
	int alive = any ? confirm_alive(b) : 0;
	if (alive == 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (v[i].rc == 0) {
			v[i].rc = alive;
			v[i].mtime_set = false;
		}
	return alive;
}

/* Before each attempt: what a failed attempt may have left set. */
static void reset(struct call *c)
{
	c->reached = c->shell = false;
	if (c->kind == SB_CALL_READ)
		*c->got = 0;
	if (c->kind == SB_CALL_LINK)
		*c->st = (struct stat){0};
	for (size_t i = 0; c->up && i < c->n; i++) {
		c->up[i].rc = -EIO;
		c->up[i].mtime_set = false;
	}
	for (size_t i = 0; c->rm && i < c->n; i++)
		c->rm[i].rc = -EIO;
}

/* After the backend's part has returned: an upload counts only in a
 * sandbox still alive; data moved is counted. */
static int settle(struct sb_backend *b, struct call *c, int rc)
{
	if (c->kind == SB_CALL_READ && rc == 0)
		atomic_fetch_add(&b->counters.bytes_down, *c->got);
	if (c->kind == SB_CALL_WRITE && c->batch)
		return confirm_batch_alive(b, c->up, c->n, rc);
	if (c->kind == SB_CALL_WRITE) {
		if (rc == 0)
			rc = confirm_alive(b);
		if (rc == 0)
			atomic_fetch_add(&b->counters.bytes_up, (uint64_t)c->size);
	}
	return rc;
}

/* One attempt: counted; refused at once when the sandbox is dead; the
 * deadline set on the first. */
static int attempt(struct sb_backend *b, struct call *c)
{
	if (c->attempt++ == 0) {
		c->saved_deadline = call_deadline_get();
		if (c->kind != SB_CALL_EXEC)
			call_deadline_enter(b->call_timeout_s > 0 ? b->call_timeout_s
						: SB_CALL_TIMEOUT_DEFAULT_S);
	}
	atomic_fetch_add(&b->counters.calls[c->kind], 1);
	if (sb_backend_is_dead(b))
		return -EIO;
	int rc = fault_wrapping(b) ? fault_call(b, c->kind, call_backend, c)
				   : call_backend(b, c);
	return c->reached ? settle(b, c, rc) : rc;
}

/* Whether a failed call may be repeated: it must be safe to do twice. */
static bool retry_safe(enum sb_call kind)
{
	switch (kind) {
	case SB_CALL_READ: case SB_CALL_WRITE: case SB_CALL_LIST:
	case SB_CALL_STAT: case SB_CALL_CHMOD: case SB_CALL_TRUNCATE:
	case SB_CALL_UTIMENS: case SB_CALL_READLINK: case SB_CALL_STATFS:
	case SB_CALL_CHOWN:
	/* reconciled in reconcile(): a repeat seeing the work done */
	case SB_CALL_MKDIR: case SB_CALL_REMOVE: case SB_CALL_LINK:
		return true;
	default: /* exec runs user commands; rename, symlink: not reconcilable */
		return false;
	}
}

/* Ends an attempt: true when it should be tried again (after a backoff). */
static bool attempt_retry(struct sb_backend *b, struct call *c, int rc)
{
	if (!sb_error_is_transient(rc))
		return false;
	c->had_transient = true;
	if (!retry_safe(c->kind) || c->attempt >= RETRY_ATTEMPTS ||
	    sb_backend_is_dead(b))
		return false;
	unsigned rnd = 0;
	if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
		rnd = (unsigned)c->attempt * 2654435761u;
	double cap = RETRY_BASE_MS / 1000.0 * (double)(1u << (c->attempt - 1));
	double wait = cap * ((double)(rnd % 1000) + 1) / 1000.0;
	double deadline = call_deadline_get();
	if (deadline > 0 && call_deadline_now() + wait >= deadline)
		return false;
	atomic_fetch_add(&b->counters.retries, 1);
	sb_info("%s call failed (%s); retry %d of %d", sb_call_name(c->kind),
		strerror(-rc), c->attempt, RETRY_ATTEMPTS - 1);
	sleep_s(wait);
	return true;
}

/* A repeated link's EEXIST is its own earlier attempt's work when the new
 * name is the same file as the old one. */
static bool link_done(struct sb_backend *b, const char *from, const char *to)
{
	struct stat a, n;
	return sb_stat(b, from, &a, NULL) == 0 && sb_stat(b, to, &n, NULL) == 0 &&
	       a.st_dev == n.st_dev && a.st_ino == n.st_ino;
}

/* A repeat after a transient error may find its own earlier attempt's
 * work done: that is success. */
static int reconcile(struct sb_backend *b, struct call *c, int rc)
{
	struct stat st;
	for (size_t i = 0; c->batch && c->rm && i < c->n; i++)
		if (c->rm[i].rc == (c->rm[i].make ? -EEXIST : -ENOENT))
			c->rm[i].rc = 0;
	switch (c->kind) {
	case SB_CALL_MKDIR:
		if (!c->batch && rc == -EEXIST && sb_stat(b, c->path, &st, NULL) == 0 &&
		    S_ISDIR(st.st_mode))
			rc = 0;
		break;
	case SB_CALL_REMOVE:
		if (!c->batch && rc == -ENOENT)
			rc = 0;
		break;
	case SB_CALL_LINK:
		if (rc == -EEXIST && link_done(b, c->path, c->to))
			rc = 0;
		break;
	default:
		break;
	}
	return rc;
}

static int count(struct sb_backend *b, enum sb_call kind, int rc, bool shell)
{
	if (rc < 0)
		atomic_fetch_add(&b->counters.errors[kind], 1);
	if (shell)
		atomic_fetch_add(&b->counters.shell_fallbacks, 1);
	return rc;
}

/* Write-back's queued changes land before a call that could conflict
 * with or observe them (struct sb_call_hooks); the namespace batch is
 * their own landing. */
static void before_call(struct sb_backend *b, const struct call *c)
{
	const struct sb_call_hooks *h = b->hooks;
	if (!h || !h->before || c->rm)
		return;
	if (c->kind == SB_CALL_WRITE && c->batch) {
		for (size_t i = 0; i < c->n; i++)
			h->before(h->arg, c->kind, c->up[i].path, NULL);
		return;
	}
	h->before(h->arg, c->kind, c->path, c->to);
}

/* The sandbox's disk (or quota) was full for this call: a queued remove
 * landing may free what it needs. */
static bool out_of_space(const struct call *c, int rc)
{
	if (c->kind == SB_CALL_EXEC)
		return false; /* the command's own outcome */
	if (rc == -ENOSPC || rc == -EDQUOT)
		return true;
	for (size_t i = 0; c->up && i < c->n; i++)
		if (c->up[i].rc == -ENOSPC || c->up[i].rc == -EDQUOT)
			return true;
	return false;
}

/* The attempt loop of every call. */
static int call_run(struct sb_backend *b, struct call *c)
{
	before_call(b, c);
	if (c->kind == SB_CALL_EXEC)
		atomic_fetch_add(&b->execs_started, 1);
	int rc;
	bool drained = false;
	for (;;) {
		reset(c);
		rc = attempt(b, c);
		count(b, c->kind, rc, c->shell);
		/* refused, so nothing was done: safe to repeat once */
		if (!drained && out_of_space(c, rc) && b->hooks && b->hooks->drain &&
		    b->hooks->drain(b->hooks->arg))
			drained = true;
		else if (!attempt_retry(b, c, rc))
			break;
	}
	if (c->kind == SB_CALL_EXEC) {
		if (!c->reached && sb_backend_is_dead(b))
			c->res->sandbox_terminated = true;
		atomic_fetch_add(&b->execs_ended, 1);
	}
	if (c->had_transient && c->attempt > 1)
		rc = reconcile(b, c, rc);
	if (rc == -ETIMEDOUT && c->kind != SB_CALL_EXEC)
		atomic_fetch_add(&b->counters.deadlines, 1);
	/* The kernel has no use for a connection error: it gets EIO. */
	if (sb_error_is_transient(rc))
		rc = -EIO;
	call_deadline_restore(c->saved_deadline);
	return rc;
}

/* ---- the calls ---- */

int sb_exec(struct sb_backend *b, const struct sb_exec_req *req,
	    struct sb_exec_result *res)
{
	memset(res, 0, sizeof(*res));
	struct call c = {.kind = SB_CALL_EXEC, .req = req, .res = res};
	return call_run(b, &c);
}

uint64_t sb_exec_quiet_mark(struct sb_backend *b)
{
	/* ended first: it only grows and never passes started, so equal
	 * values mean none was running when started was read. */
	uint64_t ended = atomic_load(&b->execs_ended);
	uint64_t started = atomic_load(&b->execs_started);
	return started == ended ? started : SB_EXEC_BUSY;
}

int sb_read_stream(struct sb_backend *b, const char *path, off_t off,
		   size_t len, const struct sb_read_sink *sink, size_t *got)
{
	struct call c = {.kind = SB_CALL_READ, .path = path, .off = off,
			 .len = len, .sink = sink, .got = got};
	return call_run(b, &c);
}

struct read_into_buf {
	char *buf;
	off_t off;
};

static int buf_ident(void *arg, const char *ident, off_t size)
{
	(void)arg, (void)ident, (void)size;
	return 0;
}

static int buf_data(void *arg, off_t off, const char *d, size_t n)
{
	struct read_into_buf *r = arg;
	memcpy(r->buf + (off - r->off), d, n);
	return 0;
}

int sb_read(struct sb_backend *b, const char *path, off_t off, size_t len,
	    char *buf, size_t *got)
{
	struct read_into_buf r = {.buf = buf, .off = off};
	struct sb_read_sink sink = {.ident = buf_ident, .data = buf_data, .arg = &r};
	return sb_read_stream(b, path, off, len, &sink, got);
}

int sb_write_file(struct sb_backend *b, struct sb_upload *u)
{
	struct call c = {.kind = SB_CALL_WRITE, .path = u->path, .size = u->size,
			 .up = u, .n = 1};
	return call_run(b, &c);
}

int sb_write_files(struct sb_backend *b, struct sb_upload *v, size_t n)
{
	if (n == 0)
		return 0;
	struct call c = {.kind = SB_CALL_WRITE, .batch = true, .up = v, .n = n};
	int rc = call_run(b, &c);
	for (size_t i = 0; i < n; i++)
		if (v[i].rc == 0)
			atomic_fetch_add(&b->counters.bytes_up, (uint64_t)v[i].size);
	if (rc == 0 || !USE_NATIVE(b, write_files) || sb_backend_is_dead(b))
		return rc;
	/* The files a failed native batch did not write go on their own,
	 * each counted, so each gets its own error. */
	rc = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].rc == 0)
			continue;
		v[i].rc = sb_write_file(b, &v[i]);
		if (v[i].rc < 0 && !rc)
			rc = v[i].rc;
	}
	return rc;
}

int sb_list_dir(struct sb_backend *b, const char *path, struct sb_dirlist *out)
{
	struct call c = {.kind = SB_CALL_LIST, .path = path, .list = out};
	int rc = call_run(b, &c);
	const struct sb_call_hooks *h = b->hooks;
	if (rc == 0 && h && h->filter)
		h->filter(h->arg, path, out);
	return rc;
}

int sb_stat(struct sb_backend *b, const char *path, struct stat *st,
	    char **link_target)
{
	const struct sb_call_hooks *h = b->hooks;
	if (h && h->gone && h->gone(h->arg, path))
		return -ENOENT;
	struct call c = {.kind = SB_CALL_STAT, .path = path, .st = st,
			 .target = link_target};
	return call_run(b, &c);
}

int sb_mkdir(struct sb_backend *b, const char *path, mode_t mode)
{
	struct call c = {.kind = SB_CALL_MKDIR, .path = path, .mode = mode};
	return call_run(b, &c);
}

int sb_remove(struct sb_backend *b, const char *path, bool is_dir)
{
	struct call c = {.kind = SB_CALL_REMOVE, .path = path, .flag = is_dir};
	return call_run(b, &c);
}

int sb_rename(struct sb_backend *b, const char *from, const char *to,
	      bool noreplace)
{
	struct call c = {.kind = SB_CALL_RENAME, .path = from, .to = to,
			 .flag = noreplace};
	return call_run(b, &c);
}

int sb_chmod(struct sb_backend *b, const char *path, mode_t mode)
{
	struct call c = {.kind = SB_CALL_CHMOD, .path = path, .mode = mode};
	return call_run(b, &c);
}

int sb_truncate(struct sb_backend *b, const char *path, off_t size)
{
	struct call c = {.kind = SB_CALL_TRUNCATE, .path = path, .size = size};
	return call_run(b, &c);
}

int sb_utimens(struct sb_backend *b, const char *path,
	       const struct timespec ts[2])
{
	struct call c = {.kind = SB_CALL_UTIMENS, .path = path, .ts = ts};
	return call_run(b, &c);
}

int sb_symlink(struct sb_backend *b, const char *target, const char *linkpath)
{
	struct call c = {.kind = SB_CALL_SYMLINK, .path = target, .to = linkpath};
	return call_run(b, &c);
}

int sb_readlink(struct sb_backend *b, const char *path, char **target)
{
	struct call c = {.kind = SB_CALL_READLINK, .path = path, .target = target};
	return call_run(b, &c);
}

int sb_statfs(struct sb_backend *b, const char *path, struct statvfs *st)
{
	struct call c = {.kind = SB_CALL_STATFS, .path = path, .vfs = st};
	return call_run(b, &c);
}

int sb_chown(struct sb_backend *b, const char *path, uid_t uid, gid_t gid)
{
	struct call c = {.kind = SB_CALL_CHOWN, .path = path, .uid = uid,
			 .gid = gid};
	return call_run(b, &c);
}

int sb_link(struct sb_backend *b, const char *from, const char *to,
	    struct stat *st, char **link_target)
{
	if (link_target)
		*link_target = NULL;
	*st = (struct stat){0};
	struct call c = {.kind = SB_CALL_LINK, .path = from, .to = to, .st = st};
	int rc = call_run(b, &c);
	/* A symlink's target, or a repeat that found its work done, comes
	 * from the stat call. */
	if (rc == 0 && (st->st_ino == 0 || (S_ISLNK(st->st_mode) && link_target)))
		rc = sb_stat(b, to, st, link_target);
	return rc;
}

/* ---- namespace batch (write-back mode) ----
 * One call for the whole batch, counted as its first entry's kind, with
 * the attempts, deadline and faults of any other call. A repeat after a
 * transient error may find its own earlier attempt's work done: ENOENT
 * for a remove, EEXIST for a mkdir, on a repeat is success. */
int sb_ns_many(struct sb_backend *b, struct sb_ns_change *v, size_t n)
{
	if (n == 0)
		return 0;
	struct call c = {.kind = v[0].make ? SB_CALL_MKDIR : SB_CALL_REMOVE,
			 .batch = true, .rm = v, .n = n};
	int first = call_run(b, &c);
	for (size_t i = 0; i < n; i++)
		if (v[i].rc < 0 && !first)
			first = v[i].rc;
	return first;
}

/* ---- the watch ----
 * Not calls: no attempts, deadline or faults; the backend's own thread
 * reports. A dead sandbox reports nothing more. */
int sb_watch_start(struct sb_backend *b, const struct sb_watch_sink *sink)
{
	return b->ops->watch_start ? b->ops->watch_start(b, sink) : -ENOTSUP;
}

int sb_watch_settle(struct sb_backend *b)
{
	if (sb_backend_is_dead(b))
		return -EIO;
	return b->ops->watch_settle ? b->ops->watch_settle(b) : -ENOTSUP;
}

void sb_watch_stop(struct sb_backend *b)
{
	if (b->ops->watch_stop)
		b->ops->watch_stop(b);
}

const char *sb_call_name(enum sb_call c)
{
	static const char *const names[SB_CALL_COUNT] = {
		"create", "exec", "read", "write", "list", "stat", "mkdir",
		"remove", "rename", "chmod", "truncate", "utimens", "symlink",
		"readlink", "statfs", "chown", "link", "destroy",
	};
	return (unsigned)c < SB_CALL_COUNT ? names[c] : "unknown";
}
