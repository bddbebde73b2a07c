/* The idle and lifetime clock of the backends without a vendor timeout
 * (docker, sbx): idle time counts from the mount being ready and from
 * the last use, never from create. */
#include <stdlib.h>

#include "backends/lifetime.h"
#include "unit.h"

static struct sb_backend *backend(unsigned life_s, unsigned idle_s)
{
	struct sb_backend *b = calloc(1, sizeof *b);
	b->spec.sandbox_timeout_s = life_s;
	b->spec.idle_timeout_s = idle_s;
	return b;
}

static const char *check(struct sb_lifetime *l, struct sb_backend *b, double now)
{
	unsigned secs = 0;
	double wait = 1e9;
	return sb_lifetime_check(l, b, now, &secs, &wait);
}

/* A create and a mount that took longer than the idle timeout: the CI
 * failure (idle ended 1.2 s after `mounted` with idle_timeout=4). */
static void test_idle_counts_from_ready(void)
{
	struct sb_backend *b = backend(0, 4);
	struct sb_lifetime l;
	sb_lifetime_start(&l, b);
	double t0 = l.start;
	CHECK(check(&l, b, t0 + 1) == NULL);
	CHECK(check(&l, b, t0 + 10) == NULL); /* not mounted yet */
	atomic_store(&b->ready, true);
	/* the first check after ready starts the idle time; one that last
	 * looked before ready must not count from then */
	CHECK(check(&l, b, t0 + 14) == NULL);
	CHECK(check(&l, b, t0 + 17.9) == NULL);
	const char *why = check(&l, b, t0 + 18.01);
	CHECK(why && !strcmp(why, "idle timeout"));
	free(b);
}

static void test_use_restarts_idle(void)
{
	struct sb_backend *b = backend(0, 4);
	struct sb_lifetime l;
	sb_lifetime_start(&l, b);
	double t0 = l.start;
	atomic_store(&b->ready, true);
	CHECK(check(&l, b, t0) == NULL);
	atomic_fetch_add(&b->counters.calls[SB_CALL_STAT], 1);
	CHECK(check(&l, b, t0 + 3) == NULL);
	CHECK(check(&l, b, t0 + 6.9) == NULL);
	/* a file held open, no calls: still in use */
	atomic_store(&b->files_open, 1);
	CHECK(check(&l, b, t0 + 20) == NULL);
	atomic_store(&b->files_open, 0);
	CHECK(check(&l, b, t0 + 23.9) == NULL);
	CHECK(check(&l, b, t0 + 24.01) != NULL);
	/* a command running: in use */
	struct sb_lifetime l2;
	sb_lifetime_start(&l2, b);
	atomic_store(&b->execs_started, 1);
	CHECK(check(&l2, b, l2.start) == NULL);
	CHECK(check(&l2, b, l2.start + 30) == NULL);
	atomic_store(&b->execs_ended, 1);
	CHECK(check(&l2, b, l2.start + 33.9) == NULL);
	CHECK(check(&l2, b, l2.start + 34.01) != NULL);
	free(b);
}

/* The lifetime is the sandbox's: it counts from create. */
static void test_lifetime_counts_from_create(void)
{
	struct sb_backend *b = backend(10, 0);
	struct sb_lifetime l;
	sb_lifetime_start(&l, b);
	CHECK(check(&l, b, l.start + 9.9) == NULL);
	const char *why = check(&l, b, l.start + 10.01);
	CHECK(why && !strcmp(why, "sandbox lifetime"));
	free(b);
}

int main(void)
{
	test_idle_counts_from_ready();
	test_use_restarts_idle();
	test_lifetime_counts_from_create();
	return unit_done("lifetime");
}
