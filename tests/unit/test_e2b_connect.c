/* The e2b backend's wire layer: Connect envelopes read however the bytes
 * are split, refused when truncated or hostile; and the protojson shapes
 * of envd's messages (events, end-stream errors, EntryInfo) parsed
 * strictly. */
#include "backends/e2b/e2b.h"
#include "unit.h"

#include <errno.h>
#include <stdlib.h>

struct got {
	char msgs[8][256];
	size_t lens[8];
	unsigned flags[8];
	int n;
	int fail_at; /* return -ECANCELED at this message (0: never) */
};

static int on_msg(void *arg, unsigned flags, const char *p, size_t len)
{
	struct got *g = arg;
	if (g->n < 8 && len < 256) {
		memcpy(g->msgs[g->n], p, len);
		g->lens[g->n] = len;
		g->flags[g->n] = flags;
	}
	g->n++;
	if (g->fail_at && g->n == g->fail_at)
		return -ECANCELED;
	return 0;
}

static const char *const M1 = "{\"event\":{\"start\":{\"pid\":12}}}";
static const char *const M2 = "{\"event\":{\"data\":{\"stdout\":\"aGk=\"}}}";

static size_t build(char *buf)
{
	size_t n = 0, l;
	char *e = connect_envelope(M1, strlen(M1), &l);
	memcpy(buf + n, e, l);
	n += l;
	free(e);
	e = connect_envelope("", 0, &l); /* an empty message is a message */
	memcpy(buf + n, e, l);
	n += l;
	free(e);
	e = connect_envelope(M2, strlen(M2), &l);
	memcpy(buf + n, e, l);
	n += l;
	free(e);
	const char end[] = "{}";
	buf[n] = CONNECT_FLAG_END;
	buf[n + 1] = buf[n + 2] = buf[n + 3] = 0;
	buf[n + 4] = 2;
	memcpy(buf + n + 5, end, 2);
	return n + 7;
}

static void check_all(const struct got *g)
{
	CHECK_INT(g->n, 4);
	CHECK_MEM(g->msgs[0], g->lens[0], M1, strlen(M1));
	CHECK_INT(g->lens[1], 0);
	CHECK_MEM(g->msgs[2], g->lens[2], M2, strlen(M2));
	CHECK_INT(g->flags[3], CONNECT_FLAG_END);
	CHECK_MEM(g->msgs[3], g->lens[3], "{}", 2);
}

static void test_envelope(void)
{
	size_t l;
	char *e = connect_envelope("{}", 2, &l);
	CHECK_MEM(e, l, "\x00\x00\x00\x00\x02{}", 7);
	free(e);
}

static void test_splits(void)
{
	char s[512];
	size_t n = build(s);
	for (size_t i = 0; i <= n; i++) {
		for (size_t j = i; j <= n; j++) {
			struct got g = {0};
			struct connect_reader r = {0};
			CHECK_INT(connect_reader_feed(&r, s, i, on_msg, &g), 0);
			CHECK_INT(connect_reader_feed(&r, s + i, j - i, on_msg, &g), 0);
			CHECK_INT(connect_reader_feed(&r, s + j, n - j, on_msg, &g), 0);
			check_all(&g);
			CHECK(connect_reader_at_boundary(&r));
			CHECK(r.ended);
			connect_reader_free(&r);
		}
	}
	/* one byte at a time */
	struct got g = {0};
	struct connect_reader r = {0};
	for (size_t i = 0; i < n; i++)
		CHECK_INT(connect_reader_feed(&r, s + i, 1, on_msg, &g), 0);
	check_all(&g);
	connect_reader_free(&r);
}

