/* Modal credentials as Modal's CLI finds them: environment over the
 * ~/.modal.toml profile (MODAL_PROFILE, else `active = true`, else
 * [default]); a missing token is one line naming both fixes. Also the
 * fs-tools output parsers, and the PTYInfo of sbexec -t against bytes
 * worked out by hand from api.proto's field numbers. */
#include "backends/modal/modal.h"
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char toml[] =
	"# written by modal token new\n"
	"[default]\n"
	"token_id = \"ak-default\"\n"
	"token_secret = \"as-default\"\n"
	"\n"
	"[work]   # a comment\n"
	"token_id = 'ak-work'\n"
	"token_secret = \"as-\\\"work\\\"\"\n"
	"environment = \"staging\"\n"
	"server_url = \"https://api.example.test\"\n"
	"active = true\n"
	"unknown_key = [1, 2]\n";

static void clear_env(void)
{
	const char *vars[] = {"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET",
			      "MODAL_SERVER_URL", "MODAL_ENVIRONMENT",
			      "MODAL_PROFILE", "MODAL_CONFIG_PATH",
			      "MODAL_IMAGE_BUILDER_VERSION", NULL};
	for (size_t i = 0; vars[i]; i++)
		unsetenv(vars[i]);
}

static void test_parse(void)
{
	struct modal_config c = {0};
	char err[512] = "";
	CHECK_INT(modal_config_parse_toml(&c, toml, NULL, err, sizeof(err)), 0);
	CHECK(!strcmp(c.profile, "work")); /* active wins over [default] */
	CHECK(!strcmp(c.token_id, "ak-work"));
	CHECK(!strcmp(c.token_secret, "as-\"work\""));
	CHECK(!strcmp(c.environment, "staging"));
	CHECK(!strcmp(c.server_url, "https://api.example.test"));

	memset(&c, 0, sizeof(c));
	CHECK_INT(modal_config_parse_toml(&c, toml, "default", err, sizeof(err)), 0);
	CHECK(!strcmp(c.token_id, "ak-default"));
	CHECK(!c.environment[0]);

	/* no active profile: [default] */
	memset(&c, 0, sizeof(c));
	CHECK_INT(modal_config_parse_toml(&c, "[other]\ntoken_id=\"x\"\n[default]\ntoken_id = \"d\"\n",
					  NULL, err, sizeof(err)), 0);
	CHECK(!strcmp(c.token_id, "d"));

	/* two active profiles are ambiguous */
	CHECK_INT(modal_config_parse_toml(&c, "[a]\nactive = true\n[b]\nactive = true\n",
					  NULL, err, sizeof(err)), -1);
	CHECK(strstr(err, "modal profile activate") != NULL);
	/* an unknown MODAL_PROFILE */
	CHECK_INT(modal_config_parse_toml(&c, toml, "nope", err, sizeof(err)), -1);
	CHECK(strstr(err, "nope") != NULL);
}

static void test_load(void)
{
	char dir[] = "/tmp/sbfs-modal-cfg-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[256];
	snprintf(path, sizeof(path), "%s/modal.toml", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(toml, f);
		fclose(f);
	}
	struct modal_config c;
	char err[512] = "";

	clear_env();
	setenv("HOME", dir, 1); /* no ~/.modal.toml there */
	CHECK_INT(modal_config_load(&c, err, sizeof(err)), -2); /* not set up */
	CHECK(!strcmp(err, "no Modal credentials: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET or run `modal token new`"));

	/* the file's active profile */
	setenv("MODAL_CONFIG_PATH", path, 1);
	CHECK_INT(modal_config_load(&c, err, sizeof(err)), 0);
	CHECK(!strcmp(c.token_id, "ak-work"));
	CHECK(!strcmp(c.server_url, "https://api.example.test"));

	/* the environment overrides the file, key by key */
	setenv("MODAL_TOKEN_ID", "ak-env", 1);
	setenv("MODAL_TOKEN_SECRET", "as-env", 1);
	setenv("MODAL_ENVIRONMENT", "", 1); /* empty = the workspace default */
	CHECK_INT(modal_config_load(&c, err, sizeof(err)), 0);
	CHECK(!strcmp(c.token_id, "ak-env"));
	CHECK(!strcmp(c.token_secret, "as-env"));
	CHECK(!c.environment[0]);
	CHECK(!strcmp(c.server_url, "https://api.example.test"));

	/* env only, no file: the default server; a fallback list keeps the first */
	clear_env();
	setenv("MODAL_TOKEN_ID", "ak-1", 1);
	setenv("MODAL_TOKEN_SECRET", "as-1", 1);
	CHECK_INT(modal_config_load(&c, err, sizeof(err)), 0);
	CHECK(!strcmp(c.server_url, "https://api.modal.com:443"));
	setenv("MODAL_SERVER_URL", "https://api.modal.com,https://api.modal2.com", 1);
	CHECK_INT(modal_config_load(&c, err, sizeof(err)), 0);
	CHECK(!strcmp(c.server_url, "https://api.modal.com"));

	/* half a token is no token */
	unsetenv("MODAL_TOKEN_SECRET");
	CHECK_INT(modal_config_load(&c, err, sizeof(err)), -2);
	CHECK(strstr(err, "modal token new") != NULL);
	clear_env();
	unlink(path);
	rmdir(dir);
}

