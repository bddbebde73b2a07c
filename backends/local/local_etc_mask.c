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

static int view_add(struct etc_view *v, const char *arg)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		char **a = realloc(v->args, cap * sizeof *a);
		if (!a)
			return -ENOMEM;
		v->args = a;
		v->cap = cap;
	}
	if (!(v->args[v->n] = strdup(arg)))
		return -ENOMEM;
	v->n++;
	return 0;
}

static int view_add3(struct etc_view *v, const char *a, const char *b,
		     const char *c)
{
	int rc = view_add(v, a);
	if (rc == 0)
		rc = view_add(v, b);
	if (rc == 0 && c)
		rc = view_add(v, c);
	return rc;
}

static bool is_masked(const struct etc_masks *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->paths[i], path))
			return true;
	return false;
}

/* Something below dir is masked. */
static bool holds_mask(const struct etc_masks *m, const char *dir)
{
	size_t len = strlen(dir);
	for (size_t i = 0; i < m->n; i++)
		if (!strncmp(m->paths[i], dir, len) && m->paths[i][len] == '/')
			return true;
	return false;
}

static int view_entry(const struct etc_masks *m, int dfd, const char *name,
		      const char *path, struct etc_view *v);

/* dir exists in the view already (a tmpfs or a --dir): fills it. */
static int view_fill(const struct etc_masks *m, int dfd, const char *dir,
		     struct etc_view *v)
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
		char *child;
		if (asprintf(&child, "%s/%s", dir, de->d_name) < 0) {
			rc = -ENOMEM;
			break;
		}
		if (!is_masked(m, child))
			rc = view_entry(m, dirfd(d), de->d_name, child, v);
		free(child);
	}
	closedir(d);
	return rc;
}

static int view_entry(const struct etc_masks *m, int dfd, const char *name,
		      const char *path, struct etc_view *v)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* gone since the listing */
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(dfd, name, target, sizeof target - 1);
		if (n <= 0)
			return 0;
		target[n] = '\0';
		return view_add3(v, "--symlink", target, path);
	}
	if (!S_ISDIR(st.st_mode) || !holds_mask(m, path))
		return view_add3(v, "--ro-bind-try", path, path);
	char perms[16];
	snprintf(perms, sizeof perms, "%04o", (unsigned)(st.st_mode & 07777));
	int rc = view_add3(v, "--perms", perms, NULL);
	if (rc == 0)
		rc = view_add3(v, "--dir", path, NULL);
	int cfd = rc == 0 ? openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (cfd >= 0)
		rc = view_fill(m, cfd, path, v);
	return rc;
}

int etc_view_build(const char *root, struct etc_view *v)
{
	memset(v, 0, sizeof *v);
	struct etc_masks m;
	int rc = etc_masks_collect(root, &m);
	if (rc < 0)
		return rc;
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		etc_masks_free(&m);
		return errno == ENOENT ? 0 : -errno;
	}
	if (m.n == 0) {
		close(fd);
		rc = view_add3(v, "--ro-bind", root, root);
	} else {
		rc = view_add3(v, "--perms", "0755", NULL);
		if (rc == 0)
			rc = view_add3(v, "--tmpfs", root, NULL);
		if (rc == 0)
			rc = view_fill(&m, fd, root, v);
		else
			close(fd);
		if (rc == 0)
			rc = view_add3(v, "--remount-ro", root, NULL);
	}
	etc_masks_free(&m);
	if (rc < 0)
		etc_view_free(v);
	return rc;
}

void etc_view_free(struct etc_view *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->args[i]);
	free(v->args);
	memset(v, 0, sizeof *v);
}
