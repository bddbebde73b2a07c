/* The sbx backend's parsers and rules, without a CLI: `sbx ls --json` in
 * every shape a tolerant client meets, the stderr marks that tell the
 * guest command's stderr from the CLI's (fed in every split), the
 * reading of the CLI's errors, the network-policy rule, and the env
 * file. */
#include "backends/sbx/sbx.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- sbx ls --json ---- */

static void test_ls_shapes(void)
{
	struct sbx_listed *v;
	size_t n;
	const char *seen = "{\"sandboxes\":[{\"name\":\"sbfs-aa\",\"status\":\"running\","
			   "\"workspaces\":[\"/tmp/sbfs-sbx-ws-1\"]},{\"name\":\"other\",\"status\":\"stopped\"}]}";
	CHECK_INT(sbx_ls_parse(seen, strlen(seen), &v, &n), 0);
	CHECK_INT(n, 2);
	CHECK(!strcmp(v[0].name, "sbfs-aa"));
	CHECK(!strcmp(v[0].status, "running"));
	CHECK(!strcmp(v[0].workspace, "/tmp/sbfs-sbx-ws-1"));
	CHECK(!strcmp(v[1].status, "stopped"));
	CHECK(!strcmp(v[1].workspace, ""));
	free(v);

	const char *bare = "[{\"id\":\"x1\",\"state\":\"running\"}]";
	CHECK_INT(sbx_ls_parse(bare, strlen(bare), &v, &n), 0);
	CHECK_INT(n, 1);
	CHECK(!strcmp(v[0].name, "x1"));
	CHECK(!strcmp(v[0].status, "running"));
	free(v);

	static const char *const wrappers[] = {"items", "data", "results"};
	for (size_t i = 0; i < 3; i++) {
		char j[200];
		snprintf(j, sizeof(j), "{\"%s\":[{\"name\":\"w\",\"extra\":{\"a\":[1,2]}},{\"status\":\"running\"}]}",
			 wrappers[i]);
		CHECK_INT(sbx_ls_parse(j, strlen(j), &v, &n), 0);
		CHECK_INT(n, 1); /* an entry without a name is skipped */
		CHECK(n == 1 && !strcmp(v[0].name, "w"));
		free(v);
	}

	const char *none = "{\"sandboxes\":null}";
	CHECK_INT(sbx_ls_parse(none, strlen(none), &v, &n), 0);
	CHECK_INT(n, 0);
	free(v);
	const char *empty = "{\"sandboxes\":[]}";
	CHECK_INT(sbx_ls_parse(empty, strlen(empty), &v, &n), 0);
	CHECK_INT(n, 0);
	free(v);
	const char *names = "[\"a\",\"b\"]";
	CHECK_INT(sbx_ls_parse(names, strlen(names), &v, &n), 0);
	CHECK_INT(n, 2);
	free(v);
}

static void test_ls_refuses(void)
{
	struct sbx_listed *v;
	size_t n;
	/* "could not read" must never look like "nothing there" */
	static const char *const bad[] = {
		"", "<html>not json</html>", "{\"sandbox\":[]}", "{\"sandboxes\":{}}",
		"42", "\"sandboxes\"", "{\"sandboxes\":[", "Starting sandboxd daemon...\n{}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = sbx_ls_parse(bad[i], strlen(bad[i]), &v, &n);
		CHECK(rc < 0);
		CHECK_INT(n, 0);
		if (rc == 0)
			free(v);
	}
	/* a name longer than any sbx takes is skipped, not cut */
	char big[600];
	memset(big, 'a', sizeof(big));
	char j[800];
	snprintf(j, sizeof(j), "[{\"name\":\"%.*s\"},{\"name\":\"ok\"}]", 500, big);
	CHECK_INT(sbx_ls_parse(j, strlen(j), &v, &n), 0);
	CHECK(n == 1 && !strcmp(v[0].name, "ok"));
	free(v);
}

/* ---- the stderr marks ---- */

struct sink {
	char buf[4096];
	size_t len;
};

static int collect(void *arg, const char *d, size_t n)
{
	struct sink *s = arg;
	if (s->len + n <= sizeof(s->buf)) {
		memcpy(s->buf + s->len, d, n);
		s->len += n;
	}
	return 0;
}

static int refuse(void *arg, const char *d, size_t n)
{
	(void)arg;
	(void)d;
	(void)n;
	return -EPIPE;
}

#define NONCE "0123456789abcdef"

/* Feeds text in pieces of every size from 1 up: the result must not
 * depend on where the pipe cut it. */
