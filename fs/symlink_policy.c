#include "symlink_policy.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define LOGGED_REFUSALS_MAX 5

/* Next path component after *p (skipping slashes); NULL at the end. */
static const char *next_comp(const char **p, size_t *len)
{
	const char *s = *p;
	while (*s == '/')
		s++;
	if (!*s)
		return NULL;
	*len = strcspn(s, "/");
	*p = s + *len;
	return s;
}

static bool is_dot(const char *c, size_t n) { return n == 1 && c[0] == '.'; }

static bool is_dotdot(const char *c, size_t n)
{
	return n == 2 && c[0] == '.' && c[1] == '.';
}

/* Levels of the link's directory below the mount root. */
static size_t dir_depth(const char *relpath)
{
	size_t n = 0, len;
	const char *p = relpath;
	while (next_comp(&p, &len))
		n++;
	return n ? n - 1 : 0;
}

static int relative_ok(const char *target, size_t depth)
{
	size_t ups = 0, len;
	bool named = false;
	const char *p = target, *c;
	while ((c = next_comp(&p, &len))) {
		if (is_dot(c, len))
			continue;
		if (is_dotdot(c, len)) {
			if (named || ++ups > depth)
				return -EPERM;
			continue;
		}
		named = true;
	}
	return 0;
}

/* The part of absolute target below workdir ("" for workdir itself), or
 * NULL when it is not below it or plays with "." and "..". */
static const char *below_workdir(const char *workdir, const char *target)
{
	const char *w = workdir, *t = target, *wc, *tc;
	size_t wl, tl;
	for (const char *q = target; (tc = next_comp(&q, &tl));)
		if (is_dot(tc, tl) || is_dotdot(tc, tl))
			return NULL;
	while ((wc = next_comp(&w, &wl))) {
		if (is_dot(wc, wl))
			continue;
		tc = next_comp(&t, &tl);
		if (!tc || tl != wl || memcmp(tc, wc, wl) != 0)
			return NULL;
	}
	while (*t == '/')
		t++;
	return t;
}

int symlink_policy_view(const char *workdir, const char *link_relpath,
			const char *target, char **shown)
{
	*shown = NULL;
	if (!target || !*target)
		return -EPERM;
	if (strlen(target) >= PATH_MAX)
		return -ENAMETOOLONG;
	size_t depth = dir_depth(link_relpath);
	if (target[0] != '/') {
		int rc = relative_ok(target, depth);
		if (rc < 0)
			return rc;
		*shown = strdup(target);
		return *shown ? 0 : -ENOMEM;
	}
	const char *rest = below_workdir(workdir, target);
	if (!rest)
		return -EPERM;
	/* "../" per level, then the rest; the workdir itself from the root
	 * is ".", from below it "..", "../..", ... */
	size_t need = depth * 3 + strlen(rest) + 2;
	if (need > PATH_MAX)
		return -ENAMETOOLONG;
	char *out = malloc(need);
	if (!out)
		return -ENOMEM;
	char *w = out;
	for (size_t i = 0; i < depth; i++) {
		memcpy(w, "../", 3);
		w += 3;
	}
	if (*rest) {
		size_t n = strlen(rest);
		memcpy(w, rest, n);
		w += n;
	} else if (depth) {
		w--; /* drop the last '/' */
	} else {
		*w++ = '.';
	}
	*w = '\0';
	*shown = out;
	return 0;
}

void symlink_policy_log_refusal(const char *link_relpath, const char *target,
				int err)
{
	static atomic_uint logged;
	unsigned n = atomic_fetch_add(&logged, 1);
	if (n < LOGGED_REFUSALS_MAX)
		sb_warn("symlink %s -> %.200s from the sandbox is not shown to the host (%s): %s",
			link_relpath, target ? target : "", strerror(-err),
			err == -ENAMETOOLONG ? "its target is too long"
					     : "it points outside the mount");
	else if (n == LOGGED_REFUSALS_MAX)
		sb_warn("more symlinks pointing outside the mount were refused; not logging further ones");
}
