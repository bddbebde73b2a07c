/* own_changes: the watch's record of the mount's own changes. */
#include "backends/local/own_changes.h"
#include "unit.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static struct stat stat_of(ino_t ino, off_t size, long ctime_ns)
{
	struct stat st = {.st_dev = 1, .st_ino = ino, .st_mode = 0100644, .st_size = size};
	st.st_ctim.tv_nsec = ctime_ns;
	return st;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct ender {
	struct own_changes *oc;
	struct stat left;
};

static void *end_later(void *arg)
{
	struct ender *e = arg;
	usleep(50 * 1000);
	own_changes_end(e->oc, "a/f", true, &e->left, false);
	return NULL;
}

int main(void)
{
	struct own_changes *oc = own_changes_new();
	struct stat v1 = stat_of(7, 10, 1), v2 = stat_of(7, 20, 2);

	/* what the mount left is its own; anything else is news, and
	 * stays news (the mismatch forgets the mount's change) */
	CHECK(own_changes_begin(oc, "a/f"));
	own_changes_end(oc, "a/f", true, &v1, false);
	CHECK(own_changes_match(oc, "a/f", &v1));
	CHECK(own_changes_match(oc, "a/f", &v1)); /* every event of it */
	CHECK(!own_changes_match(oc, "a/f", &v2));
	CHECK(!own_changes_match(oc, "a/f", &v1));
	CHECK(!own_changes_match(oc, "other", &v1)); /* never changed here */

	/* a remove: gone is its own, a name made again is news */
	bool m = own_changes_begin(oc, "a/g");
	own_changes_end(oc, "a/g", m, NULL, true);
	CHECK(own_changes_match(oc, "a/g", NULL));
	CHECK(!own_changes_match(oc, "a/g", &v1));

	/* a failed change leaves nothing known */
	m = own_changes_begin(oc, "a/h");
	own_changes_end(oc, "a/h", m, NULL, false);
	CHECK(!own_changes_match(oc, "a/h", NULL));

	/* a report read while the change is under way waits for its end,
	 * then sees it as the mount's own */
	CHECK(own_changes_begin(oc, "a/f"));
	CHECK(!own_changes_match(oc, "a/f", &v2)); /* under way: not yet known */
	struct ender e = {.oc = oc, .left = v2};
	pthread_t t;
	pthread_create(&t, NULL, end_later, &e);
	double t0 = now_ms();
	own_changes_wait(oc, "a/f", 5000);
	double waited = now_ms() - t0;
	pthread_join(t, NULL);
	CHECK(waited >= 40 && waited < 4000);
	CHECK(own_changes_match(oc, "a/f", &v2));

	/* a change that never ends holds a report only so long */
	CHECK(own_changes_begin(oc, "stuck"));
	t0 = now_ms();
	own_changes_wait(oc, "stuck", 30);
	CHECK(now_ms() - t0 >= 25);
	own_changes_wait(oc, "idle", 5000); /* nothing under way: at once */
	CHECK(now_ms() - t0 < 4000);

	/* the ring evicts the oldest idle changes, never one under way */
	char name[32];
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof name, "n%d", i);
		m = own_changes_begin(oc, name);
		own_changes_end(oc, name, m, &v1, false);
	}
	CHECK(own_changes_match(oc, "n1999", &v1));
	CHECK(!own_changes_match(oc, "n0", &v1));
	own_changes_end(oc, "stuck", true, &v1, false);
	CHECK(own_changes_match(oc, "stuck", &v1));

	own_changes_free(oc);
	return unit_done("own_changes");
}
