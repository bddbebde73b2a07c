/* `sbfs list`'s second half: the sandboxes sbfs left on each backend
 * (kept with -o keep, or orphaned by a daemon that died), asked of the
 * backends side by side; one that cannot be reached, or does not answer
 * within LIST_WAIT_S, is skipped with a note, so it never holds the
 * listing up. Nothing is created. */
#include "list_owned.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIST_WAIT_S 8

struct job {
	const struct sb_backend_ops *ops;
	struct mount_options o;
	bool parsed;
	int rc;
	struct sb_owned *v;
	size_t n;
	char err[SB_REASON_MAX];
	bool started, done;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static void *run(void *arg)
{
	struct job *j = arg;
	struct sb_owned *v = NULL;
	size_t n = 0;
	char err[SB_REASON_MAX] = "";
	int rc = j->ops->list_owned(&j->o.spec, &v, &n, err, sizeof err);
	pthread_mutex_lock(&lock);
	j->rc = rc;
	j->v = v;
	j->n = n;
	memcpy(j->err, err, sizeof err);
	j->done = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Each backend with its options from the config file (and the command
 * line's, for the one it names). */
static size_t plan(struct job *jobs, size_t max, const struct mount_options *only)
{
	size_t k = 0;
	for (const struct sb_backend_ops *const *b = sb_backend_all(); *b && k < max; b++) {
		if (!(*b)->list_owned || (only && only->backend != *b))
			continue;
		struct job *j = &jobs[k];
		j->ops = *b;
		if (only) {
			j->o = *only;
		} else {
			char opt[128], err[512];
			snprintf(opt, sizeof opt, "backend=%s", (*b)->name);
			char *args[] = {"-o", opt, "/", NULL};
			if (mount_options_parse(3, args, &j->o, err, sizeof err) != 0) {
				fprintf(stderr, "sbfs: list: %s: skipped (%s)\n", (*b)->name, err);
				mount_options_free(&j->o);
				continue;
			}
			j->parsed = true;
		}
		k++;
	}
	return k;
}

static const char *state_word(enum sb_owned_state s)
{
	return s == SB_OWNED_KEPT ? "kept" : s == SB_OWNED_ORPHAN ? "orphaned" : "in use";
}

json_t *list_owned_sandboxes(const struct mount_options *only, bool *abandoned_out)
{
	json_t *all = json_array();
	size_t max = 0;
	for (const struct sb_backend_ops *const *b = sb_backend_all(); *b; b++)
		max++;
	/* On the heap and never freed while a thread may still run: one
	 * that missed the deadline writes into its job at any time. */
	struct job *jobs = calloc(max ? max : 1, sizeof *jobs);
	*abandoned_out = false;
	if (!all || !jobs) {
		free(jobs);
		return all;
	}
	size_t n = plan(jobs, max, only);
	for (size_t i = 0; i < n; i++) {
		pthread_t t;
		jobs[i].started = pthread_create(&t, NULL, run, &jobs[i]) == 0;
		if (jobs[i].started)
			pthread_detach(t);
		else
			snprintf(jobs[i].err, sizeof jobs[i].err, "cannot start a thread");
	}
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += LIST_WAIT_S;
	pthread_mutex_lock(&lock);
	for (;;) {
		bool pending = false;
		for (size_t i = 0; i < n; i++)
			pending |= jobs[i].started && !jobs[i].done;
		if (!pending || pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT)
			break;
	}
	bool abandoned = false;
	for (size_t i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		if (!j->done) {
			abandoned |= jobs[i].started;
			if (jobs[i].started)
				fprintf(stderr, "sbfs: list: %s: skipped (no answer within %d s)\n",
					j->ops->name, LIST_WAIT_S);
			else
				fprintf(stderr, "sbfs: list: %s: skipped (%s)\n", j->ops->name, j->err);
			continue;
		}
		if (j->rc < 0)
			fprintf(stderr, "sbfs: list: %s: skipped (%s)\n", j->ops->name, j->err);
		for (size_t k = 0; j->rc == 0 && k < j->n; k++) {
			const struct sb_owned *s = &j->v[k];
			if (s->state == SB_OWNED_IN_USE)
				continue; /* a mount, here or elsewhere: listed as such */
			json_t *e = json_pack("{s:s,s:s,s:s,s:n}", "backend", j->ops->name,
					      "sandbox", s->id, "state", state_word(s->state),
					      "mount");
			if (s->created > 0)
				json_object_set_new(e, "started", json_integer((json_int_t)s->created));
			if (s->why[0] && s->state == SB_OWNED_ORPHAN)
				json_object_set_new(e, "reason", json_string(s->why));
			json_array_append_new(all, e);
		}
		free(j->v);
		if (j->parsed)
			mount_options_free(&j->o);
	}
	pthread_mutex_unlock(&lock);
	if (!abandoned)
		free(jobs);
	*abandoned_out = abandoned;
	return all;
}
