#include "lifetime.h"

#include "util/call_deadline.h"

/* Every call the mount made, and every command started or ended: one
 * number that moves whenever the sandbox is used. */
static uint64_t activity(struct sb_backend *b)
{
	uint64_t n = 0;
	for (int k = 0; k < SB_CALL_COUNT; k++)
		n += atomic_load(&b->counters.calls[k]);
	return n;
}

void sb_lifetime_start(struct sb_lifetime *l, struct sb_backend *b)
{
	l->life_s = b->spec.sandbox_timeout_s;
	l->idle_s = b->spec.idle_timeout_s;
	l->start = l->idle_since = call_deadline_now();
	l->last = activity(b);
	l->ready_seen = false;
}

const char *sb_lifetime_check(struct sb_lifetime *l, struct sb_backend *b, double now,
			      unsigned *secs, double *wait_s)
{
	uint64_t a = activity(b);
	/* Idle counts from the first check that sees the mount ready: a slow
	 * create, or a slow mount after it, must not eat the idle budget (CI:
	 * idle ended 1.2 s after `mounted` with idle_timeout=4). A long
	 * command, or a file held open, is use, not idleness. */
	bool ready = atomic_load(&b->ready);
	if (!ready || !l->ready_seen || a != l->last ||
	    atomic_load(&b->execs_started) != atomic_load(&b->execs_ended) ||
	    atomic_load(&b->files_open) > 0) {
		l->ready_seen = ready;
		l->last = a;
		l->idle_since = now;
	}
	if (l->life_s && now - l->start >= l->life_s) {
		*secs = l->life_s;
		return "sandbox lifetime";
	}
	if (l->idle_s && now - l->idle_since >= l->idle_s) {
		*secs = l->idle_s;
		return "idle timeout";
	}
	if (l->life_s && l->start + l->life_s - now < *wait_s)
		*wait_s = l->start + l->life_s - now;
	if (l->idle_s && l->idle_since + l->idle_s - now < *wait_s)
		*wait_s = l->idle_since + l->idle_s - now;
	return NULL;
}