static void test_truncated(void)
{
	char s[512];
	size_t n = build(s);
	size_t l1 = 5 + strlen(M1);
	/* a cut anywhere but a boundary is told from a clean stop */
	for (size_t i = 0; i < n; i++) {
		struct got g = {0};
		struct connect_reader r = {0};
		CHECK_INT(connect_reader_feed(&r, s, i, on_msg, &g), 0);
		bool boundary = i == 0 || i == l1 || i == l1 + 5 || i == n - 7;
		CHECK_INT(connect_reader_at_boundary(&r), boundary);
		CHECK(!r.ended);
		connect_reader_free(&r);
	}
}

static void test_hostile(void)
{
	struct got g = {0};
	struct connect_reader r = {0};
	/* compression never negotiated */
	CHECK_INT(connect_reader_feed(&r, "\x01\x00\x00\x00\x02{}", 7, on_msg, &g), -EPROTO);
	connect_reader_free(&r);
	/* an unknown flag bit */
	CHECK_INT(connect_reader_feed(&r, "\x80\x00\x00\x00\x02{}", 7, on_msg, &g), -EPROTO);
	connect_reader_free(&r);
	/* a 4 GiB length is refused before any allocation */
	CHECK_INT(connect_reader_feed(&r, "\x00\xff\xff\xff\xff", 5, on_msg, &g), -EPROTO);
	connect_reader_free(&r);
	CHECK_INT(connect_reader_feed(&r, "\x00\x01\x00\x00\x01", 5, on_msg, &g), -EPROTO);
	connect_reader_free(&r);
	/* nothing after the end-stream envelope */
	CHECK_INT(connect_reader_feed(&r, "\x02\x00\x00\x00\x02{}\x00", 8, on_msg, &g), -EPROTO);
	connect_reader_free(&r);
	CHECK_INT(g.n, 1);
	/* the callback's error stops the stream */
	struct got h = {.fail_at = 1};
	char s[512];
	size_t n = build(s);
	CHECK_INT(connect_reader_feed(&r, s, n, on_msg, &h), -ECANCELED);
	CHECK_INT(h.n, 1);
	connect_reader_free(&r);
}

static int ev(const char *json, struct e2b_event *e)
{
	return e2b_parse_event(json, strlen(json), e);
}

static void test_events(void)
{
	struct e2b_event e;
	CHECK_INT(ev("{\"event\":{\"start\":{\"pid\":1234}}}", &e), 0);
	CHECK_INT(e.kind, EV_START);
	CHECK_INT(e.pid, 1234);
	CHECK_INT(ev("{\"event\":{\"start\":{\"pid\":\"77\"}}}", &e), 0);
	CHECK_INT(e.pid, 77);
	/* binary output, NUL included */
	CHECK_INT(ev("{\"event\":{\"data\":{\"stdout\":\"AP8KYQ==\"}}}", &e), 0);
	CHECK_INT(e.kind, EV_STDOUT);
	CHECK_MEM(e.data, e.len, "\x00\xff\na", 4);
	e2b_event_free(&e);
	CHECK_INT(ev("{\"event\":{\"data\":{\"stderr\":\"\"}}}", &e), 0);
	CHECK_INT(e.kind, EV_STDERR);
	CHECK_INT(e.len, 0);
	e2b_event_free(&e);
	/* exit 0: protojson leaves exitCode out */
	CHECK_INT(ev("{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}", &e), 0);
	CHECK_INT(e.kind, EV_END);
	CHECK_INT(e.exit_code, 0);
	CHECK(e.exited);
	CHECK_INT(ev("{\"event\":{\"end\":{\"exitCode\":2,\"exited\":true,\"status\":\"exit status 2\",\"error\":\"exit status 2\"}}}", &e), 0);
	CHECK_INT(e.exit_code, 2);
	CHECK_INT(ev("{\"event\":{\"end\":{\"exitCode\":-1,\"status\":\"signal: killed\"}}}", &e), 0);
	CHECK(!e.exited);
	CHECK(!strcmp(e.status, "signal: killed"));
	CHECK_INT(ev("{\"event\":{\"keepalive\":{}}}", &e), 0);
	CHECK_INT(e.kind, EV_KEEPALIVE);
	CHECK_INT(ev("{\"event\":{\"somethingNew\":{}}}", &e), 0);
	CHECK_INT(e.kind, EV_NONE);
	/* malformed */
	CHECK_INT(ev("", &e), -EPROTO);
	CHECK_INT(ev("{\"event\":", &e), -EPROTO);
	CHECK_INT(ev("[]", &e), -EPROTO);
	CHECK_INT(ev("{\"event\":[]}", &e), -EPROTO);
	CHECK_INT(ev("{\"event\":{\"start\":{}}}", &e), -EPROTO);
	CHECK_INT(ev("{\"event\":{\"start\":{\"pid\":\"x1\"}}}", &e), -EPROTO);
	CHECK_INT(ev("{\"event\":{\"data\":{\"stdout\":\"!!!!\"}}}", &e), -EPROTO);
	CHECK_INT(ev("{\"event\":{\"data\":{\"stdout\":5}}}", &e), -EPROTO);
	CHECK_INT(ev("{\"event\":{\"end\":{\"exitCode\":\"abc\"}}}", &e), -EPROTO);
	CHECK_INT(ev("{\"event\":{\"end\":{\"exitCode\":99999999999}}}", &e), -EPROTO);
	CHECK_INT(ev("{\"event\":{\"end\":7}}", &e), -EPROTO);
	/* NUL inside the payload is not JSON's end */
	CHECK_INT(e2b_parse_event("{\"event\":{}}\0x", 14, &e), -EPROTO);
}

