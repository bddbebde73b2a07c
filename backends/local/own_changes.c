#include "own_changes.h"
#include "util/timespec.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A report arrives within moments of its change, so the latest few
 * hundred are enough; one that fell out is reported, which costs the
 * mount a question, never a wrong answer. */
#define OWN_CHANGES 512

struct own_change {
	char *rel; /* NULL: a free slot */
	uint64_t hash;
	unsigned busy; /* changes to rel under way */
	bool known;    /* the last change's result is below */
	bool gone;
	dev_t dev;
	ino_t ino;
	mode_t mode;
	off_t size;
	struct timespec mtime, ctime;
};

struct own_changes {
	/* Innermost: taken by the backend's file operations (any thread)
	 * and by the watch's reports, never around another lock. */
	pthread_mutex_t mu;
	pthread_cond_t ended; /* a change ended: a waiting report looks again */
	struct own_change slots[OWN_CHANGES];
	size_t next; /* where the ring evicts next */
};

static uint64_t hash_of(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

static struct own_change *find(struct own_changes *oc, const char *rel, uint64_t h)
{
	for (size_t i = 0; i < OWN_CHANGES; i++) {
		struct own_change *o = &oc->slots[i];
		if (o->rel && o->hash == h && !strcmp(o->rel, rel))
			return o;
	}
	return NULL;
}

/* A slot for rel: its own, or the next one in the ring no change is
 * using. NULL when every slot is busy or memory ran out. */
static struct own_change *claim(struct own_changes *oc, const char *rel)
{
	uint64_t h = hash_of(rel);
	struct own_change *o = find(oc, rel, h);
	if (o)
		return o;
	for (size_t tries = 0; tries < OWN_CHANGES; tries++) {
		o = &oc->slots[oc->next++ % OWN_CHANGES];
		if (o->busy)
			continue;
		char *copy = strdup(rel);
		if (!copy)
			return NULL;
		free(o->rel);
		*o = (struct own_change){.rel = copy, .hash = h};
		return o;
	}
	return NULL;
}

struct own_changes *own_changes_new(void)
{
	struct own_changes *oc = calloc(1, sizeof *oc);
	if (!oc)
		return NULL;
	cond_init_monotonic(&oc->ended);
	pthread_mutex_init(&oc->mu, NULL);
	return oc;
}

void own_changes_free(struct own_changes *oc)
{
	if (!oc)
		return;
	for (size_t i = 0; i < OWN_CHANGES; i++)
		free(oc->slots[i].rel);
	pthread_cond_destroy(&oc->ended);
	pthread_mutex_destroy(&oc->mu);
	free(oc);
}

bool own_changes_begin(struct own_changes *oc, const char *rel)
{
	pthread_mutex_lock(&oc->mu);
	struct own_change *o = claim(oc, rel);
	if (o)
		o->busy++;
	pthread_mutex_unlock(&oc->mu);
	return o != NULL;
}

void own_changes_end(struct own_changes *oc, const char *rel, bool marked,
		     const struct stat *left, bool gone)
{
	pthread_mutex_lock(&oc->mu);
	struct own_change *o = marked ? find(oc, rel, hash_of(rel)) : claim(oc, rel);
	if (o) {
		if (marked && o->busy)
			o->busy--;
		o->known = left || gone;
		o->gone = !left && gone;
		if (left) {
			o->dev = left->st_dev;
			o->ino = left->st_ino;
			o->mode = left->st_mode;
			o->size = left->st_size;
			o->mtime = left->st_mtim;
			o->ctime = left->st_ctim;
		}
	}
	pthread_cond_broadcast(&oc->ended);
	pthread_mutex_unlock(&oc->mu);
}

void own_changes_wait(struct own_changes *oc, const char *rel, int wait_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until = timespec_after_ms(until, wait_ms);
	uint64_t h = hash_of(rel);
	pthread_mutex_lock(&oc->mu);
	for (;;) {
		struct own_change *o = find(oc, rel, h);
		if (!o || !o->busy ||
		    pthread_cond_timedwait(&oc->ended, &oc->mu, &until) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&oc->mu);
}

/* The ctime too, which no one can set: nothing changed rel since. */
static bool same_stat(const struct own_change *o, const struct stat *st)
{
	return o->dev == st->st_dev && o->ino == st->st_ino && o->mode == st->st_mode &&
	       o->size == st->st_size &&
	       o->mtime.tv_sec == st->st_mtim.tv_sec && o->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       o->ctime.tv_sec == st->st_ctim.tv_sec && o->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

bool own_changes_match(struct own_changes *oc, const char *rel, const struct stat *st)
{
	bool own = false;
	pthread_mutex_lock(&oc->mu);
	struct own_change *o = find(oc, rel, hash_of(rel));
	if (o && o->known && !o->busy) {
		own = st ? !o->gone && same_stat(o, st) : o->gone;
		if (!own)
			o->known = false;
	}
	pthread_mutex_unlock(&oc->mu);
	return own;
}
