/* Listings from a hostile sandbox: names with '/', ".", "..", empty or
 * overlong are never passed on; link targets and entry counts beyond the
 * caps are refused (EFBIG/EPROTO), never held. Both listing parsers: the
 * shell one (every backend's fallback, docker's only one) and Modal's
 * file-helper JSON. */
#include "tests/unit/unit.h"
#include "backends/modal/modal.h"
#include "backends/sandbox_limits.h"
#include "backends/shell_ops.h"

#include <errno.h>
#include <stdlib.h>

#define STAT_REG "81a4 1 1 2 3 1 9 0 0\n"
#define STAT_LNK "a1ff 1 1 2 3 1 9 0 0\n"

/* A growable byte buffer for building parser input. */
struct buf {
	char *p;
	size_t n, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

/* One-entry shell listing of name (len bytes) as a regular file. */
static int shell_one(const char *name, size_t len)
{
	struct buf b = {0};
	puts_(&b, "1\n");
	put(&b, name, len);
	put(&b, "", 1);
	puts_(&b, STAT_REG);
	struct sb_dirlist l = {0};
	int rc = shell_parse_list(b.p, b.n, &l);
	if (rc == 0 && l.n != 1)
		rc = -1000;
	sb_dirlist_free(&l);
	free(b.p);
	return rc;
}

static void test_shell_names(void)
{
	CHECK_INT(shell_one("ok", 2), 0);
	CHECK_INT(shell_one("a/b", 3), -EPROTO);
	CHECK_INT(shell_one("/", 1), -EPROTO);
	CHECK_INT(shell_one(".", 1), -EPROTO);
	CHECK_INT(shell_one("..", 2), -EPROTO);
	CHECK_INT(shell_one("", 0), -EPROTO);
	CHECK_INT(shell_one("...", 3), 0);
	char big[300];
	memset(big, 'n', sizeof big);
	CHECK_INT(shell_one(big, SB_LIMIT_NAME), 0);
	CHECK_INT(shell_one(big, SB_LIMIT_NAME + 1), -EPROTO);
	/* a NUL inside a name ends it; the rest then fails to parse */
	CHECK_INT(shell_one("a\0b", 3), -EPROTO);
}

static int shell_link(size_t target_len)
{
	struct buf b = {0};
	puts_(&b, "1\nl");
	put(&b, "", 1);
	puts_(&b, STAT_LNK);
	char *t = malloc(target_len);
	memset(t, 't', target_len);
	put(&b, t, target_len);
	put(&b, "", 1);
	free(t);
	struct sb_dirlist l = {0};
	int rc = shell_parse_list(b.p, b.n, &l);
	if (rc == 0 && (l.n != 1 || !l.v[0].link_target ||
			strlen(l.v[0].link_target) != target_len))
		rc = -1000;
	sb_dirlist_free(&l);
	free(b.p);
	return rc;
}

static void test_shell_caps(void)
{
	CHECK_INT(shell_link(SB_LIMIT_LINK_TARGET), 0);
	CHECK_INT(shell_link(SB_LIMIT_LINK_TARGET + 1), -EPROTO);
	CHECK_INT(shell_link(1 << 20), -EPROTO);

	/* an entry count past the cap is refused from the header alone,
	 * before anything is allocated for it */
	struct sb_dirlist l = {0};
	char hdr[64];
	int n = snprintf(hdr, sizeof hdr, "%zu\n", SB_LIMIT_LIST_ENTRIES + 1);
	size_t len = (size_t)n + SB_LIMIT_LIST_ENTRIES + 64;
	char *big = calloc(1, len);
	memcpy(big, hdr, (size_t)n);
	CHECK_INT(shell_parse_list(big, len, &l), -EFBIG);
	CHECK_INT(l.n, 0);
	/* a count larger than the input could hold is a lie */
	CHECK_INT(shell_parse_list("99999999999\n", 12, &l), -EPROTO);
	CHECK_INT(shell_parse_list("18446744073709551616\n", 21, &l), -EPROTO);
	free(big);

	/* exactly the cap is accepted */
	struct buf b = {0};
	snprintf(hdr, sizeof hdr, "%zu\n", SB_LIMIT_LIST_ENTRIES);
	puts_(&b, hdr);
	for (size_t i = 0; i < SB_LIMIT_LIST_ENTRIES; i++) {
		char name[16];
		int k = snprintf(name, sizeof name, "%zx", i);
		put(&b, name, (size_t)k + 1);
	}
	for (size_t i = 0; i < SB_LIMIT_LIST_ENTRIES; i++)
		puts_(&b, STAT_REG);
	CHECK_INT(shell_parse_list(b.p, b.n, &l), 0);
	CHECK_INT(l.n, SB_LIMIT_LIST_ENTRIES);
	sb_dirlist_free(&l);
	free(b.p);
}

/* Modal's helper: hostile names are dropped, the rest kept. */
static void test_modal_names(void)
{
	char big[300];
	memset(big, 'n', sizeof big);
	struct buf b = {0};
	puts_(&b, "[{\"name\":\"ok\",\"type\":\"file\"},"
		  "{\"name\":\"a/b\",\"type\":\"file\"},"
		  "{\"name\":\".\",\"type\":\"directory\"},"
		  "{\"name\":\"..\",\"type\":\"directory\"},"
		  "{\"name\":\"\",\"type\":\"file\"},"
		  "{\"name\":null,\"type\":\"file\"},"
		  "{\"name\":7,\"type\":\"file\"},"
		  "{\"type\":\"file\"},"
		  "{\"name\":\"nul\\u0000x\",\"type\":\"file\"},"
		  "{\"name\":\"neg\",\"type\":\"file\",\"size\":-5},"
		  "{\"name\":\"");
	put(&b, big, SB_LIMIT_NAME + 1);
	puts_(&b, "\",\"type\":\"file\"},{\"name\":\"");
	put(&b, big, SB_LIMIT_NAME);
	puts_(&b, "\",\"type\":\"file\"}]");
	struct sb_dirlist l = {0};
	int rc = modal_parse_file_list(b.p, b.n, &l);
	/* jansson refuses \u0000 without JSON_ALLOW_NUL: the whole reply
	 * is then not a list (the caller falls back to the shell) */
	CHECK_INT(rc, -EPROTO);
	sb_dirlist_free(&l);
	free(b.p);

	b = (struct buf){0};
	puts_(&b, "[{\"name\":\"ok\",\"type\":\"file\"},"
		  "{\"name\":\"a/b\",\"type\":\"file\"},"
		  "{\"name\":\".\",\"type\":\"directory\"},"
		  "{\"name\":\"..\",\"type\":\"directory\"},"
		  "{\"name\":\"\",\"type\":\"file\"},"
		  "{\"name\":null,\"type\":\"file\"},"
		  "{\"name\":7,\"type\":\"file\"},"
		  "{\"type\":\"file\"},"
		  "{\"name\":\"neg\",\"type\":\"file\",\"size\":-5},"
		  "{\"name\":\"");
	put(&b, big, SB_LIMIT_NAME + 1);
	puts_(&b, "\",\"type\":\"file\"},{\"name\":\"");
	put(&b, big, SB_LIMIT_NAME);
	puts_(&b, "\",\"type\":\"file\"}]");
	CHECK_INT(modal_parse_file_list(b.p, b.n, &l), 0);
	CHECK_INT(l.n, 3);
	if (l.n == 3) {
		CHECK(!strcmp(l.v[0].name, "ok"));
		CHECK(!strcmp(l.v[1].name, "neg"));
		CHECK_INT(l.v[1].st.st_size, 0);
		CHECK_INT(strlen(l.v[2].name), SB_LIMIT_NAME);
	}
	sb_dirlist_free(&l);
	free(b.p);
}

static void test_modal_caps(void)
{
	/* an overlong link target is not kept */
	struct buf b = {0};
	puts_(&b, "[{\"name\":\"l\",\"type\":\"symlink\",\"mode\":41471,\"symlink_target\":\"");
	for (size_t i = 0; i <= SB_LIMIT_LINK_TARGET; i++)
		put(&b, "t", 1);
	puts_(&b, "\"}]");
	struct sb_dirlist l = {0};
	CHECK_INT(modal_parse_file_list(b.p, b.n, &l), 0);
	CHECK_INT(l.n, 1);
	if (l.n == 1) {
		CHECK(S_ISLNK(l.v[0].st.st_mode));
		CHECK(l.v[0].link_target == NULL);
	}
	sb_dirlist_free(&l);
	free(b.p);

	/* a reply built to explode in the JSON parser is refused unparsed */
	size_t n = SB_LIMIT_LIST_JSON_VALUES + 8;
	char *bomb = malloc(2 * n + 2);
	bomb[0] = '[';
	for (size_t i = 0; i < n; i++) {
		bomb[1 + 2 * i] = '0';
		bomb[2 + 2 * i] = ',';
	}
	bomb[2 * n] = ']';
	CHECK_INT(modal_parse_file_list(bomb, 2 * n + 1, &l), -EFBIG);
	CHECK_INT(l.n, 0);
	/* commas inside strings are not structure */
	memset(bomb, ',', 2 * n);
	bomb[0] = '[';
	bomb[1] = '"';
	bomb[2 * n - 1] = '"';
	bomb[2 * n] = ']';
	CHECK_INT(modal_parse_file_list(bomb, 2 * n + 1, &l), 0);
	CHECK_INT(l.n, 0);
	free(bomb);

	/* more entries than the cap */
	b = (struct buf){0};
	puts_(&b, "[");
	for (size_t i = 0; i <= SB_LIMIT_LIST_ENTRIES; i++)
		puts_(&b, i ? ",{}" : "{}");
	puts_(&b, "]");
	CHECK_INT(modal_parse_file_list(b.p, b.n, &l), -EFBIG);
	CHECK_INT(l.n, 0);
	free(b.p);
}

int main(void)
{
	test_shell_names();
	test_shell_caps();
	test_modal_names();
	test_modal_caps();
	return unit_done("hostile_listings");
}
