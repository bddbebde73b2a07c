#include "local_etc_mask.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* /etc is shallow; deeper trees are not walked further. */
#define MASK_DEPTH_MAX 8
#define MASKS_MAX 4096

static int add(struct etc_masks *m, const char *path, bool is_dir)
{
	if (m->n >= MASKS_MAX)
		return -E2BIG;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		char **p = realloc(m->paths, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		m->paths = p;
		bool *d = realloc(m->is_dir, cap * sizeof *d);
		if (!d)
			return -ENOMEM;
		m->is_dir = d;
		m->cap = cap;
	}
	if (!(m->paths[m->n] = strdup(path)))
		return -ENOMEM;
	m->is_dir[m->n++] = is_dir;
	return 0;
}

static int walk(int dfd, const char *path, int depth, struct etc_masks *m)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		char *child;
		if (asprintf(&child, "%s/%s", path, de->d_name) < 0)
			return closedir(d), -ENOMEM;
		bool dir = S_ISDIR(st.st_mode);
		if (S_ISLNK(st.st_mode)) {
			/* a link is resolved in the sandbox, to what is
			 * masked there */
		} else if (!(st.st_mode & S_IROTH) || (dir && !(st.st_mode & S_IXOTH))) {
			if (dir || S_ISREG(st.st_mode))
				rc = add(m, child, dir);
		} else if (dir && depth < MASK_DEPTH_MAX) {
			int cfd = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd >= 0)
				rc = walk(cfd, child, depth + 1, m);
		}
		free(child);
	}
	closedir(d);
	return rc;
}

int etc_masks_collect(const char *root, struct etc_masks *m)
{
	memset(m, 0, sizeof *m);
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	int rc = walk(fd, root, 0, m);
	if (rc < 0)
		etc_masks_free(m);
	return rc;
}

void etc_masks_free(struct etc_masks *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->paths[i]);
	free(m->paths);
	free(m->is_dir);
	memset(m, 0, sizeof *m);
}
