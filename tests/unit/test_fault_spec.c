/* -o inject_faults=SPEC: the grammar, its error messages, and which calls
 * a plan fails. */
#include "backends/fault_inject.h"
#include "unit.h"

static struct fault_plan plan;
static char err[512];

static bool parses(const char *spec)
{
	err[0] = '\0';
	return fault_plan_parse(&plan, spec, err, sizeof err) == 0;
}

/* The actions of the first n attempts of kind, as a string of letters:
 * '.' none, 't' transient, 'e' error, 'T' terminal, 's' stall, 'k' kill,
 * 'l' late, 'd' die, 'w' slow. */
static void run(enum sb_call kind, int n, char *out)
{
	static const char letters[] = ".teTskldw";
	for (int i = 0; i < n; i++)
		out[i] = letters[fault_plan_next(&plan, kind)];
	out[n] = '\0';
}

static void test_nth_and_every(void)
{
	char got[16];
	CHECK(parses("transient:write:2"));
	run(SB_CALL_WRITE, 5, got);
	CHECK(!strcmp(got, ".t..."));
	run(SB_CALL_STAT, 3, got); /* other kinds are not counted */
	CHECK(!strcmp(got, "..."));

	CHECK(parses("error:write:2-4"));
	run(SB_CALL_WRITE, 6, got);
	CHECK(!strcmp(got, ".eee.."));

	CHECK(parses("error:stat:every3"));
	run(SB_CALL_STAT, 7, got);
	CHECK(!strcmp(got, "..e..e."));

	CHECK(parses("terminal:any:1"));
	run(SB_CALL_LIST, 2, got);
	CHECK(!strcmp(got, "T."));

	/* rules count independently; the first rule that fires wins */
	CHECK(parses("stall:read:1+kill:any:every2"));
	run(SB_CALL_READ, 4, got);
	CHECK(!strcmp(got, "sk.k"));
	CHECK_INT(atomic_load(&plan.injected), 3);

	CHECK(parses("die:write:2"));
	run(SB_CALL_WRITE, 3, got);
	CHECK(!strcmp(got, ".d."));

	CHECK(parses("late:list:every1"));
	run(SB_CALL_LIST, 3, got);
	CHECK(!strcmp(got, "lll"));

	/* lateMS: its own hold; a slow create is late on create */
	unsigned hold = 0;
	CHECK(parses("late6000:create:1+late:stat:1"));
	CHECK_INT(fault_plan_next_held(&plan, SB_CALL_CREATE, &hold), FAULT_LATE);
	CHECK_INT(hold, 6000);
	CHECK_INT(fault_plan_next_held(&plan, SB_CALL_CREATE, &hold), FAULT_NONE);
	CHECK_INT(hold, 0);
	CHECK_INT(fault_plan_next_held(&plan, SB_CALL_STAT, &hold), FAULT_LATE);
	CHECK_INT(hold, FAULT_LATE_MS);

	/* the create uses up no count of an any rule: its first call is
	 * still the mounted sandbox's first */
	CHECK(parses("error:any:1"));
	CHECK_INT(fault_plan_next_held(&plan, SB_CALL_CREATE, &hold), FAULT_NONE);
	run(SB_CALL_STAT, 2, got);
	CHECK(!strcmp(got, "e."));

	CHECK(parses("slow5000:exec:2+slow:stat:1"));
	run(SB_CALL_EXEC, 3, got);
	CHECK(!strcmp(got, ".w."));
	CHECK_INT(fault_plan_next_held(&plan, SB_CALL_STAT, &hold), FAULT_SLOW);
	CHECK_INT(hold, FAULT_LATE_MS);
}

static void test_probability_is_seeded(void)
{
	char a[65], b[65], c[65];
	CHECK(parses("seed:7+transient:any:p0.5"));
	run(SB_CALL_WRITE, 64, a);
	CHECK(parses("transient:any:p0.5+seed:7"));
	run(SB_CALL_WRITE, 64, b);
	CHECK(!strcmp(a, b));
	CHECK(parses("seed:8+transient:any:p0.5"));
	run(SB_CALL_WRITE, 64, c);
	CHECK(strcmp(a, c) != 0);
	size_t hits = 0;
	for (int i = 0; i < 64; i++)
		hits += a[i] == 't';
	CHECK(hits > 8 && hits < 56); /* roughly half of 64 */
	CHECK(parses("transient:any:p1"));
	run(SB_CALL_EXEC, 8, a);
	CHECK(!strcmp(a, "tttttttt"));
}

static void test_rejects(void)
{
	static const char *const bad[] = {
		"", "transient", "transient:write", "transient:write:",
		"transient:write:0", "transient:write:x", "explode:write:1",
		"transient:create:1", "transient:destroy:1", "transient:wrte:1",
		"stall:create:1", "late:destroy:1", "late0:stat:1", "latex:stat:1",
		"late600001:create:1", "slow:create:1", "slowx:exec:1",
		"transient:write:every", "transient:write:every0",
		"transient:write:p0", "transient:write:p1.5", "transient:write:pabc",
		"transient:write:1+", "+transient:write:1", "seed:x", "seed:5",
		"transient:write:1:extra", "transient:write:-1",
		"transient:write:3-2", "transient:write:1-", "transient:write:1-x",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		bool ok = parses(bad[i]);
		CHECK(!ok);
		if (ok)
			fprintf(stderr, "accepted bad SPEC '%s'\n", bad[i]);
		/* one line, naming the option */
		CHECK(strncmp(err, "inject_faults:", 14) == 0);
		CHECK(strchr(err, '\n') == NULL);
	}
	CHECK(parses("transient:write:1"));
	CHECK(parses("kill:exec:3+seed:0+error:mkdir:every2+stall:any:p0.25"));
	CHECK_INT(plan.n, 3);
	CHECK_INT(plan.rules[2].kind, FAULT_KIND_ANY);
}

/* The mount step: error only, and no rule on calls counts or fails it. */
static void test_mount_step(void)
{
	CHECK(parses("error:mount:2"));
	CHECK(!fault_plan_fails_mount(&plan));
	CHECK(fault_plan_fails_mount(&plan));
	CHECK(!fault_plan_fails_mount(&plan));
	CHECK(parses("error:any:every1"));
	CHECK(!fault_plan_fails_mount(&plan));
	CHECK(!fault_plan_fails_mount(NULL));
	CHECK(!parses("stall:mount:1"));
	CHECK(strstr(err, "the mount step takes only error") != NULL);
}

int main(void)
{
	test_nth_and_every();
	test_probability_is_seeded();
	test_rejects();
	test_mount_step();
	return unit_done("fault_spec");
}
