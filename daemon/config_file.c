/* Defaults from a config file, one -o option per line, overridden by the
 * command line:
 *
 *   # comments and blank lines are ignored
 *   backend = docker
 *   writeback
 *   [docker]
 *   image = python:3.12-slim
 *
 * Lines before any [BACKEND] header apply to every mount; those under one
 * only when that backend is used. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int config_path(char *buf, size_t len)
{
	const char *explicit_path = getenv("SBFS_CONFIG");
	if (explicit_path && *explicit_path)
		return snprintf(buf, len, "%s", explicit_path) < (int)len ? 0 : -1;
	const char *xdg = getenv("XDG_CONFIG_HOME");
	if (xdg && xdg[0] == '/')
		return snprintf(buf, len, "%s/sbfs/config", xdg) < (int)len ? 0 : -1;
	const char *home = getenv("HOME");
	if (home && home[0] == '/')
		return snprintf(buf, len, "%s/.config/sbfs/config", home) < (int)len ? 0 : -1;
	return -1;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int config_file_apply(struct mount_options *o, const char *section,
		      char *err, size_t errlen)
{
	char path[PATH_MAX];
	if (config_path(path, sizeof path) < 0)
		return 0;
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot read the config file %s: %s", path,
			 strerror(errno));
		return -1;
	}
	char *line = NULL, *cur = NULL; /* cur: the section we are in */
	size_t cap = 0;
	int lineno = 0, rc = 0;
	while (rc == 0 && getline(&line, &cap, f) >= 0) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = trim(line);
		if (!*s)
			continue;
		if (*s == '[') {
			char *end = strchr(s, ']');
			if (!end || end[1] || end == s + 1) {
				snprintf(err, errlen, "%s line %d: a section header is [BACKEND], not '%s'",
					 path, lineno, s);
				rc = -1;
				break;
			}
			*end = '\0';
			free(cur);
			cur = strdup(trim(s + 1));
			continue;
		}
		bool ours = section ? cur && !strcmp(cur, section) : !cur;
		if (!ours)
			continue;
		/* "key = value" is "key=value" */
		char opt[1024];
		char *eq = strchr(s, '=');
		if (eq) {
			*eq = '\0';
			snprintf(opt, sizeof opt, "%s=%s", trim(s), trim(eq + 1));
		} else {
			snprintf(opt, sizeof opt, "%s", s);
		}
		char why[512];
		if (mount_option_apply(o, opt, why, sizeof why) < 0) {
			snprintf(err, errlen, "%s line %d: %s", path, lineno, why);
			rc = -1;
		}
	}
	free(cur);
	free(line);
	fclose(f);
	return rc;
}
