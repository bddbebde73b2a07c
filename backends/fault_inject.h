/* Fault injection (testing aid, -o inject_faults=SPEC): a wrapper the
 * dispatcher puts around the backend's part of each attempt, so the fs
 * core's and the daemon's behaviour under failures can be tested on any
 * backend. -o inject_latency_ms=N goes through the same wrapper.
 *
 * SPEC is one or more rules joined by '+':
 *   ACTION:KIND:WHEN     e.g. transient:write:1, stall:stat:every3
 *   seed:N               seed of the generator behind p... rules (default 1)
 * ACTION  transient  the call fails with -ECONNRESET, as a dropped
 *                    connection would; the dispatch layer may retry it
 *         error      the call fails with -EIO; not retried, sandbox intact
 *         terminal   the sandbox is declared gone (sb_backend_fail)
 *         stall      the call hangs in the sandbox until its deadline
 *         kill       the sandbox is destroyed, then the call goes on, so
 *                    the backend finds out by itself that it is gone
 *         late       the call does its work, and its answer is held
 *                    FAULT_LATE_MS before it is taken: a slow answer that
 *                    the mount's other calls overtake (a listing made
 *                    before a change lands and answered after it);
 *                    lateMS (late6000) holds it MS milliseconds
 *         die        the call does its work, then the sandbox is destroyed
 *                    before the call's result is taken: a sandbox dying
 *                    while the call is in flight (an upload that lands in
 *                    a sandbox that is gone must not count)
 *         slow       the call waits FAULT_LATE_MS before the backend
 *                    starts it (slowMS: MS milliseconds): a command that
 *                    starts late, so what sbexec sends meanwhile (a
 *                    signal) arrives before the command exists
 * KIND    an sb_call_name() (write, exec, list, stat, read, mkdir, remove,
 *         rename, chmod, truncate, utimens, symlink, readlink, statfs, chown,
 *         link),
 *         any; each rule counts the attempts of its own kind, or
 *         create (late only): the sandbox is made and its backend's
 *         clocks run, and the mount gets the answer late (a slow create);
 *         or mount, the daemon's FUSE mount step (not a call, and not
 *         counted by any): error:mount:1 fails it as a mount refused by
 *         the kernel would, after the sandbox was created
 * WHEN    N          the Nth attempt only (1 = the first)
 *         N-M        attempts N to M, both included
 *         everyN     attempts N, 2N, 3N, ...
 *         pF         each attempt with probability F (0 < F <= 1), from a
 *                    seeded generator: the same SPEC fails the same calls
 */
#ifndef SBFS_FAULT_INJECT_H
#define SBFS_FAULT_INJECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define FAULT_RULES_MAX 16
#define FAULT_KIND_ANY SB_CALL_COUNT
#define FAULT_KIND_MOUNT (SB_CALL_COUNT + 1)
#define FAULT_LATE_MS 1000

enum fault_action {
	FAULT_NONE,
	FAULT_TRANSIENT,
	FAULT_ERROR,
	FAULT_TERMINAL,
	FAULT_STALL,
	FAULT_KILL,
	FAULT_LATE,
	FAULT_DIE,
	FAULT_SLOW, /* the last one: the parser's range ends here */
};

enum fault_when { FAULT_NTH, FAULT_EVERY, FAULT_PROB };


struct fault_rule {
	enum fault_action action;
	int kind;              /* enum sb_call, or FAULT_KIND_ANY */
	enum fault_when when;
	uint64_t n, last;      /* NTH: attempts n..last; EVERY: n */
	double p;              /* PROB */
	unsigned hold_ms;      /* late: how long the answer is held */
	atomic_uint_fast64_t seen; /* attempts of this kind so far */
};

struct fault_plan {
	struct fault_rule rules[FAULT_RULES_MAX];
	size_t n;
	uint64_t seed;
	uint64_t rng;          /* xorshift state, under the lock below */
	atomic_flag rng_lock;
	atomic_uint_fast64_t injected;
};

/* Parses SPEC into *plan. 0, or -1 with a one-line reason in err. */
int fault_plan_parse(struct fault_plan *plan, const char *spec, char *err,
		     size_t errlen);

/* The fault for this attempt of a call of kind (FAULT_NONE for most):
 * counts the attempt in every matching rule; the first rule that fires
 * wins. Thread-safe. */
enum fault_action fault_plan_next(struct fault_plan *plan, enum sb_call kind);
/* The same, and the winning rule's hold_ms in *hold_ms (0 when none). */
enum fault_action fault_plan_next_held(struct fault_plan *plan, enum sb_call kind,
				       unsigned *hold_ms);

/* Whether the plan fails the daemon's FUSE mount step now. */
bool fault_plan_fails_mount(struct fault_plan *plan);

const char *fault_action_name(enum fault_action a);

/* ---- the wrapper (dispatch.c) ---- */

/* Whether b's calls go through fault_call (a plan or a latency is set). */
bool fault_wrapping(const struct sb_backend *b);

/* One attempt of a call of kind: call(b, arg), the backend's part, with
 * the plan's fault for this attempt applied around it. Returns the
 * injected result when a fault replaces the call, else call's. */
int fault_call(struct sb_backend *b, enum sb_call kind,
	       int (*call)(struct sb_backend *b, void *arg), void *arg);

/* Right after b's create succeeded: a late:create rule holds the answer
 * there, the sandbox made and the backend's clocks running. */
void fault_after_create(struct sb_backend *b);

#endif
