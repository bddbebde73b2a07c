/* The registry of compiled-in backends, the spec a sandbox is asked for,
 * and a backend object's life: create, destroy, failure. The calls made
 * on a live backend go through the dispatcher (dispatch.c). */
#include "backend.h"
#include "backends/backend_list.h" /* generated */
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

int sb_spec_check_sni_allowlist(struct sb_backend *b, const char *how)
{
	const struct sb_spec *s = &b->spec;
	if (!s->allow_egress_to || !s->allow_egress_to[0])
		return 0;
	if (!s->block_network) {
		snprintf(b->error, sizeof b->error,
			 "allow_egress_to with the network open (-o network) is contradictory: drop one of them");
		return -EINVAL;
	}
	const char *enf = sb_spec_option(s, "egress_enforcement");
	if (!enf || strcmp(enf, "sni") != 0) {
		snprintf(b->error, sizeof b->error,
			 "%s: add -o egress_enforcement=sni to accept that, or use block_network", how);
		return -EINVAL;
	}
	return 0;
}

bool sb_backend_option_known(const struct sb_backend_ops *ops, const char *opt)
{
	size_t klen = strcspn(opt, "=");
	for (size_t i = 0; ops->option_keys && ops->option_keys[i]; i++)
		if (strlen(ops->option_keys[i]) == klen &&
		    strncmp(ops->option_keys[i], opt, klen) == 0)
			return true;
	return false;
}

int sb_backend_check_spec(const struct sb_backend_ops *ops,
			  const struct sb_spec *spec, char *err, size_t errlen)
{
	for (size_t i = 0; spec->options && spec->options[i]; i++) {
		if (!sb_backend_option_known(ops, spec->options[i])) {
			int klen = (int)strcspn(spec->options[i], "=");
			snprintf(err, errlen, "unknown option '%.*s' for backend '%s'",
				 klen, spec->options[i], ops->name);
			return -EINVAL;
		}
	}
	const char *why = ops->refuse ? ops->refuse(spec) : NULL;
	if (why) {
		snprintf(err, errlen, "%s", why);
		return -EINVAL;
	}
	return 0;
}

struct sb_backend *sb_backend_create(const struct sb_backend_ops *ops,
				     struct sb_spec *spec, bool shell_only,
				     char *err, size_t errlen)
{
	if (sb_backend_check_spec(ops, spec, err, errlen) < 0) {
		sb_spec_free(spec);
		return NULL;
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
	atomic_init(&b->ready, false);
	atomic_init(&b->files_open, 0);
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
