/* sb_ns_many against a real local (bubblewrap) sandbox, native and
 * through the shell fallback: order (files before their directory), the
 * per-entry errors, names a shell could misread, one counted call however
 * many entries, and batches past the shell's chunk size. */
#include "tests/unit/unit.h"
#include "backends/backend.h"
#include "tests/unit/local_sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int sh(struct sb_backend *b, const char *script)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	struct sb_exec_req req = {.argv = argv, .stdin_fd = -1, .cancel_fd = -1};
	struct sb_exec_result res;
	int rc = sb_exec(b, &req, &res);
	return rc < 0 ? rc : res.exit_code;
}

static bool exists(struct sb_backend *b, const char *path)
{
	struct stat st;
	return sb_stat(b, path, &st, NULL) == 0;
}

static void errors_and_order(struct sb_backend *b)
{
	CHECK_INT(sh(b, "cd /workspace && mkdir -p t/sub full && : > t/a && "
			"printf x > 't/-n' && printf x > 't/sp ace' && "
			"printf x > \"t/$(printf 'nl\\nx')\" && ln -s /etc t/link && "
			": > full/keep && : > plain"), 0);
	struct sb_ns_change v[] = {
		{.path = "/workspace/t/a"},
		{.path = "/workspace/t/-n"},
		{.path = "/workspace/t/sp ace"},
		{.path = "/workspace/t/nl\nx"},
		{.path = "/workspace/t/link"},          /* the link, not /etc */
		{.path = "/workspace/t/sub", .is_dir = true},
		{.path = "/workspace/t", .is_dir = true}, /* empty by now */
		{.path = "/workspace/missing"},
		{.path = "/workspace/full", .is_dir = true},
		{.path = "/workspace/plain", .is_dir = true},
		{.path = "/workspace/full"},
		{.path = "/workspace/plain/x"},
	};
	size_t n = sizeof v / sizeof v[0];
	uint64_t c0 = atomic_load(&b->counters.calls[SB_CALL_REMOVE]);
	int rc = sb_ns_many(b, v, n);
	CHECK_INT(atomic_load(&b->counters.calls[SB_CALL_REMOVE]) - c0, 1);
	for (size_t i = 0; i < 7; i++)
		CHECK_INT(v[i].rc, 0);
	CHECK_INT(v[7].rc, -ENOENT);
	CHECK_INT(v[8].rc, -ENOTEMPTY);
	CHECK_INT(v[9].rc, -ENOTDIR);
	CHECK_INT(v[10].rc, -EISDIR);
	CHECK_INT(v[11].rc, -ENOTDIR);
	CHECK_INT(rc, -ENOENT); /* the first error */
	CHECK(!exists(b, "/workspace/t"));
	CHECK(exists(b, "/workspace/full/keep"));
	CHECK(exists(b, "/workspace/plain"));
	CHECK_INT(sh(b, "[ -d /etc ] && [ -e /etc/passwd ]"), 0);
	CHECK_INT(sh(b, "rm -rf /workspace/full /workspace/plain"), 0);
}

/* More than one shell chunk (entries and bytes), still one counted call. */
static void many(struct sb_backend *b)
{
	enum { N = 3000 };
	CHECK_INT(sh(b, "cd /workspace && mkdir big && cd big && i=0; "
			"while [ $i -lt 3000 ]; do : > f_$i.with-a-rather-long-name-to-fill-the-chunk; "
			"i=$((i+1)); done"), 0);
	struct sb_ns_change *v = calloc(N + 1, sizeof *v);
	char **paths = calloc(N, sizeof *paths);
	for (int i = 0; i < N; i++) {
		if (asprintf(&paths[i], "/workspace/big/f_%d.with-a-rather-long-name-to-fill-the-chunk", i) < 0)
			paths[i] = NULL;
		v[i].path = paths[i];
	}
	v[N] = (struct sb_ns_change){.path = "/workspace/big", .is_dir = true};
	uint64_t c0 = atomic_load(&b->counters.calls[SB_CALL_REMOVE]);
	CHECK_INT(sb_ns_many(b, v, N + 1), 0);
	CHECK_INT(atomic_load(&b->counters.calls[SB_CALL_REMOVE]) - c0, 1);
	size_t bad = 0;
	for (int i = 0; i <= N; i++)
		bad += v[i].rc != 0;
	CHECK_INT(bad, 0);
	CHECK(!exists(b, "/workspace/big"));
	for (int i = 0; i < N; i++)
		free(paths[i]);
	free(paths);
	free(v);
}

int main(void)
{
	char root[] = "/tmp/sbfs-rm-many-test-XXXXXX";
	CHECK(mkdtemp(root) != NULL);
	for (int shell = 0; shell < 2; shell++) {
		struct sb_backend *b = local_sandbox(root, shell);
		CHECK(b != NULL);
		if (!b)
			continue;
		/* What is checked is the batching, not the speed: the
		 * production deadline (60 s) is no bound for 3,000 removes by
		 * the shell under the sanitizers on a loaded machine. */
		b->call_timeout_s = 600;
		uint64_t f0 = atomic_load(&b->counters.shell_fallbacks);
		errors_and_order(b);
		many(b);
		/* native: no shell; shell_only: every batch through it */
		if (shell)
			CHECK(atomic_load(&b->counters.shell_fallbacks) > f0);
		else
			CHECK_INT(atomic_load(&b->counters.shell_fallbacks), f0);
		CHECK_INT(sb_backend_destroy(b), 0);
	}
	rmdir(root);
	return unit_done("remove_many");
}
