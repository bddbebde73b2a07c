/* The watcher that runs inside a sandbox (guest/sbfs_guest_watch.c), run
 * here on a real directory and kernel, its output read with the parser the
 * mount uses (gw_parse_record): names made, written, removed and moved,
 * in directories made and moved after it started, hostile names, settle
 * answers ordered after the events before them, its own file removed, and
 * the records it must refuse. argv[1]: the built watcher. */
#include "backends/guest_watch.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct watcher {
	pid_t pid;
	int in, out;
	char buf[1 << 16];
	size_t n;
};

static char root[256];

static void sh(const char *script)
{
	pid_t p = fork();
	if (p == 0) {
		if (chdir(root) < 0)
			_exit(127);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int start(struct watcher *w, const char *helper)
{
	int in[2], out[2];
	if (pipe(in) < 0 || pipe(out) < 0)
		return -1;
	w->n = 0;
	w->pid = fork();
	if (w->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(helper, helper, root, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	w->in = in[1];
	w->out = out[0];
	return 0;
}

/* The next record (its kind, and its text copied to text), waiting at
 * most 5 s; -1 when none came. */
static int next(struct watcher *w, struct gw_record *r, char *text, size_t len)
{
	for (;;) {
		char *nul = memchr(w->buf, '\0', w->n);
		if (nul) {
			size_t l = (size_t)(nul - w->buf);
			int rc = gw_parse_record(w->buf, l, r);
			snprintf(text, len, "%s", rc == 0 && r->text ? r->text : "");
			memmove(w->buf, nul + 1, w->n - l - 1);
			w->n -= l + 1;
			return rc == 0 ? (int)r->kind : -1;
		}
		struct pollfd f = {.fd = w->out, .events = POLLIN};
		if (poll(&f, 1, 5000) <= 0)
			return -1;
		ssize_t got = read(w->out, w->buf + w->n, sizeof w->buf - w->n);
		if (got <= 0)
			return -1;
		w->n += (size_t)got;
	}
}

/* Reads records until one of kind about path (NULL: any text) comes;
 * false if the watcher stopped or said nothing for 5 s. */
static bool expect(struct watcher *w, int kind, const char *path, struct gw_record *r)
{
	char text[4096];
	int k;
	while ((k = next(w, r, text, sizeof text)) >= 0)
		if (k == kind && (!path || strcmp(text, path) == 0))
			return true;
	fprintf(stderr, "expected record %d for '%s'\n", kind, path ? path : "");
	return false;
}

/* Asks for a settle and returns whether every path in want (NULL-ended)
 * was reported before its answer. */
static bool settled_after(struct watcher *w, unsigned long long token,
			  const char *const *want)
{
	char line[32];
	int n = snprintf(line, sizeof line, "%llu\n", token);
	if (write(w->in, line, (size_t)n) != n)
		return false;
	bool seen[8] = {0};
	struct gw_record r;
	char text[4096];
	int k;
	while ((k = next(w, &r, text, sizeof text)) >= 0) {
		if (k == GW_SETTLED && r.token == token)
			break;
		for (int i = 0; want[i]; i++)
			if ((k == GW_CHANGED || k == GW_GONE) && !strcmp(text, want[i]))
				seen[i] = true;
	}
	if (k < 0)
		return false;
	for (int i = 0; want[i]; i++)
		if (!seen[i]) {
			fprintf(stderr, "%s was not reported before settle %llu\n", want[i], token);
			return false;
		}
	return true;
}

static void test_parse(void)
{
	struct gw_record r;
	const char *e = "E 100644 5 1700000000 5 1700000001 6 42 2 1000 1000 64 a b/c";
	CHECK_INT(gw_parse_record(e, strlen(e), &r), 0);
	CHECK_INT(r.kind, GW_CHANGED);
	CHECK(S_ISREG(r.st.st_mode) && (r.st.st_mode & 07777) == 0644);
	CHECK_INT(r.st.st_size, 5);
	CHECK_INT(r.st.st_mtim.tv_sec, 1700000000);
	CHECK_INT(r.st.st_mtim.tv_nsec, 5);
	CHECK_INT(r.st.st_ino, 42);
	CHECK_INT(r.st.st_nlink, 2);
	CHECK_INT(r.st.st_uid, 1000);
	CHECK(!strcmp(r.text, "a b/c"));
	const char *root_dir = "E 40755 4096 1 0 1 0 2 3 0 0 64 ";
	CHECK_INT(gw_parse_record(root_dir, strlen(root_dir), &r), 0);
	CHECK(!strcmp(r.text, "") && S_ISDIR(r.st.st_mode));
	CHECK_INT(gw_parse_record("S 17", 4, &r), 0);
	CHECK_INT(r.kind, GW_SETTLED);
	CHECK_INT(r.token, 17);
	CHECK_INT(gw_parse_record("G x/y", 5, &r), 0);
	CHECK(r.kind == GW_GONE && !strcmp(r.text, "x/y"));
	CHECK_INT(gw_parse_record("R", 1, &r), 0);
	CHECK_INT(gw_parse_record("O", 1, &r), 0);
	CHECK_INT(r.kind, GW_OVERFLOW);
	CHECK_INT(gw_parse_record("X why", 5, &r), 0);
	CHECK(r.kind == GW_FATAL && !strcmp(r.text, "why"));
	const char *bad[] = {"", "Q", "R extra", "S", "S 1x", "S -", "G", "E 100644 5",
			     "E 100644 5 1 2000000000 1 0 2 1 0 0 64 f", /* ns too big */
			     "E 9z 5 1 0 1 0 2 1 0 0 64 f", "Ox",
			     /* strtoull would take a sign or blanks */
			     "S -1", "S  1", "S +1", "E 100644 -5 1 0 1 0 2 1 0 0 64 f",
			     "E 100644  5 1 0 1 0 2 1 0 0 64 f", NULL};
	for (int i = 0; bad[i]; i++) {
		int rc = gw_parse_record(bad[i], strlen(bad[i]), &r);
		if (rc != -EPROTO)
			fprintf(stderr, "accepted '%s'\n", bad[i]);
		CHECK_INT(rc, -EPROTO);
	}
	CHECK_INT(gw_parse_record("G a\0b", 5, &r), -EPROTO); /* a NUL inside */
}

static void test_watcher(const char *built)
{
	snprintf(root, sizeof root, "/tmp/sbfs-test-guest-watch-%d", (int)getpid());
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s/a/b", root, root);
	CHECK(system(cmd) == 0);
	/* the watcher removes its own file: run a copy */
	char helper[300];
	snprintf(helper, sizeof helper, "%s.bin", root);
	snprintf(cmd, sizeof cmd, "cp %s %s", built, helper);
	CHECK(system(cmd) == 0);
	struct watcher w;
	struct gw_record r;
	CHECK_INT(start(&w, helper), 0);
	CHECK(expect(&w, GW_READY, NULL, &r));
	CHECK(access(helper, F_OK) < 0 && errno == ENOENT);

	sh("printf hello >a/b/f");
	CHECK(expect(&w, GW_CHANGED, "a/b/f", &r));
	CHECK(S_ISREG(r.st.st_mode));
	/* Each script's changes, made before the question, are all out
	 * before its answer. */
	static const struct {
		const char *script;
		const char *want[4];
	} steps[] = {
		{"printf 12345 >a/b/g && rm a/b/f && mkdir -p n/deep", {"a/b/g", "a/b/f", "n"}},
		/* a directory made after the start is watched, deep ones too */
		{"printf x >n/deep/x", {"n/deep/x"}},
		/* moved: its events name where it went */
		{"mv a moved && printf y >moved/b/y", {"a", "moved", "moved/b/y"}},
		/* a hostile name comes back byte for byte */
		{"printf z >\"$(printf 'sp ace\\nnl -x')\"", {"sp ace\nnl -x"}},
	};
	for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
		sh(steps[i].script);
		CHECK(settled_after(&w, i + 1, steps[i].want));
	}
	/* gone: G; the size of a change as lstat tells it now */
	sh("rm moved/b/y && printf abc >moved/b/g2");
	CHECK(expect(&w, GW_GONE, "moved/b/y", &r));
	/* reported when made (size 0) and when written: the last says 3 */
	bool three = false;
	while (!three && expect(&w, GW_CHANGED, "moved/b/g2", &r))
		three = r.st.st_size == 3;
	CHECK(three);
	/* stdin's end ends it */
	close(w.in);
	int st;
	CHECK_INT(waitpid(w.pid, &st, 0), w.pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(w.out);
	snprintf(cmd, sizeof cmd, "rm -rf %s", root);
	CHECK(system(cmd) == 0);
}

int main(int argc, char **argv)
{
	test_parse();
	if (argc > 1)
		test_watcher(argv[1]);
	else
		CHECK(!"no watcher given (argv[1])");
	return unit_done("guest_watch");
}