static void feed_in_pieces(const char *text, size_t len, size_t piece,
			   struct sbx_marker *m, struct sink *s)
{
	sbx_marker_init(m, NONCE);
	memset(s, 0, sizeof(*s));
	for (size_t off = 0; off < len; off += piece) {
		size_t k = len - off < piece ? len - off : piece;
		CHECK_INT(sbx_marker_feed(m, text + off, k, collect, s), 0);
	}
	CHECK_INT(sbx_marker_finish(m, collect, s), 0);
}

static void test_marker_splits(void)
{
	static const char text[] =
		"Starting sandboxd daemon...\n"
		"\036" NONCE " S\n"
		"err one\npartial \036 not a mark \036" "fedcba9876543210 E 1\nlast"
		"\036" NONCE " E 42\n"
		"Error: trailing words of the CLI\n";
	static const char want_cmd[] =
		"err one\npartial \036 not a mark \036" "fedcba9876543210 E 1\nlast";
	for (size_t piece = 1; piece <= sizeof(text); piece++) {
		struct sbx_marker m;
		struct sink s;
		feed_in_pieces(text, sizeof(text) - 1, piece, &m, &s);
		CHECK_MEM(s.buf, s.len, want_cmd, sizeof(want_cmd) - 1);
		CHECK_INT(m.phase, MK_AFTER);
		CHECK_INT(m.status, 42);
		CHECK(m.cli && strstr(m.cli, "Starting sandboxd daemon...") == m.cli);
		CHECK(m.cli && strstr(m.cli, "trailing words"));
		sbx_marker_free(&m);
	}
}

/* Under -t the marks come on the terminal: "\r\n" ended, between the
 * command's own "\r\n" lines, in pieces of every size. */
static void test_marker_on_a_terminal(void)
{
	static const char text[] =
		"\036" NONCE " S\r\n"
		"out-piped\r\nerr\r\n\036" NONCE " E 7x\r\nno newline"
		"\036" NONCE " E 130\r\n";
	static const char want_cmd[] =
		"out-piped\r\nerr\r\n\036" NONCE " E 7x\r\nno newline";
	for (size_t piece = 1; piece <= sizeof(text); piece++) {
		struct sbx_marker m;
		struct sink s;
		feed_in_pieces(text, sizeof(text) - 1, piece, &m, &s);
		CHECK_MEM(s.buf, s.len, want_cmd, sizeof(want_cmd) - 1);
		CHECK_INT(m.phase, MK_AFTER);
		CHECK_INT(m.status, 130);
		sbx_marker_free(&m);
	}
	/* a "\r" alone does not end a mark */
	struct sbx_marker m;
	struct sink s;
	const char *cr = "\036" NONCE " S\r\036" NONCE " S\n";
	feed_in_pieces(cr, strlen(cr), 1, &m, &s);
	CHECK_INT(m.phase, MK_RUNNING);
	CHECK_INT(s.len, 0);
	sbx_marker_free(&m);
}

static void test_marker_cases(void)
{
	struct sbx_marker m;
	struct sink s;
	/* the CLI failed before the command: all of it is the CLI's */
	const char *failed = "Starting sandboxd daemon...\nError: sandbox \"x\" not found\n";
	feed_in_pieces(failed, strlen(failed), 7, &m, &s);
	CHECK_INT(m.phase, MK_BEFORE);
	CHECK_INT(s.len, 0);
	CHECK(m.cli && strstr(m.cli, "not found"));
	sbx_marker_free(&m);

	/* started, cut before its end: what the command wrote got through,
	 * and a dangling start of a mark is passed on at the end */
	const char *cut = "\036" NONCE " S\nhalf a line\036" NONCE;
	feed_in_pieces(cut, strlen(cut), 3, &m, &s);
	CHECK_INT(m.phase, MK_RUNNING);
	CHECK_MEM(s.buf, s.len, "half a line\036" NONCE, strlen("half a line\036" NONCE));
	sbx_marker_free(&m);

	/* a prompt on stderr is not held back */
	sbx_marker_init(&m, NONCE);
	memset(&s, 0, sizeof(s));
	const char *start = "\036" NONCE " S\n";
	CHECK_INT(sbx_marker_feed(&m, start, strlen(start), collect, &s), 0);
	CHECK_INT(sbx_marker_feed(&m, "Password: ", 10, collect, &s), 0);
	CHECK_MEM(s.buf, s.len, "Password: ", 10);
	sbx_marker_free(&m);

	/* an end mark with a bad status, or another exec's nonce, is the
	 * command's text */
	const char *forged = "\036" NONCE " S\n\036" NONCE " E x\n\036" NONCE " E 3\n";
	feed_in_pieces(forged, strlen(forged), 1, &m, &s);
	CHECK_INT(m.status, 3);
	CHECK_MEM(s.buf, s.len, "\036" NONCE " E x\n", strlen("\036" NONCE " E x\n"));
	sbx_marker_free(&m);

	/* another exec's marks, nonces differing in the last digit only */
	const char *other = "\036" NONCE " S\n\036" "0123456789abcdee E 9\n\036" "0123456789abcdee S\n";
	feed_in_pieces(other, strlen(other), 2, &m, &s);
	CHECK_INT(m.phase, MK_RUNNING);
	CHECK_INT(m.status, -1);
	CHECK_MEM(s.buf, s.len, other + strlen(NONCE) + 4, strlen(other) - strlen(NONCE) - 4);
	sbx_marker_free(&m);

	/* a callback's abort comes back */
	sbx_marker_init(&m, NONCE);
	CHECK_INT(sbx_marker_feed(&m, start, strlen(start), refuse, NULL), 0);
	CHECK_INT(sbx_marker_feed(&m, "x", 1, refuse, NULL), -EPIPE);
	sbx_marker_free(&m);
}

