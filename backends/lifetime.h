/* -o sandbox_timeout= and idle_timeout= for the backends whose vendor
 * has no such limit of its own (docker, sbx): a watcher thread asks this
 * clock, and removes the sandbox when it says a limit is reached. */
#ifndef SBFS_LIFETIME_H
#define SBFS_LIFETIME_H

#include "backend.h"

struct sb_lifetime {
	unsigned life_s, idle_s; /* 0 = no such limit */
	double start, idle_since;
	uint64_t last;           /* the activity count last seen */
	bool ready_seen;         /* a check saw the mount ready */
};

void sb_lifetime_start(struct sb_lifetime *l, struct sb_backend *b);

/* At now (call_deadline_now's clock): the limit reached, "sandbox
 * lifetime" or "idle timeout", with its seconds in *secs; else NULL, and
 * *wait_s lowered to when the next one could be (never raised). The
 * lifetime counts from start; idle time from the first check after the
 * daemon set b->ready, and again from each check that sees a file call,
 * a command still running or a file open. */
const char *sb_lifetime_check(struct sb_lifetime *l, struct sb_backend *b, double now,
			      unsigned *secs, double *wait_s);

#endif
