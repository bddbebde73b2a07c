/* Backend registry, spec handling, and the dispatch layer that every caller
 * goes through: it counts calls, refuses at once when the sandbox is dead,
 * and picks the native slot or the generic shell implementation. */
#include "backend.h"
#include "backends/backend_list.h" /* generated */
#include "fault_inject.h"
#include "shell_ops.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <time.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* One entry per name in backends/meson.build's backend_names. */
#define DECLARE_OPS(name) extern const struct sb_backend_ops sb_##name##_ops;
SB_BACKENDS(DECLARE_OPS)

#define OPS_ENTRY(name) &sb_##name##_ops,
static const struct sb_backend_ops *const all_backends[] = {
	SB_BACKENDS(OPS_ENTRY)
	NULL,
};

const struct sb_backend_ops *const *sb_backend_all(void)
{
	return all_backends;
}

const struct sb_backend_ops *sb_backend_find(const char *name)
{
	for (size_t i = 0; all_backends[i]; i++)
		if (strcmp(all_backends[i]->name, name) == 0)
			return all_backends[i];
	return NULL;
}

void sb_spec_init(struct sb_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->workdir = strdup(SB_DEFAULT_WORKDIR);
	spec->block_network = true;
	unsigned char rnd[6] = {0};
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		/* getrandom on a booted kernel does not fail for 6 bytes; keep
		 * a usable if predictable name should it ever. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(rnd, &ts.tv_nsec, sizeof(rnd) < sizeof(ts.tv_nsec) ? sizeof(rnd) : sizeof(ts.tv_nsec));
	}
	snprintf(spec->name, sizeof(spec->name),
		 "sbfs-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5]);
}

static void free_strv(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

void sb_spec_free(struct sb_spec *spec)
{
	free(spec->image);
	free(spec->workdir);
	free_strv(spec->env);
	free_strv(spec->allow_egress_to);
	free_strv(spec->tags);
	free(spec->attach_id);
	free_strv(spec->options);
	memset(spec, 0, sizeof(*spec));
}

const char *sb_spec_option(const struct sb_spec *spec, const char *key)
{
	if (!spec->options)
		return NULL;
	size_t klen = strlen(key);
	for (size_t i = 0; spec->options[i]; i++) {
		const char *o = spec->options[i];
		if (strncmp(o, key, klen) != 0)
			continue;
		if (o[klen] == '=')
			return o + klen + 1;
		if (o[klen] == '\0')
			return "";
	}
	return NULL;
}

static bool option_known(const struct sb_backend_ops *ops, const char *opt)
{
	size_t klen = strcspn(opt, "=");
	for (size_t i = 0; ops->option_keys && ops->option_keys[i]; i++)
		if (strlen(ops->option_keys[i]) == klen &&
		    strncmp(ops->option_keys[i], opt, klen) == 0)
			return true;
	return false;
}

struct sb_backend *sb_backend_create(const struct sb_backend_ops *ops,
				     struct sb_spec *spec, bool shell_only,
				     char *err, size_t errlen)
{
	for (size_t i = 0; spec->options && spec->options[i]; i++) {
		if (!option_known(ops, spec->options[i])) {
			int klen = (int)strcspn(spec->options[i], "=");
			snprintf(err, errlen, "unknown option '%.*s' for backend '%s'",
				 klen, spec->options[i], ops->name);
			sb_spec_free(spec);
			return NULL;
		}
	}
	struct sb_backend *b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(err, errlen, "out of memory");
		sb_spec_free(spec);
		return NULL;
	}
	b->ops = ops;
	b->spec = *spec;
	memset(spec, 0, sizeof(*spec));
	b->shell_only = shell_only;
	atomic_init(&b->dead, false);
	atomic_fetch_add(&b->counters.calls[SB_CALL_CREATE], 1);
	int rc = ops->create(b, &b->spec);
	if (rc < 0) {
		atomic_fetch_add(&b->counters.errors[SB_CALL_CREATE], 1);
		snprintf(err, errlen, "%s", b->error[0] ? b->error : strerror(-rc));
		/* create cleans up after itself; release frees what it kept */
		if (ops->release)
			ops->release(b);
		sb_spec_free(&b->spec);
		free(b);
		return NULL;
	}
	return b;
}

int sb_backend_destroy(struct sb_backend *b)
{
	int rc = 0;
	if (!b)
		return 0;
	if (!b->spec.keep) {
		atomic_fetch_add(&b->counters.calls[SB_CALL_DESTROY], 1);
		/* unmount must end even when the sandbox's host does not answer */
		double prev = call_deadline_enter(b->call_timeout_s > 0 ? b->call_timeout_s
						  : SB_CALL_TIMEOUT_DEFAULT_S);
		rc = b->ops->destroy(b);
		call_deadline_restore(prev);
		if (rc < 0)
			atomic_fetch_add(&b->counters.errors[SB_CALL_DESTROY], 1);
	}
	sb_backend_free(b);
	return rc;
}