/* ---- the CLI's errors ---- */

static void test_errors(void)
{
	char line[300];
	sbx_stderr_line("Starting sandboxd daemon...\nError: boom\n  second\tline\n", line, sizeof(line));
	CHECK(!strcmp(line, "Error: boom; second line"));
	sbx_stderr_line("Starting sandboxd daemon...\n", line, sizeof(line));
	CHECK(!strcmp(line, "no message"));
	sbx_stderr_line(NULL, line, sizeof(line));
	CHECK(!strcmp(line, "no message"));

	CHECK_INT(sbx_classify("Error: not logged in: run 'sbx login'"), SBX_FAIL_SIGNED_OUT);
	CHECK_INT(sbx_classify("401 Unauthorized"), SBX_FAIL_SIGNED_OUT);
	CHECK_INT(sbx_classify("open /dev/kvm: no such file (KVM required)"), SBX_FAIL_NO_HYPERVISOR);
	CHECK_INT(sbx_classify("hypervisor framework unavailable"), SBX_FAIL_NO_HYPERVISOR);
	CHECK_INT(sbx_classify("context deadline exceeded"), SBX_FAIL_TRANSIENT);
	CHECK_INT(sbx_classify("request timed out"), SBX_FAIL_TRANSIENT);
	CHECK_INT(sbx_classify("Error: sandbox \"a\" not found"), SBX_FAIL_NOT_FOUND);
	CHECK_INT(sbx_classify("Error: sandbox \"a\" already exists"), SBX_FAIL_EXISTS);
	CHECK_INT(sbx_classify("run 'sbx policy init' before creating"), SBX_FAIL_NO_POLICY);
	CHECK_INT(sbx_classify("Starting sandboxd daemon...\nsomething else"), SBX_FAIL_OTHER);
	/* the daemon notice alone is no error of any kind */
	CHECK_INT(sbx_classify("Starting sandboxd daemon...\n"), SBX_FAIL_OTHER);

	char msg[SB_REASON_MAX];
	sbx_describe(msg, sizeof(msg), "create", "Error: not logged in\n", 1);
	CHECK(strstr(msg, "sbx login") != NULL);
	CHECK(!strchr(msg, '\n'));
	sbx_describe(msg, sizeof(msg), "create", "no /dev/kvm", 1);
	CHECK(strstr(msg, "KVM") != NULL);
	sbx_describe(msg, sizeof(msg), "rm", "Error: weird\n", 3);
	CHECK(strstr(msg, "exit 3") && strstr(msg, "Error: weird"));
}

/* ---- the network rule ---- */

static int plan(bool block, const char *allow, enum sbx_host_policy p,
		struct sbx_network *out, char *err)
{
	struct sb_spec s;
	memset(&s, 0, sizeof(s));
	s.block_network = block;
	char *hosts[4] = {NULL};
	char a[200] = "";
	if (allow) {
		snprintf(a, sizeof(a), "%s", allow);
		size_t k = 0;
		for (char *h = strtok(a, ":"); h && k < 3; h = strtok(NULL, ":"))
			hosts[k++] = h;
		s.allow_egress_to = hosts;
	}
	return sbx_network_plan(&s, p, out, err, 512);
}

