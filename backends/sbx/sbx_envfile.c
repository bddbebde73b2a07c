/* The environment of a guest command goes to `sbx exec --env-file F`, so
 * no value is ever on an argv (argv is visible to everyone in `ps`). The
 * file is docker's env-file format: one NAME=VALUE a line, the value
 * taken literally to the end of the line; a line with no '=' would import
 * the CLI's own variable of that name, so every line has one. */
#include "sbx.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool sbx_env_entry_ok(const char *kv)
{
	if (!kv || !(isalpha((unsigned char)kv[0]) || kv[0] == '_'))
		return false;
	size_t k = 1;
	while (isalnum((unsigned char)kv[k]) || kv[k] == '_')
		k++;
	if (kv[k] != '=')
		return false;
	return strpbrk(kv + k + 1, "\n\r") == NULL;
}

static int write_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int sbx_envfile_write(const char *path, const char *const *a,
		      const char *const *b, const char *const *c)
{
	const char *const *lists[] = {a, b, c};
	for (size_t l = 0; l < 3; l++)
		for (size_t i = 0; lists[l] && lists[l][i]; i++)
			if (!sbx_env_entry_ok(lists[l][i]))
				return -EINVAL;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	int rc = 0;
	for (size_t l = 0; rc == 0 && l < 3; l++)
		for (size_t i = 0; rc == 0 && lists[l] && lists[l][i]; i++) {
			rc = write_all(fd, lists[l][i], strlen(lists[l][i]));
			if (rc == 0)
				rc = write_all(fd, "\n", 1);
		}
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0)
		unlink(path);
	return rc;
}