static void test_end_stream(void)
{
	char code[64], msg[128];
	CHECK_INT(e2b_parse_end_stream("{}", 2, code, sizeof(code), msg, sizeof(msg)), 0);
	CHECK(!code[0]);
	const char *j = "{\"error\":{\"code\":\"deadline_exceeded\",\"message\":\"context deadline exceeded\"},\"metadata\":{\"a\":[\"b\"]}}";
	CHECK_INT(e2b_parse_end_stream(j, strlen(j), code, sizeof(code), msg, sizeof(msg)), 0);
	CHECK(!strcmp(code, "deadline_exceeded"));
	CHECK(!strcmp(msg, "context deadline exceeded"));
	j = "{\"error\":{}}";
	CHECK_INT(e2b_parse_end_stream(j, strlen(j), code, sizeof(code), msg, sizeof(msg)), 0);
	CHECK(!strcmp(code, "unknown"));
	CHECK_INT(e2b_parse_end_stream("{", 1, code, sizeof(code), msg, sizeof(msg)), -EPROTO);
	CHECK_INT(e2b_parse_end_stream("", 0, code, sizeof(code), msg, sizeof(msg)), -EPROTO);
}

static void test_scalars(void)
{
	int64_t v = 0;
	json_t *j = json_string("1234");
	CHECK_INT(pj_int64(j, &v), 0);
	CHECK_INT(v, 1234);
	json_decref(j);
	j = json_integer(-5);
	CHECK_INT(pj_int64(j, &v), 0);
	CHECK_INT(v, -5);
	json_decref(j);
	const char *bad[] = {"", "12a", " 1", "99999999999999999999", "0x10", NULL};
	for (int i = 0; bad[i]; i++) {
		j = json_string(bad[i]);
		CHECK_INT(pj_int64(j, &v), -EPROTO);
		json_decref(j);
	}
	CHECK_INT(pj_int64(NULL, &v), -EPROTO);
	j = json_real(1.5);
	CHECK_INT(pj_int64(j, &v), -EPROTO);
	json_decref(j);

	struct timespec ts;
	CHECK_INT(pj_time("2026-01-02T03:04:05Z", &ts), 0);
	CHECK_INT(ts.tv_sec, 1767323045);
	CHECK_INT(ts.tv_nsec, 0);
	CHECK_INT(pj_time("2026-01-02T03:04:05.5Z", &ts), 0);
	CHECK_INT(ts.tv_nsec, 500000000);
	CHECK_INT(pj_time("2026-01-02T03:04:05.123456789Z", &ts), 0);
	CHECK_INT(ts.tv_nsec, 123456789);
	CHECK_INT(pj_time("2026-01-02T05:04:05+02:00", &ts), 0);
	CHECK_INT(ts.tv_sec, 1767323045);
	const char *badt[] = {"", "2026-13-01T00:00:00Z", "2026-01-02 03:04:05Z",
			      "2026-01-02T03:04:05", "2026-01-02T03:04:05Zjunk",
			      "2026-01-02T03:04:05.Z", "2026-1-02T03:04:05Z", NULL};
	for (int i = 0; badt[i]; i++)
		CHECK_INT(pj_time(badt[i], &ts), -EPROTO);

	mode_t m;
	CHECK_INT(pj_mode_string("-rw-r--r--", &m), 0);
	CHECK_INT(m, S_IFREG | 0644);
	CHECK_INT(pj_mode_string("drwxr-xr-x", &m), 0);
	CHECK_INT(m, S_IFDIR | 0755);
	CHECK_INT(pj_mode_string("Lrwxrwxrwx", &m), 0);
	CHECK_INT(m, S_IFLNK | 0777);
	CHECK_INT(pj_mode_string("dtrwxrwxrwx", &m), 0);
	CHECK_INT(m, S_IFDIR | S_ISVTX | 0777);
	CHECK_INT(pj_mode_string("urwxr-xr-x", &m), 0);
	CHECK_INT(m, S_IFREG | S_ISUID | 0755);
	CHECK_INT(pj_mode_string("Dcrw-rw-rw-", &m), 0);
	CHECK_INT(m, S_IFCHR | 0666);
	CHECK_INT(pj_mode_string("Drw-rw----", &m), 0);
	CHECK_INT(m, S_IFBLK | 0660);
	CHECK_INT(pj_mode_string("prw-r--r--", &m), 0);
	CHECK_INT(m, S_IFIFO | 0644);
	CHECK_INT(pj_mode_string("Srwxr-xr-x", &m), 0);
	CHECK_INT(m, S_IFSOCK | 0755);
	const char *badm[] = {"", "rw", "-rw-r--r-X", "Zrw-r--r--", "-wr-r--r--", NULL};
	for (int i = 0; badm[i]; i++)
		CHECK_INT(pj_mode_string(badm[i], &m), -EPROTO);
}