static void test_fs_tools_output(void)
{
	const char *list =
		"[{\"name\":\"a.txt\",\"path\":\"/w/a.txt\",\"type\":\"file\",\"size\":6,"
		"\"mode\":33188,\"permissions\":\"0644\",\"owner\":\"0\",\"group\":\"root\","
		"\"modified_time\":1700000000.5,\"symlink_target\":null},"
		"{\"name\":\"d\",\"type\":\"directory\",\"size\":4096,\"mode\":16877,"
		"\"modified_time\":1},"
		"{\"name\":\"l\",\"type\":\"symlink\",\"size\":1,\"mode\":41471,"
		"\"symlink_target\":\"a.txt\",\"owner\":\"1000\",\"group\":\"ubuntu\"}]";
	struct sb_dirlist l = {0};
	CHECK_INT(modal_parse_file_list(list, strlen(list), &l), 0);
	CHECK_INT(l.n, 3);
	if (l.n == 3) {
		CHECK(!strcmp(l.v[0].name, "a.txt"));
		CHECK(S_ISREG(l.v[0].st.st_mode));
		CHECK_INT(l.v[0].st.st_mode & 07777, 0644);
		CHECK_INT(l.v[0].st.st_size, 6);
		CHECK_INT(l.v[0].st.st_mtim.tv_sec, 1700000000);
		CHECK(S_ISDIR(l.v[1].st.st_mode));
		CHECK(S_ISLNK(l.v[2].st.st_mode));
		CHECK(l.v[2].link_target && !strcmp(l.v[2].link_target, "a.txt"));
		CHECK_INT(l.v[0].st.st_uid, 0);
		CHECK_INT(l.v[0].st.st_gid, 0);
		/* a name only the guest's passwd maps, or none: untold (the
		 * fs core asks a stat) */
		CHECK_INT(l.v[1].st.st_uid, SB_ID_UNTOLD);
		CHECK_INT(l.v[2].st.st_uid, 1000);
		CHECK_INT(l.v[2].st.st_gid, SB_ID_UNTOLD);
	}
	sb_dirlist_free(&l);
	CHECK_INT(modal_parse_file_list("{}", 2, &l), -EPROTO);

	const char *e1 = "{\"version\":1,\"error_kind\":\"NotFound\",\"message\":\"x\"}";
	CHECK_INT(modal_fs_errno(e1, strlen(e1)), -ENOENT);
	const char *e2 = "{\"version\":1,\"error_kind\":\"IsFile\",\"message\":\"x\"}";
	CHECK_INT(modal_fs_errno(e2, strlen(e2)), -ENOTDIR);
	const char *e3 = "{\"version\":1,\"error_kind\":\"IsDirectory\",\"message\":\"x\"}";
	CHECK_INT(modal_fs_errno(e3, strlen(e3)), -EISDIR);
	CHECK_INT(modal_fs_errno("garbage", 7), -EIO);
}

static void test_pty_info(void)
{
	/* enabled=1 true, winsz_rows=2 30, winsz_cols=3 100, env_term=4,
	 * pty_type=7 SHELL (2), no_terminate_on_idle_stdin=8 true */
	static const char want[] =
		"\x08\x01" "\x10\x1e" "\x18\x64"
		"\x22\x0e" "xterm-256color" "\x38\x02" "\x40\x01";
	struct pb_buf b = {0};
	modal_pty_info(&b, 30, 100, NULL, NULL);
	CHECK_MEM(b.data, b.len, want, sizeof(want) - 1);
	pb_buf_free(&b);

	/* no size (not a terminal): the server's default; TERM from the
	 * command's env over the mount's */
	static const char vt[] =
		"\x08\x01" "\x22\x05" "vt100" "\x38\x02" "\x40\x01";
	const char *spec_env[] = {"TERM=dumb", NULL};
	const char *env[] = {"A=1", "TERM=vt100", NULL};
	b = (struct pb_buf){0};
	modal_pty_info(&b, 0, 0, spec_env, env);
	CHECK_MEM(b.data, b.len, vt, sizeof(vt) - 1);
	pb_buf_free(&b);

	static const char dumb[] =
		"\x08\x01" "\x10\x90\x02" "\x18\x01" "\x22\x04" "dumb" "\x38\x02" "\x40\x01";
	b = (struct pb_buf){0};
	modal_pty_info(&b, 272, 1, spec_env, NULL);
	CHECK_MEM(b.data, b.len, dumb, sizeof(dumb) - 1);
	pb_buf_free(&b);
}

int main(void)
{
	test_parse();
	test_load();
	test_fs_tools_output();
	test_pty_info();
	return unit_done("modal_config");
}
