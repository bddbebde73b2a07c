/* -o inject_faults=SPEC (grammar in the header): parsing it, choosing the
 * fault of each attempt, and applying it around the backend's call. */
#include "fault_inject.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const action_names[] = {
	[FAULT_NONE] = "none",         [FAULT_TRANSIENT] = "transient",
	[FAULT_ERROR] = "error",       [FAULT_TERMINAL] = "terminal",
	[FAULT_STALL] = "stall",       [FAULT_KILL] = "kill",
	[FAULT_LATE] = "late",         [FAULT_DIE] = "die",
	[FAULT_SLOW] = "slow",
};

const char *fault_action_name(enum fault_action a)
{
	return (unsigned)a <= FAULT_SLOW ? action_names[a] : "?";
}

static int bad(char *err, size_t errlen, const char *rule, int len,
	       const char *why)
{
	snprintf(err, errlen,
		 "inject_faults: bad rule '%.*s': %s (rules are ACTION:KIND:WHEN "
		 "joined by '+', e.g. transient:write:1+stall:stat:every3)",
		 len, rule, why);
	return -1;
}

/* A whole decimal number >= 1, nothing after it. */
static bool parse_count(const char *s, size_t len, uint64_t *out)
{
	if (len == 0 || len > 18)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return v >= 1;
}

static int parse_kind(const char *s, size_t len)
{
	if (len == 3 && !strncmp(s, "any", 3))
		return FAULT_KIND_ANY;
	if (len == 5 && !strncmp(s, "mount", 5))
		return FAULT_KIND_MOUNT;
	/* destroy runs after the mount: not injectable; create only late */
	for (int k = 0; k < SB_CALL_COUNT; k++) {
		if (k == SB_CALL_DESTROY)
			continue;
		const char *name = sb_call_name((enum sb_call)k);
		if (strlen(name) == len && !strncmp(s, name, len))
			return k;
	}
	return -1;
}

static int parse_rule(struct fault_plan *plan, const char *r, size_t len,
		      char *err, size_t errlen)
{
	int ilen = (int)len;
	const char *c1 = memchr(r, ':', len);
	if (!c1)
		return bad(err, errlen, r, ilen, "missing ':'");
	size_t alen = (size_t)(c1 - r);
	if (alen == 4 && !strncmp(r, "seed", 4)) {
		const char *v = c1 + 1;
		size_t vlen = len - alen - 1;
		uint64_t seed = 0;
		if (!(vlen == 1 && v[0] == '0') && !parse_count(v, vlen, &seed))
			return bad(err, errlen, r, ilen, "seed must be a whole number");
		plan->seed = seed;
		return 0;
	}
	const char *c2 = memchr(c1 + 1, ':', len - alen - 1);
	if (!c2)
		return bad(err, errlen, r, ilen, "missing ':' before WHEN");
	if (plan->n == FAULT_RULES_MAX)
		return bad(err, errlen, r, ilen, "too many rules (at most 16)");
	struct fault_rule *fr = &plan->rules[plan->n];
	memset(fr, 0, sizeof *fr);
	fr->action = FAULT_NONE;
	fr->hold_ms = FAULT_LATE_MS;
	for (int a = FAULT_TRANSIENT; a <= FAULT_SLOW; a++)
		if (strlen(action_names[a]) == alen && !strncmp(r, action_names[a], alen))
			fr->action = (enum fault_action)a;
	uint64_t hold = 0;
	for (int a = FAULT_LATE; a <= FAULT_SLOW; a += FAULT_SLOW - FAULT_LATE) {
		size_t nlen = strlen(action_names[a]);
		if (fr->action != FAULT_NONE || alen <= nlen || strncmp(r, action_names[a], nlen))
			continue;
		if (!parse_count(r + nlen, alen - nlen, &hold) || hold > 600000)
			return bad(err, errlen, r, ilen, "lateMS and slowMS need a whole MS, 1 to 600000");
		fr->action = (enum fault_action)a;
		fr->hold_ms = (unsigned)hold;
	}
	if (fr->action == FAULT_NONE)
		return bad(err, errlen, r, ilen,
			   "ACTION is one of transient, error, terminal, stall, kill, late, lateMS, die, slow, slowMS");
	fr->kind = parse_kind(c1 + 1, (size_t)(c2 - c1 - 1));
	if (fr->kind < 0)
		return bad(err, errlen, r, ilen,
			   "KIND is any, create or a call name: exec, read, write, list, stat, "
			   "mkdir, remove, rename, chmod, truncate, utimens, symlink, "
			   "readlink, statfs; or mount, the FUSE mount step");
	if (fr->kind == SB_CALL_CREATE && fr->action != FAULT_LATE)
		return bad(err, errlen, r, ilen, "create takes late or lateMS only");
	if (fr->kind == FAULT_KIND_MOUNT && fr->action != FAULT_ERROR)
		return bad(err, errlen, r, ilen, "the mount step takes only error");
	const char *w = c2 + 1;
	size_t wlen = len - (size_t)(w - r);
	if (wlen > 5 && !strncmp(w, "every", 5)) {
		fr->when = FAULT_EVERY;
		if (!parse_count(w + 5, wlen - 5, &fr->n))
			return bad(err, errlen, r, ilen, "everyN needs a whole N >= 1");
	} else if (wlen > 1 && w[0] == 'p') {
		char buf[32], *end = NULL;
		if (wlen - 1 >= sizeof buf)
			return bad(err, errlen, r, ilen, "pF: F is too long");
		memcpy(buf, w + 1, wlen - 1);
		buf[wlen - 1] = '\0';
		errno = 0;
		fr->p = strtod(buf, &end);
		if (errno || *end || !(fr->p > 0 && fr->p <= 1))
			return bad(err, errlen, r, ilen, "pF needs 0 < F <= 1");
		fr->when = FAULT_PROB;
	} else {
		fr->when = FAULT_NTH;
		const char *dash = memchr(w, '-', wlen);
		size_t flen = dash ? (size_t)(dash - w) : wlen;
		if (!parse_count(w, flen, &fr->n))
			return bad(err, errlen, r, ilen,
				   "WHEN is N (the Nth call), N-M, everyN or pF");
		fr->last = fr->n;
		if (dash && (!parse_count(dash + 1, wlen - flen - 1, &fr->last) ||
			     fr->last < fr->n))
			return bad(err, errlen, r, ilen, "N-M needs whole N <= M");
	}
	atomic_init(&fr->seen, 0);
	plan->n++;
	return 0;
}