void sb_backend_free(struct sb_backend *b)
{
	if (!b)
		return;
	if (b->ops->release)
		b->ops->release(b);
	sb_spec_free(&b->spec);
	free(b->faults);
	free(b);
}

int sb_backend_fail(struct sb_backend *b, const char *fmt, ...)
{
	char reason[SB_REASON_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	/* dead_reason is written before dead is published, under a lock so
	 * that racing failures keep the first reason intact */
	static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&fail_lock);
	bool first = !atomic_load(&b->dead);
	if (first) {
		snprintf(b->dead_reason, sizeof(b->dead_reason), "%s", reason);
		atomic_store(&b->dead, true);
	}
	pthread_mutex_unlock(&fail_lock);
	if (first)
		sb_err("%s: sandbox unusable: %s", b->ops->name, reason);
	return -EIO;
}

bool sb_backend_is_dead(const struct sb_backend *b)
{
	return atomic_load(&b->dead);
}

/* ---- dispatch ---- */

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

/* One call through the dispatch layer, across its attempts. */
struct call {
	enum sb_call kind;
	int attempt;         /* 1-based */
	bool had_transient;  /* an earlier attempt may have done the work */
	bool die_after;      /* inject_faults die: destroy once the call is done */
	double saved_deadline;
};

/* A stalled call: a command that never ends, run in the sandbox, which the
 * backend's own deadline handling has to end. */
static int inject_stall(struct sb_backend *b)
{
	static const char *const argv[] = {"sleep", "2147483", NULL};
	struct sb_exec_req req = {
		.argv = argv, .cwd = "/", .stdin_fd = -1, .cancel_fd = -1,
		.timeout_s = call_deadline_clamp(b->call_timeout_s > 0
				 ? b->call_timeout_s : SB_CALL_TIMEOUT_DEFAULT_S),
	};
	struct sb_exec_result res;
	memset(&res, 0, sizeof res);
	int rc = b->ops->exec(b, &req, &res);
	if (rc == 0 && res.sandbox_terminated)
		rc = -EIO;
	if (rc == 0)
		rc = -ETIMEDOUT; /* the sleep cannot end any other way */
	return rc;
}

/* The injected fault's result, or 0 when the call goes on to the backend. */
static int inject(struct sb_backend *b, struct call *c)
{
	enum sb_call kind = c->kind;
	enum fault_action a = fault_plan_next(b->faults, kind);
	if (a == FAULT_NONE)
		return 0;
	atomic_fetch_add(&b->counters.faults_injected, 1);
	sb_warn("inject_faults: %s fault on a %s call", fault_action_name(a),
		sb_call_name(kind));
	switch (a) {
	case FAULT_TRANSIENT:
		return -ECONNRESET;
	case FAULT_ERROR:
		return -EIO;
	case FAULT_TERMINAL:
		return sb_backend_fail(b, "inject_faults: terminal fault on a %s call",
				       sb_call_name(kind));
	case FAULT_STALL:
		return inject_stall(b);
	case FAULT_KILL:
		/* Really gone: the call then goes on and the backend has to
		 * find that out for itself. */
		b->ops->destroy(b);
		return 0;
	case FAULT_DIE:
		c->die_after = true; /* call_done() */
		return 0;
	case FAULT_NONE:
		break;
	}
	return 0;
}

/* Starts an attempt: counts it, refuses at once when the sandbox is dead,
 * sets the deadline (first attempt) and applies an injected fault.
 * 0 means go on to the backend. */
static int attempt_begin(struct sb_backend *b, struct call *c)
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
	if (b->inject_latency_ms) {
		/* One round trip to a remote sandbox, modelled on any backend. */
		sleep_s(b->inject_latency_ms / 1000.0);
	}
	return b->faults ? inject(b, c) : 0;
}

/* The backend's part of an attempt has returned: an injected die fault
 * destroys the sandbox now, as if it died while the call was in flight,
 * before the dispatcher takes the call's result. */
static void call_done(struct sb_backend *b, struct call *c)
{
	if (!c->die_after)
		return;
	c->die_after = false;
	b->ops->destroy(b);
}

/* An upload counts only if the sandbox was alive when it completed: one
 * check per upload call, after the data is in place. */