static char entry_name[256];

static int entry(const char *json, struct stat *st, const char **name)
{
	struct e2b_ids ids = {.user = "user", .uid = 1000, .gid = 1000};
	json_t *j = json_loads(json, 0, NULL);
	*name = NULL;
	int rc = e2b_parse_entry(j, &ids, st, name);
	/* the name is borrowed from the JSON: keep a copy past it */
	snprintf(entry_name, sizeof(entry_name), "%s", *name ? *name : "");
	*name = entry_name;
	json_decref(j);
	return rc;
}

static void test_entries(void)
{
	struct stat st;
	const char *name;
	CHECK_INT(entry("{\"name\":\"a.txt\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"/w/a.txt\","
			"\"size\":\"6\",\"mode\":420,\"permissions\":\"-rw-r--r--\",\"owner\":\"user\","
			"\"group\":\"user\",\"modifiedTime\":\"2026-01-02T03:04:05.25Z\"}", &st, &name), 0);
	CHECK_INT(st.st_mode, S_IFREG | 0644);
	CHECK_INT(st.st_size, 6);
	CHECK_INT(st.st_uid, 1000);
	CHECK_INT(st.st_nlink, 0); /* not told: the fs core keeps the count it knows */
	CHECK_INT(st.st_mtim.tv_sec, 1767323045);
	CHECK_INT(st.st_mtim.tv_nsec, 250000000);
	CHECK_INT(entry("{\"name\":\"d\",\"type\":\"FILE_TYPE_DIRECTORY\",\"size\":\"4096\","
			"\"mode\":493,\"permissions\":\"drwxr-xr-x\",\"owner\":\"root\",\"group\":\"42\"}",
			&st, &name), 0);
	CHECK_INT(st.st_mode, S_IFDIR | 0755);
	CHECK_INT(st.st_nlink, 0); /* not told: the fs core keeps its own */
	CHECK_INT(st.st_uid, 0);
	CHECK_INT(st.st_gid, 42);
	/* a symlink: type and mode are its target's; it is still a link */
	CHECK_INT(entry("{\"name\":\"l\",\"type\":\"FILE_TYPE_DIRECTORY\",\"size\":\"3\",\"mode\":493,"
			"\"permissions\":\"Lrwxrwxrwx\",\"symlinkTarget\":\"/w/d\",\"owner\":\"nobody-here\"}",
			&st, &name), 0);
	CHECK_INT(st.st_mode, S_IFLNK | 0777);
	CHECK_INT(st.st_size, 3);
	/* a name only the guest's passwd maps: untold (the fs core asks a
	 * stat); no group named: the user's, as its uploads make */
	CHECK_INT(st.st_uid, SB_ID_UNTOLD);
	CHECK_INT(st.st_gid, 1000);
	/* a dangling link: no type at all */
	CHECK_INT(entry("{\"name\":\"x\",\"size\":\"9\",\"symlinkTarget\":\"/w/x\"}", &st, &name), 0);
	CHECK_INT(st.st_mode, S_IFLNK | 0777);
	/* older envd: no permissions string */
	CHECK_INT(entry("{\"name\":\"f\",\"type\":\"FILE_TYPE_FILE\",\"mode\":384}", &st, &name), 0);
	CHECK_INT(st.st_mode, S_IFREG | 0600);
	CHECK(!strcmp(name, "f"));
	const char *bad[] = {
		"{}", "[]", "{\"name\":\"\"}", "{\"name\":\"a/b\"}", "{\"name\":5}",
		"{\"name\":\"a\",\"size\":\"-1\"}", "{\"name\":\"a\",\"size\":\"x\"}",
		"{\"name\":\"a\",\"size\":1.5}",
		"{\"name\":\"a\",\"modifiedTime\":\"yesterday\"}",
		"{\"name\":\"a\",\"permissions\":\"rwxrwxrwx!\"}", NULL,
	};
	for (int i = 0; bad[i]; i++)
		CHECK_INT(entry(bad[i], &st, &name), -EPROTO);
}

