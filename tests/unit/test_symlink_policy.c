/* Symlink containment: every answer, followed from the link's directory,
 * stays inside the mount; targets inside the workspace keep working. */
#include "tests/unit/unit.h"
#include "fs/symlink_policy.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

static void expect(const char *workdir, const char *link, const char *target,
		   int want_rc, const char *want)
{
	char *shown = NULL;
	int rc = symlink_policy_view(workdir, link, target, &shown);
	CHECK_INT(rc, want_rc);
	if (want_rc == 0) {
		CHECK(shown && strcmp(shown, want) == 0);
		if (shown && strcmp(shown, want) != 0)
			fprintf(stderr, "  %s -> %s: shown as '%s', wanted '%s'\n",
				link, target, shown, want);
	} else {
		CHECK(shown == NULL);
	}
	free(shown);
}

/* Resolves a shown target lexically from the link's directory the way the
 * kernel would if no component were itself a symlink, and says whether it
 * ever climbs above the mount root. */
static bool climbs_out(const char *link, const char *shown)
{
	int depth = -1;
	for (const char *p = link; *p; p++)
		if (*p == '/' && p[1])
			depth++;
	if (shown[0] == '/')
		return true;
	int level = depth;
	const char *p = shown;
	while (*p) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			level--;
		else if (n && !(n == 1 && p[0] == '.'))
			level++;
		if (level < 0)
			return true;
		p += n;
	}
	return false;
}

int main(void)
{
	const char *ws = "/workspace";

	/* relative targets that stay inside: verbatim */
	expect(ws, "/l", "a", 0, "a");
	expect(ws, "/l", "a/b/c", 0, "a/b/c");
	expect(ws, "/l", "./a//b/", 0, "./a//b/");
	expect(ws, "/d/l", "..", 0, "..");
	expect(ws, "/d/l", "../x", 0, "../x");
	expect(ws, "/d/e/l", "../../x/y", 0, "../../x/y");
	expect(ws, "/d/e/l", ".././../x", 0, ".././../x");
	expect(ws, "/node_modules/.bin/tsc", "../typescript/bin/tsc", 0,
	       "../typescript/bin/tsc");
	expect(ws, "/l", "...", 0, "..."); /* a name, not a climb */
	expect(ws, "/l", "..a/b", 0, "..a/b");

	/* relative targets that climb above the mount root */
	expect(ws, "/l", "..", -EPERM, NULL);
	expect(ws, "/l", "../etc/passwd", -EPERM, NULL);
	expect(ws, "/d/l", "../..", -EPERM, NULL);
	expect(ws, "/d/e/l", "../../../home/me/.ssh/id_rsa", -EPERM, NULL);
	expect(ws, "/d/l", "./../../x", -EPERM, NULL);
	/* ".." after a named component: the name may be a link elsewhere */
	expect(ws, "/d/e/l", "a/../x", -EPERM, NULL);
	expect(ws, "/d/e/l", "s/../../x", -EPERM, NULL);
	expect(ws, "/d/l", "../a/..", -EPERM, NULL);
	expect(ws, "/l", "x/..", -EPERM, NULL);

	/* absolute targets inside the workdir: rewritten relative */
	expect(ws, "/l", "/workspace/a/b", 0, "a/b");
	expect(ws, "/d/e/l", "/workspace/a/b", 0, "../../a/b");
	expect(ws, "/d/l", "/workspace", 0, "..");
	expect(ws, "/d/e/l", "/workspace/", 0, "../..");
	expect(ws, "/l", "/workspace", 0, ".");
	expect(ws, "/l", "//workspace//a", 0, "a");
	expect(ws, "/d/l", "/workspace/a/", 0, "../a/");
	expect("/workspace/", "/d/l", "/workspace/a", 0, "../a");
	expect("/home/user/proj", "/l", "/home/user/proj/src", 0, "src");
	expect("/", "/d/l", "/usr/bin/env", 0, "../usr/bin/env");

	/* absolute targets outside it */
	expect(ws, "/l", "/etc/passwd", -EPERM, NULL);
	expect(ws, "/l", "/", -EPERM, NULL);
	expect(ws, "/l", "/workspacex/a", -EPERM, NULL);
	expect(ws, "/l", "/work", -EPERM, NULL);
	expect(ws, "/d/l", "/workspace/../etc/passwd", -EPERM, NULL);
	expect(ws, "/d/l", "/workspace/a/../../etc", -EPERM, NULL);
	expect(ws, "/d/l", "/workspace/./a", -EPERM, NULL);
	expect("/home/user/proj", "/l", "/home/user/.ssh/id_rsa", -EPERM, NULL);

	/* empty and oversized */
	expect(ws, "/l", "", -EPERM, NULL);
	char *big = malloc(PATH_MAX + 1);
	memset(big, 'a', PATH_MAX);
	big[PATH_MAX] = '\0';
	expect(ws, "/l", big, -ENAMETOOLONG, NULL);
	big[PATH_MAX - 1] = '\0';
	expect(ws, "/l", big, 0, big);
	/* a rewrite that would outgrow PATH_MAX from deep down */
	char deep[4200] = "";
	for (int i = 0; i < 1300; i++)
		strcat(deep, "/d");
	strcat(deep, "/l");
	memcpy(big, "/workspace/", 11);
	expect(ws, deep, big, -ENAMETOOLONG, NULL);
	free(big);

	/* whatever is accepted never climbs out, from any depth: a corpus of
	 * hostile targets tried at depths 0..4 */
	static const char *const corpus[] = {
		"..", "../", "../..", "../../..", "./..", "a/../..", "../a/../..",
		"/workspace/..", "/workspace/../..", "//..", "/..", ".././.././../x",
		"...", "x", "x/y/z", "/workspace/x/y", "/workspace", "../x",
		"../../x", "a//..//..", "/workspace/a/../../..",
	};
	static const char *const links[] = {"/l", "/a/l", "/a/b/l", "/a/b/c/l",
					    "/a/b/c/d/l"};
	int accepted = 0, refused = 0;
	for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
		for (size_t j = 0; j < sizeof links / sizeof links[0]; j++) {
			char *shown = NULL;
			int rc = symlink_policy_view(ws, links[j], corpus[i], &shown);
			if (rc == 0) {
				accepted++;
				CHECK(!climbs_out(links[j], shown));
				if (climbs_out(links[j], shown))
					fprintf(stderr, "  %s -> %s shown as %s climbs out\n",
						links[j], corpus[i], shown);
			} else {
				refused++;
				CHECK_INT(rc, -EPERM);
			}
			free(shown);
		}
	}
	CHECK(accepted > 0 && refused > 0);
	return unit_done("symlink_policy");
}