static int confirm_alive(struct sb_backend *b)
{
	if (sb_backend_is_dead(b))
		return -EIO;
	return b->ops->confirm_alive ? b->ops->confirm_alive(b) : 0;
}

/* Whether a failed call may be repeated: it must be safe to do twice. */
static bool retry_safe(enum sb_call kind)
{
	switch (kind) {
	case SB_CALL_READ: case SB_CALL_WRITE: case SB_CALL_LIST:
	case SB_CALL_STAT: case SB_CALL_CHMOD: case SB_CALL_TRUNCATE:
	case SB_CALL_UTIMENS: case SB_CALL_READLINK: case SB_CALL_STATFS:
	case SB_CALL_CHOWN:
	/* reconciled in attempt_end: a repeat seeing the work done */
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

static int attempt_end(struct sb_backend *b, struct call *c, int rc,
		       const char *path)
{
	/* A repeat after a transient error may find its own earlier attempt's
	 * work done: that is success. */
	if (c->had_transient && c->attempt > 1 && path) {
		struct stat st;
		if (c->kind == SB_CALL_MKDIR && rc == -EEXIST &&
		    sb_stat(b, path, &st, NULL) == 0 && S_ISDIR(st.st_mode))
			rc = 0;
		else if (c->kind == SB_CALL_REMOVE && rc == -ENOENT)
			rc = 0;
	}
	if (rc == -ETIMEDOUT && c->kind != SB_CALL_EXEC)
		atomic_fetch_add(&b->counters.deadlines, 1);
	/* The kernel has no use for a connection error: it gets EIO. */
	if (sb_error_is_transient(rc))
		rc = -EIO;
	call_deadline_restore(c->saved_deadline);
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

#define USE_NATIVE(b, slot) ((b)->ops->slot && !(b)->shell_only)

/* Write-back's queued removes land before a call that could conflict with
 * or observe them (struct sb_call_hooks). */
static void before_call(struct sb_backend *b, enum sb_call kind)
{
	const struct sb_call_hooks *h = b->hooks;
	if (h && h->before && kind != SB_CALL_LIST && kind != SB_CALL_STAT)
		h->before(h->arg, kind);
}

/* One dispatcher per op: native slot when present, else shell_ops; each
 * attempt counted, transient failures retried where safe. */
#define DISPATCH_PATH(kind_, path_, slot, ...)                                 \
	do {                                                                 \
		struct call c_ = {.kind = (kind_)};                         \
		int rc_;                                                     \
		before_call(b, c_.kind);                                     \
		do {                                                         \
			rc_ = attempt_begin(b, &c_);                         \
			if (rc_ == 0) {                                      \
				bool native_ = USE_NATIVE(b, slot);          \
				rc_ = native_ ? b->ops->slot(b, __VA_ARGS__) \
					      : shell_##slot(b, __VA_ARGS__); \
				call_done(b, &c_);                           \
				count(b, c_.kind, rc_, !native_);            \
			} else {                                             \
				count(b, c_.kind, rc_, false);               \
			}                                                    \
		} while (attempt_retry(b, &c_, rc_));                        \
		return attempt_end(b, &c_, rc_, (path_));                  \
	} while (0)

#define DISPATCH(kind_, slot, ...) DISPATCH_PATH(kind_, NULL, slot, __VA_ARGS__)

int sb_exec(struct sb_backend *b, const struct sb_exec_req *req,
	    struct sb_exec_result *res)
{
	memset(res, 0, sizeof(*res));
	before_call(b, SB_CALL_EXEC);
	struct call c = {.kind = SB_CALL_EXEC};
	atomic_fetch_add(&b->execs_started, 1);
	int rc = attempt_begin(b, &c);
	if (rc == 0) {
		rc = b->ops->exec(b, req, res);
		call_done(b, &c);
	} else if (sb_backend_is_dead(b))
		res->sandbox_terminated = true;
	atomic_fetch_add(&b->execs_ended, 1);
	count(b, SB_CALL_EXEC, rc, false);
	return attempt_end(b, &c, rc, NULL);
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
	before_call(b, SB_CALL_READ);
	struct call c = {.kind = SB_CALL_READ};
	int rc;
	do {
		*got = 0;
		rc = attempt_begin(b, &c);
		if (rc == 0) {
			rc = shell_read(b, path, off, len, sink, got);
			call_done(b, &c);
			if (rc == 0)
				atomic_fetch_add(&b->counters.bytes_down, *got);
			count(b, SB_CALL_READ, rc, true);
		} else {
			count(b, SB_CALL_READ, rc, false);
		}
	} while (attempt_retry(b, &c, rc));
	return attempt_end(b, &c, rc, NULL);
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

int sb_write_file(struct sb_backend *b, const char *path, int fd, off_t size,
		  mode_t mode)
{
	before_call(b, SB_CALL_WRITE);
	struct call c = {.kind = SB_CALL_WRITE};
	int rc;
	do {
		rc = attempt_begin(b, &c);
		if (rc == 0) {
			bool native = USE_NATIVE(b, write_file);
			rc = native ? b->ops->write_file(b, path, fd, size, mode)
				    : shell_write_file(b, path, fd, size, mode);
			call_done(b, &c);
			if (rc == 0)
				rc = confirm_alive(b);
			if (rc == 0)
				atomic_fetch_add(&b->counters.bytes_up, (uint64_t)size);
			count(b, SB_CALL_WRITE, rc, !native);
		} else {
			count(b, SB_CALL_WRITE, rc, false);
		}
	} while (attempt_retry(b, &c, rc));
	return attempt_end(b, &c, rc, NULL);
}

static int list_dir_call(struct sb_backend *b, const char *path,
			 struct sb_dirlist *out)
{
	DISPATCH(SB_CALL_LIST, list_dir, path, out);
}

int sb_list_dir(struct sb_backend *b, const char *path, struct sb_dirlist *out)
{
	int rc = list_dir_call(b, path, out);
	const struct sb_call_hooks *h = b->hooks;
	if (rc == 0 && h && h->filter)
		h->filter(h->arg, path, out);
	return rc;
}

static int stat_call(struct sb_backend *b, const char *path, struct stat *st,
		     char **link_target)
{
	DISPATCH(SB_CALL_STAT, stat, path, st, link_target);
}

int sb_stat(struct sb_backend *b, const char *path, struct stat *st,
	    char **link_target)
{
	const struct sb_call_hooks *h = b->hooks;
	if (h && h->gone && h->gone(h->arg, path))
		return -ENOENT;
	return stat_call(b, path, st, link_target);
}

int sb_mkdir(struct sb_backend *b, const char *path, mode_t mode)
{
	DISPATCH_PATH(SB_CALL_MKDIR, path, mkdir, path, mode);
}

int sb_remove(struct sb_backend *b, const char *path, bool is_dir)
{
	DISPATCH_PATH(SB_CALL_REMOVE, path, remove, path, is_dir);
}

int sb_rename(struct sb_backend *b, const char *from, const char *to,
	      bool noreplace)
{
	DISPATCH(SB_CALL_RENAME, rename, from, to, noreplace);
}

int sb_chmod(struct sb_backend *b, const char *path, mode_t mode)
{
	DISPATCH(SB_CALL_CHMOD, chmod, path, mode);
}

int sb_truncate(struct sb_backend *b, const char *path, off_t size)
{
	DISPATCH(SB_CALL_TRUNCATE, truncate, path, size);
}

int sb_utimens(struct sb_backend *b, const char *path,
	       const struct timespec ts[2])
{
	DISPATCH(SB_CALL_UTIMENS, utimens, path, ts);
}

int sb_symlink(struct sb_backend *b, const char *target, const char *linkpath)
{
	DISPATCH(SB_CALL_SYMLINK, symlink, target, linkpath);
}

int sb_readlink(struct sb_backend *b, const char *path, char **target)
{
	DISPATCH(SB_CALL_READLINK, readlink, path, target);
}

int sb_statfs(struct sb_backend *b, const char *path, struct statvfs *st)
{
	DISPATCH(SB_CALL_STATFS, statfs, path, st);
}

int sb_chown(struct sb_backend *b, const char *path, uid_t uid, gid_t gid)
{
	DISPATCH(SB_CALL_CHOWN, chown, path, uid, gid);
}

/* A repeated link's EEXIST is its own earlier attempt's work when the new
 * name is the same file as the old one. */
static bool link_done(struct sb_backend *b, const char *from, const char *to)
{
	struct stat a, n;
	return sb_stat(b, from, &a, NULL) == 0 && sb_stat(b, to, &n, NULL) == 0 &&
	       a.st_dev == n.st_dev && a.st_ino == n.st_ino;
}

static int attempt_end_link(struct sb_backend *b, struct call *c, int rc,
			    const char *from, const char *to)
{
	if (c->had_transient && c->attempt > 1 && rc == -EEXIST &&
	    link_done(b, from, to))
		rc = 0;
	return attempt_end(b, c, rc, NULL);
}

int sb_link(struct sb_backend *b, const char *from, const char *to)
{
	struct call c = {.kind = SB_CALL_LINK};
	int rc;
	before_call(b, c.kind);
	do {
		rc = attempt_begin(b, &c);
		if (rc == 0) {
			bool native = USE_NATIVE(b, link);
			rc = native ? b->ops->link(b, from, to)
				    : shell_hardlink(b, from, to);
			count(b, c.kind, rc, !native);
		} else {
			count(b, c.kind, rc, false);
		}
	} while (attempt_retry(b, &c, rc));
	return attempt_end_link(b, &c, rc, from, to);
}

/* ---- batch upload (write-back mode) ----
 * One counted write call however many files: the call a remote vendor
 * makes once (one tar PUT for docker). Without a native slot, or in
 * shell_ops mode, it loops over the single-file write; every file's rc is
 * set either way. A native batch that fails as a whole is retried file by
 * file, so each file gets its own error. */

static int write_files_loop(struct sb_backend *b, struct sb_upload *v,
			    size_t n, bool native)
{
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		v[i].rc = native ? b->ops->write_file(b, v[i].path, v[i].fd,
						      v[i].size, v[i].mode)
				 : shell_write_file(b, v[i].path, v[i].fd,
						    v[i].size, v[i].mode);
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

int sb_write_files(struct sb_backend *b, struct sb_upload *v, size_t n)
{
	if (n == 0)
		return 0;
	bool native_one = USE_NATIVE(b, write_file);
	bool native_many = USE_NATIVE(b, write_files);
	before_call(b, SB_CALL_WRITE);
	struct call c = {.kind = SB_CALL_WRITE};
	int rc;
	do {
		for (size_t i = 0; i < n; i++)
			v[i].rc = -EIO;
		rc = attempt_begin(b, &c);
		if (rc < 0) {
			count(b, SB_CALL_WRITE, rc, false);
			continue;
		}
		rc = native_many ? b->ops->write_files(b, v, n)
				 : write_files_loop(b, v, n, native_one);
		call_done(b, &c);
		rc = confirm_batch_alive(b, v, n, rc);
		count(b, SB_CALL_WRITE, rc, !native_many && !native_one);
	} while (attempt_retry(b, &c, rc));
	rc = attempt_end(b, &c, rc, NULL);
	for (size_t i = 0; i < n; i++)
		if (v[i].rc == 0)
			atomic_fetch_add(&b->counters.bytes_up, (uint64_t)v[i].size);
	if (rc == 0 || !native_many || sb_backend_is_dead(b))
		return rc;
	/* The files a failed native batch did not write go on their own,
	 * each counted, so each gets its own error. */
	rc = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].rc == 0)
			continue;
		v[i].mtime_set = false;
		v[i].rc = sb_write_file(b, v[i].path, v[i].fd, v[i].size, v[i].mode);
		if (v[i].rc < 0 && !rc)
			rc = v[i].rc;
	}
	return rc;
}

/* ---- batch remove (write-back mode) ----
 * One counted remove call for the whole batch, with the attempts, deadline
 * and faults of any other call. A repeat after a transient error may find
 * its own earlier attempt's work done: ENOENT on a repeat is success. */

int sb_remove_many(struct sb_backend *b, struct sb_remove *v, size_t n)
{
	if (n == 0)
		return 0;
	bool native = USE_NATIVE(b, remove_many);
	struct call c = {.kind = SB_CALL_REMOVE};
	int rc;
	do {
		for (size_t i = 0; i < n; i++)
			v[i].rc = -EIO;
		rc = attempt_begin(b, &c);
		if (rc < 0) {
			count(b, SB_CALL_REMOVE, rc, false);
			continue;
		}
		rc = native ? b->ops->remove_many(b, v, n)
			    : shell_remove_many(b, v, n);
		call_done(b, &c);
		count(b, SB_CALL_REMOVE, rc, !native);
	} while (attempt_retry(b, &c, rc));
	bool repeated = c.had_transient && c.attempt > 1;
	rc = attempt_end(b, &c, rc, NULL);
	int first = rc;
	for (size_t i = 0; i < n; i++) {
		if (repeated && v[i].rc == -ENOENT)
			v[i].rc = 0;
		if (v[i].rc < 0 && !first)
			first = v[i].rc;
	}
	return first;
}

/* ---- directory lists ---- */

struct sb_dirent *sb_dirlist_add(struct sb_dirlist *l, const char *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct sb_dirent *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		l->v = v;
		l->cap = cap;
	}
	char *copy = strdup(name);
	if (!copy)
		return NULL;
	struct sb_dirent *e = &l->v[l->n++];
	memset(e, 0, sizeof(*e));
	e->name = copy;
	return e;
}

void sb_dirlist_free(struct sb_dirlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].link_target);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
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