static void test_errors(void)
{
	CHECK_INT(e2b_connect_errno("not_found", "path '/x' does not exist"), -ENOENT);
	CHECK_INT(e2b_connect_errno("already_exists", ""), -EEXIST);
	CHECK_INT(e2b_connect_errno("invalid_argument", "path '/f' is not a directory"), -ENOTDIR);
	CHECK_INT(e2b_connect_errno("invalid_argument", "bad"), -EINVAL);
	CHECK_INT(e2b_connect_errno("internal", "rename /a /b: directory not empty"), -ENOTEMPTY);
	CHECK_INT(e2b_connect_errno("internal", "rename /a /b: invalid cross-device link"), -EXDEV);
	CHECK_INT(e2b_connect_errno("internal", "something else"), -EIO);
	CHECK_INT(e2b_connect_errno("permission_denied", ""), -EACCES);
	CHECK_INT(e2b_connect_errno("unavailable", ""), -ECONNRESET);
	CHECK_INT(e2b_connect_errno("failed_precondition", "symlink cycle"), -ELOOP);
	CHECK_INT(e2b_connect_errno("", ""), -EIO);
}

int main(void)
{
	test_envelope();
	test_splits();
	test_truncated();
	test_hostile();
	test_events();
	test_end_stream();
	test_scalars();
	test_entries();
	test_errors();
	return unit_done("e2b_connect");
}