int fault_plan_parse(struct fault_plan *plan, const char *spec, char *err,
		     size_t errlen)
{
	memset(plan, 0, sizeof *plan);
	plan->seed = 1;
	atomic_flag_clear(&plan->rng_lock);
	atomic_init(&plan->injected, 0);
	if (!spec || !*spec) {
		snprintf(err, errlen, "inject_faults: empty SPEC (e.g. transient:write:1)");
		return -1;
	}
	for (const char *r = spec;;) {
		size_t len = strcspn(r, "+");
		if (len == 0)
			return bad(err, errlen, r, 0, "empty rule");
		if (parse_rule(plan, r, len, err, errlen) < 0)
			return -1;
		if (!r[len])
			break;
		r += len + 1;
	}
	if (plan->n == 0) {
		snprintf(err, errlen, "inject_faults: SPEC has a seed but no rule");
		return -1;
	}
	/* splitmix64 of the seed: xorshift must not start from zero */
	uint64_t z = plan->seed + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	plan->rng = (z ^ (z >> 31)) | 1;
	return 0;
}

static double next_uniform(struct fault_plan *plan)
{
	while (atomic_flag_test_and_set(&plan->rng_lock))
		;
	uint64_t x = plan->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	plan->rng = x;
	atomic_flag_clear(&plan->rng_lock);
	return (double)(x >> 11) / (double)(1ULL << 53);
}

enum fault_action fault_plan_next(struct fault_plan *plan, enum sb_call kind)
{
	unsigned hold_ms;
	return fault_plan_next_held(plan, kind, &hold_ms);
}

enum fault_action fault_plan_next_held(struct fault_plan *plan, enum sb_call kind,
				       unsigned *hold_ms)
{
	enum fault_action hit = FAULT_NONE;
	*hold_ms = 0;
	for (size_t i = 0; i < plan->n; i++) {
		struct fault_rule *r = &plan->rules[i];
		/* any: the calls of a mounted sandbox, so neither the create
		 * nor the mount step uses up a rule's count */
		bool any_takes = r->kind == FAULT_KIND_ANY && (int)kind != FAULT_KIND_MOUNT &&
				 kind != SB_CALL_CREATE;
		if (r->kind != (int)kind && !any_takes)
			continue;
		uint64_t nth = atomic_fetch_add(&r->seen, 1) + 1;
		bool fire = false;
		switch (r->when) {
		case FAULT_NTH: fire = nth >= r->n && nth <= r->last; break;
		case FAULT_EVERY: fire = nth % r->n == 0; break;
		case FAULT_PROB: fire = next_uniform(plan) < r->p; break;
		}
		if (fire && hit == FAULT_NONE) {
			hit = r->action;
			*hold_ms = r->hold_ms;
		}
	}
	if (hit != FAULT_NONE)
		atomic_fetch_add(&plan->injected, 1);
	return hit;
}

bool fault_plan_fails_mount(struct fault_plan *plan)
{
	return plan && fault_plan_next(plan, (enum sb_call)FAULT_KIND_MOUNT) == FAULT_ERROR;
}

/* ---- the wrapper ---- */

bool fault_wrapping(const struct sb_backend *b)
{
	return b->faults || b->inject_latency_ms;
}

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

static void sleep_ms(unsigned ms)
{
	struct timespec d = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&d, &d) < 0 && errno == EINTR)
		;
}

int fault_call(struct sb_backend *b, enum sb_call kind,
	       int (*call)(struct sb_backend *b, void *arg), void *arg)
{
	/* One round trip to a remote sandbox, modelled on any backend. */
	if (b->inject_latency_ms)
		sleep_ms(b->inject_latency_ms);
	unsigned hold_ms = 0;
	enum fault_action a = b->faults ? fault_plan_next_held(b->faults, kind, &hold_ms)
					: FAULT_NONE;
	if (a != FAULT_NONE) {
		atomic_fetch_add(&b->counters.faults_injected, 1);
		sb_warn("inject_faults: %s fault on a %s call", fault_action_name(a),
			sb_call_name(kind));
	}
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
		break;
	case FAULT_SLOW:
		sleep_ms(hold_ms);
		break;
	case FAULT_LATE: /* after the call, below */
	case FAULT_DIE:
	case FAULT_NONE:
		break;
	}
	int rc = call(b, arg);
	/* The sandbox dies while the call is in flight: after the backend
	 * did its part, before the dispatcher takes the result. */
	if (a == FAULT_DIE)
		b->ops->destroy(b);
	if (a == FAULT_LATE)
		sleep_ms(hold_ms);
	return rc;
}

void fault_after_create(struct sb_backend *b)
{
	unsigned hold_ms = 0;
	if (!b->faults || fault_plan_next_held(b->faults, SB_CALL_CREATE, &hold_ms) != FAULT_LATE)
		return;
	atomic_fetch_add(&b->counters.faults_injected, 1);
	sb_warn("inject_faults: the create's answer held %u ms", hold_ms);
	sleep_ms(hold_ms);
}
