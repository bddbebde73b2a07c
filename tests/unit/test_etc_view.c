/* The sandbox's /etc view: what is private is absent (no mount names it),
 * what is public is bound, symlinks are recreated, a directory holding
 * something private is rebuilt. */
#include "backends/local/local_etc_mask.h"
#include "unit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

static void make(const char *rel, mode_t mode, bool dir)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	if (dir) {
		CHECK_INT(mkdir(p, mode), 0);
		chmod(p, mode);
	} else {
		int fd = open(p, O_CREAT | O_WRONLY, mode);
		CHECK(fd >= 0);
		close(fd);
		chmod(p, mode);
	}
}

/* index of the op whose last argument is root/rel, or -1 */
static long find_op(const struct etc_view *v, const char *op, const char *rel)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->args[i], op)) {
			size_t last = i + (strcmp(op, "--dir") && strcmp(op, "--tmpfs") &&
					   strcmp(op, "--remount-ro") ? 2 : 1);
			if (last < v->n && !strcmp(v->args[last], p))
				return (long)i;
		}
	return -1;
}

static bool mentions(const struct etc_view *v, const char *needle)
{
	for (size_t i = 0; i < v->n; i++)
		if (strstr(v->args[i], needle))
			return true;
	return false;
}

int main(void)
{
	snprintf(root, sizeof root, "/tmp/sbfs-etc-view-XXXXXX");
	CHECK(mkdtemp(root) != NULL);
	chmod(root, 0755);
	make("passwd", 0644, false);
	make("shadow", 0600, false);
	make("ssl", 0755, true);
	make("ssl/certs", 0755, true);
	make("ssl/private", 0700, true);
	make("ssl/openssl.cnf", 0644, false);
	make("apt", 0755, true);
	make("apt/sources.list", 0644, false);
	char link[512];
	snprintf(link, sizeof link, "%s/mtab", root);
	CHECK_INT(symlink("../proc/self/mounts", link), 0);

	struct etc_view v;
	CHECK_INT(etc_view_build(root, &v), 0);
	CHECK(!strcmp(v.args[0], "--perms") && !strcmp(v.args[2], "--tmpfs") &&
	      !strcmp(v.args[3], root));
	CHECK(find_op(&v, "--ro-bind-try", "passwd") >= 0);
	CHECK(find_op(&v, "--ro-bind-try", "apt") >= 0); /* public: bound whole */
	CHECK(find_op(&v, "--dir", "ssl") >= 0);         /* holds a private one */
	CHECK(find_op(&v, "--ro-bind-try", "ssl/certs") >= 0);
	CHECK(find_op(&v, "--ro-bind-try", "ssl/openssl.cnf") >= 0);
	CHECK(find_op(&v, "--symlink", "mtab") >= 0);
	CHECK(!mentions(&v, "shadow"));
	CHECK(!mentions(&v, "private"));
	CHECK(!strcmp(v.args[v.n - 2], "--remount-ro") && !strcmp(v.args[v.n - 1], root));
	etc_view_free(&v);

	/* nothing private: one bind of the whole tree */
	char p[512];
	snprintf(p, sizeof p, "%s/shadow", root);
	unlink(p);
	snprintf(p, sizeof p, "%s/ssl/private", root);
	rmdir(p);
	CHECK_INT(etc_view_build(root, &v), 0);
	CHECK_INT(v.n, 3);
	CHECK(v.n == 3 && !strcmp(v.args[0], "--ro-bind"));
	etc_view_free(&v);

	static const char *const files[] = {"passwd", "mtab", "ssl/openssl.cnf",
					    "apt/sources.list", NULL};
	static const char *const dirs[] = {"ssl/certs", "ssl", "apt", "", NULL};
	for (size_t i = 0; files[i]; i++) {
		snprintf(p, sizeof p, "%s/%s", root, files[i]);
		CHECK_INT(unlink(p), 0);
	}
	for (size_t i = 0; dirs[i]; i++) {
		snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
		CHECK_INT(rmdir(p), 0);
	}
	return unit_done("etc_view");
}
