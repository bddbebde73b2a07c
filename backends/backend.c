/* Backend registry, spec handling, and the dispatch layer that every caller
 * goes through: it counts calls, refuses at once when the sandbox is dead,
 * and picks the native slot or the generic shell implementation. */
#include "backend.h"
#include "shell_ops.h"
#include "util/log.h"

#include <errno.h>
#include <time.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

extern const struct sb_backend_ops sb_local_ops;
extern const struct sb_backend_ops sb_modal_ops;
extern const struct sb_backend_ops sb_docker_ops;

static const struct sb_backend_ops *const all_backends[] = {
	&sb_local_ops,
	&sb_docker_ops,
	&sb_modal_ops,
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
		rc = b->ops->destroy(b);
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

static int count(struct sb_backend *b, enum sb_call kind, int rc, bool shell)
{
	if (rc < 0)
		atomic_fetch_add(&b->counters.errors[kind], 1);
	if (shell)
		atomic_fetch_add(&b->counters.shell_fallbacks, 1);
	return rc;
}

/* Counts the call and yields -EIO when dead; 0 means go on. */
static int enter(struct sb_backend *b, enum sb_call kind)
{
	atomic_fetch_add(&b->counters.calls[kind], 1);
	if (sb_backend_is_dead(b)) {
		atomic_fetch_add(&b->counters.errors[kind], 1);
		return -EIO;
	}
	if (b->inject_latency_ms) {
		/* One round trip to a remote sandbox, modelled on any backend. */
		struct timespec d = {b->inject_latency_ms / 1000,
				     (long)(b->inject_latency_ms % 1000) * 1000000L};
		while (nanosleep(&d, &d) < 0 && errno == EINTR)
			;
	}
	return 0;
}

#define USE_NATIVE(b, slot) ((b)->ops->slot && !(b)->shell_only)

/* One dispatcher per op: native slot when present, else shell_ops. */
#define DISPATCH(kind, slot, ...)                                            \
	do {                                                                 \
		int rc_ = enter(b, kind);                                    \
		if (rc_ < 0)                                                 \
			return rc_;                                          \
		bool native_ = USE_NATIVE(b, slot);                          \
		rc_ = native_ ? b->ops->slot(b, __VA_ARGS__)                 \
			      : shell_##slot(b, __VA_ARGS__);                \
		return count(b, kind, rc_, !native_);                        \
	} while (0)

int sb_exec(struct sb_backend *b, const struct sb_exec_req *req,
	    struct sb_exec_result *res)
{
	memset(res, 0, sizeof(*res));
	int rc = enter(b, SB_CALL_EXEC);
	if (rc < 0) {
		res->sandbox_terminated = true;
		return rc;
	}
	rc = b->ops->exec(b, req, res);
	return count(b, SB_CALL_EXEC, rc, false);
}

int sb_read(struct sb_backend *b, const char *path, off_t off, size_t len,
	    char *buf, size_t *got)
{
	*got = 0;
	int rc = enter(b, SB_CALL_READ);
	if (rc < 0)
		return rc;
	rc = shell_read(b, path, off, len, buf, got);
	if (rc == 0)
		atomic_fetch_add(&b->counters.bytes_down, *got);
	return count(b, SB_CALL_READ, rc, true);
}

int sb_write_file(struct sb_backend *b, const char *path, int fd, off_t size,
		  mode_t mode)
{
	int rc = enter(b, SB_CALL_WRITE);
	if (rc < 0)
		return rc;
	bool native = USE_NATIVE(b, write_file);
	rc = native ? b->ops->write_file(b, path, fd, size, mode)
		    : shell_write_file(b, path, fd, size, mode);
	if (rc == 0)
		atomic_fetch_add(&b->counters.bytes_up, (uint64_t)size);
	return count(b, SB_CALL_WRITE, rc, !native);
}

int sb_list_dir(struct sb_backend *b, const char *path, struct sb_dirlist *out)
{
	DISPATCH(SB_CALL_LIST, list_dir, path, out);
}

int sb_stat(struct sb_backend *b, const char *path, struct stat *st,
	    char **link_target)
{
	DISPATCH(SB_CALL_STAT, stat, path, st, link_target);
}

int sb_mkdir(struct sb_backend *b, const char *path, mode_t mode)
{
	DISPATCH(SB_CALL_MKDIR, mkdir, path, mode);
}

int sb_remove(struct sb_backend *b, const char *path, bool is_dir)
{
	DISPATCH(SB_CALL_REMOVE, remove, path, is_dir);
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
		if (v[i].rc == 0)
			atomic_fetch_add(&b->counters.bytes_up, (uint64_t)v[i].size);
		else if (!first)
			first = v[i].rc;
		if (sb_backend_is_dead(b)) {
			for (size_t j = i + 1; j < n; j++)
				v[j].rc = -EIO;
			return first ? first : -EIO;
		}
	}
	return first;
}

int sb_write_files(struct sb_backend *b, struct sb_upload *v, size_t n)
{
	if (n == 0)
		return 0;
	int rc = enter(b, SB_CALL_WRITE);
	if (rc < 0) {
		for (size_t i = 0; i < n; i++)
			v[i].rc = rc;
		return rc;
	}
	bool native_one = USE_NATIVE(b, write_file);
	if (USE_NATIVE(b, write_files)) {
		rc = b->ops->write_files(b, v, n);
		if (rc == 0) {
			for (size_t i = 0; i < n; i++)
				atomic_fetch_add(&b->counters.bytes_up,
						 (uint64_t)v[i].size);
			return count(b, SB_CALL_WRITE, 0, false);
		}
		if (sb_backend_is_dead(b))
			return count(b, SB_CALL_WRITE, rc, false);
		for (size_t i = 0; i < n; i++)
			if (v[i].rc == 0)
				atomic_fetch_add(&b->counters.bytes_up,
						 (uint64_t)v[i].size);
		count(b, SB_CALL_WRITE, rc, false);
		/* The files the batch did not write go on their own, each
		 * counted. */
		rc = 0;
		for (size_t i = 0; i < n; i++) {
			if (v[i].rc == 0)
				continue;
			v[i].mtime_set = false;
			v[i].rc = sb_write_file(b, v[i].path, v[i].fd, v[i].size,
						v[i].mode);
			if (v[i].rc < 0 && !rc)
				rc = v[i].rc;
		}
		return rc;
	}
	rc = write_files_loop(b, v, n, native_one);
	return count(b, SB_CALL_WRITE, rc, !native_one);
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
		"readlink", "statfs", "destroy",
	};
	return (unsigned)c < SB_CALL_COUNT ? names[c] : "unknown";
}
