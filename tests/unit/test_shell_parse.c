/* The shell_ops parsers on good, hostile-name and malformed input. */
#include "tests/unit/unit.h"
#include "backends/shell_ops.h"

#include <errno.h>
#include <stdlib.h>

#define L(s) s, sizeof(s) - 1

int main(void)
{
	struct stat st;
	CHECK_INT(shell_parse_stat_line(L("81a4 12 1700000000 1700000001 1700000002 1 42 0 0"), &st), 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_INT(st.st_mode & 07777, 0644);
	CHECK_INT(st.st_size, 12);
	CHECK_INT(st.st_mtim.tv_sec, 1700000000);
	CHECK_INT(st.st_atim.tv_sec, 1700000001);
	CHECK_INT(st.st_ino, 42);
	CHECK_INT(shell_parse_stat_line(L("41ed 4096 1 2 3 2 7 1000 1000"), &st), 0);
	CHECK(S_ISDIR(st.st_mode));
	CHECK_INT(st.st_uid, 1000);

	static const char *const bad_stat[] = {
		"", "81a4", "81a4 12 1 2 3 1 42 0", "81a4 12 1 2 3 1 42 0 0 extra",
		"81a4  12 1 2 3 1 42 0 0", "zz 12 1 2 3 1 42 0 0",
		"81a4 -12 1 2 3 1 42 0 0", "81a4 12 1 2 3 1 42 0 0\n",
		"81a4 99999999999999999999999 1 2 3 1 42 0 0", "1a4 12 1 2 3 1 42 0 0",
	};
	for (size_t i = 0; i < sizeof(bad_stat) / sizeof(bad_stat[0]); i++)
		CHECK_INT(shell_parse_stat_line(bad_stat[i], strlen(bad_stat[i]), &st), -EPROTO);

	struct statvfs sv;
	CHECK_INT(shell_parse_statfs(L("1000 500 600 4096 100 50 255\n"), &sv), 0);
	CHECK_INT(sv.f_blocks, 1000);
	CHECK_INT(sv.f_bavail, 500);
	CHECK_INT(sv.f_bfree, 600);
	CHECK_INT(sv.f_frsize, 4096);
	CHECK_INT(sv.f_namemax, 255);
	CHECK_INT(shell_parse_statfs(L("1000 500 600 4096 100 50\n"), &sv), -EPROTO);
	CHECK_INT(shell_parse_statfs(L("1000 500 600 4096 100 50 255"), &sv), -EPROTO);
	CHECK_INT(shell_parse_statfs(L("garbage\n"), &sv), -EPROTO);
	CHECK_INT(shell_parse_statfs(L("1000 500 600 0 100 50 255\n"), &sv), -EPROTO);

	/* good list: hostile names and a symlink whose target has a newline */
	static const char good[] =
		"3\n"
		"new\nline\0-rf $(x) '\0link\0"
		"81a4 5 1 2 3 1 10 0 0\n"
		"41ed 4096 1 2 3 2 11 0 0\n"
		"a1ff 7 1 2 3 1 12 0 0\n"
		"/etc\nx\0";
	struct sb_dirlist l = {0};
	CHECK_INT(shell_parse_list(good, sizeof(good) - 1, &l), 0);
	CHECK_INT(l.n, 3);
	if (l.n == 3) {
		CHECK(strcmp(l.v[0].name, "new\nline") == 0);
		CHECK(strcmp(l.v[1].name, "-rf $(x) '") == 0);
		CHECK(S_ISDIR(l.v[1].st.st_mode));
		CHECK(S_ISLNK(l.v[2].st.st_mode));
		CHECK(l.v[2].link_target && strcmp(l.v[2].link_target, "/etc\nx") == 0);
		CHECK(l.v[0].link_target == NULL);
	}
	sb_dirlist_free(&l);
	CHECK_INT(shell_parse_list(L("0\n"), &l), 0);
	CHECK_INT(l.n, 0);

	/* a 255-byte name passes, 256 does not */
	char big[400];
	int n = snprintf(big, sizeof(big), "1\n%0255d", 0);
	memcpy(big + n, "\0" "81a4 0 1 2 3 1 1 0 0\n", 22);
	CHECK_INT(shell_parse_list(big, (size_t)n + 22, &l), 0);
	sb_dirlist_free(&l);
	n = snprintf(big, sizeof(big), "1\n%0256d", 0);
	memcpy(big + n, "\0" "81a4 0 1 2 3 1 1 0 0\n", 22);
	CHECK_INT(shell_parse_list(big, (size_t)n + 22, &l), -EPROTO);

	static const struct { const char *s; size_t n; } bad[] = {
		{L("")}, {L("x\n")}, {L("1\n")}, {L("1\nname")},
		{L("1\nname\0")}, {L("1\nname\0" "81a4 0 1 2 3 1 1 0 0")},
		{L("1\nname\0" "81a4 0 1 2 3 1 1 0 0\ntrailing")},
		{L("1\na/b\0" "81a4 0 1 2 3 1 1 0 0\n")},
		{L("1\n.\0" "41ed 0 1 2 3 1 1 0 0\n")},
		{L("1\n..\0" "41ed 0 1 2 3 1 1 0 0\n")},
		{L("1\n\0" "81a4 0 1 2 3 1 1 0 0\n")},
		{L("1\nlnk\0" "a1ff 0 1 2 3 1 1 0 0\n")}, /* target missing */
		{L("2\na\0" "81a4 0 1 2 3 1 1 0 0\n")},
		{L("99999999999\na\0")},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sb_dirlist t = {0};
		CHECK_INT(shell_parse_list(bad[i].s, bad[i].n, &t), -EPROTO);
		CHECK_INT(t.n, 0);
		sb_dirlist_free(&t);
	}
	return unit_done("shell_parse");
}