static void test_network_rule(void)
{
	struct sbx_network n;
	char err[512];
	/* block_network (the default): deny-all only */
	CHECK_INT(plan(true, NULL, SBX_POLICY_DENY_ALL, &n, err), 0);
	CHECK(!strcmp(n.allow, ""));
	err[0] = '\0';
	CHECK_INT(plan(true, NULL, SBX_POLICY_UNKNOWN, &n, err), -EINVAL);
	CHECK(strstr(err, "host_network_policy=deny-all") && strstr(err, "-o network"));
	CHECK_INT(plan(true, NULL, SBX_POLICY_ALLOW_ALL, &n, err), -EINVAL);
	CHECK(strstr(err, "allow-all") != NULL);
	/* an allowlist narrows deny-all, as one comma-separated rule */
	CHECK_INT(plan(true, "api.example.com:*.cdn.example.com", SBX_POLICY_DENY_ALL, &n, err), 0);
	CHECK(!strcmp(n.allow, "api.example.com,*.cdn.example.com"));
	CHECK_INT(plan(true, "api.example.com", SBX_POLICY_UNKNOWN, &n, err), -EINVAL);
	CHECK(strstr(err, "narrows") != NULL);
	CHECK_INT(plan(true, "api.example.com", SBX_POLICY_ALLOW_ALL, &n, err), -EINVAL);
	CHECK_INT(plan(true, "a,b.com", SBX_POLICY_DENY_ALL, &n, err), -EINVAL);
	CHECK_INT(plan(false, "api.example.com", SBX_POLICY_DENY_ALL, &n, err), -EINVAL);
	CHECK(strstr(err, "contradictory") != NULL);
	/* -o network: open egress accepted; opened under deny-all */
	CHECK_INT(plan(false, NULL, SBX_POLICY_UNKNOWN, &n, err), 0);
	CHECK(!strcmp(n.allow, ""));
	CHECK_INT(plan(false, NULL, SBX_POLICY_ALLOW_ALL, &n, err), 0);
	CHECK(!strcmp(n.allow, ""));
	CHECK_INT(plan(false, NULL, SBX_POLICY_DENY_ALL, &n, err), 0);
	CHECK(!strcmp(n.allow, "**"));

	enum sbx_host_policy p;
	CHECK_INT(sbx_policy_parse(NULL, &p), 0);
	CHECK_INT(p, SBX_POLICY_UNKNOWN);
	CHECK_INT(sbx_policy_parse("deny-all", &p), 0);
	CHECK_INT(p, SBX_POLICY_DENY_ALL);
	CHECK_INT(sbx_policy_parse("allow-all", &p), 0);
	CHECK_INT(p, SBX_POLICY_ALLOW_ALL);
	CHECK_INT(sbx_policy_parse("balanced", &p), -1);
	CHECK_INT(sbx_policy_parse("", &p), -1);
}

/* ---- the env file ---- */

static void test_envfile(void)
{
	CHECK(sbx_env_entry_ok("A=1"));
	CHECK(sbx_env_entry_ok("_x9=a b=c '\"$(x)`y`"));
	CHECK(sbx_env_entry_ok("E="));
	CHECK(!sbx_env_entry_ok("=x"));
	CHECK(!sbx_env_entry_ok("9A=x"));
	CHECK(!sbx_env_entry_ok("A-B=x"));
	CHECK(!sbx_env_entry_ok("NOEQUALS"));
	CHECK(!sbx_env_entry_ok("A=two\nlines"));
	CHECK(!sbx_env_entry_ok("A=cr\r"));
	CHECK(!sbx_env_entry_ok(NULL));

	char dir[] = "/tmp/sbfs-test-sbx-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[200];
	snprintf(path, sizeof(path), "%s/env", dir);
	const char *a[] = {"SBFS=1", NULL};
	const char *b[] = {"SECRET=s p a c e s=and equals", NULL};
	const char *c[] = {"LC_ALL=C", NULL};
	CHECK_INT(sbx_envfile_write(path, a, b, c), 0);
	struct stat st;
	CHECK_INT(stat(path, &st), 0);
	CHECK_INT(st.st_mode & 0777, 0600);
	char got[200] = "";
	int fd = open(path, O_RDONLY);
	ssize_t n = read(fd, got, sizeof(got) - 1);
	close(fd);
	static const char want[] = "SBFS=1\nSECRET=s p a c e s=and equals\nLC_ALL=C\n";
	CHECK_MEM(got, n, want, sizeof(want) - 1);
	/* never over an existing file (nor through a link) */
	CHECK_INT(sbx_envfile_write(path, a, NULL, NULL), -EEXIST);
	unlink(path);
	/* a refused entry writes nothing */
	const char *bad[] = {"OK=1", "BAD=x\ny", NULL};
	CHECK_INT(sbx_envfile_write(path, bad, NULL, NULL), -EINVAL);
	CHECK(access(path, F_OK) != 0);
	rmdir(dir);
}

int main(void)
{
	test_ls_shapes();
	test_ls_refuses();
	test_marker_splits();
	test_marker_cases();
	test_marker_on_a_terminal();
	test_errors();
	test_network_rule();
	test_envfile();
	printf("%d checks, %d failures\n", unit_checks, unit_failures);
	return unit_failures ? 1 : 0;
}
