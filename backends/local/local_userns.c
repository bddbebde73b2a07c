/* The id range a root daemon's local sandboxes live in (local_userns.h). */
#include "local_userns.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define OVERFLOW_ID 65534u

/* root's first "NAME:START:COUNT" line in a subordinate-id file. */
static bool sub_range(const char *file, unsigned long *start, unsigned long *count)
{
	FILE *f = fopen(file, "re");
	if (!f)
		return false;
	char line[256];
	bool found = false;
	while (!found && fgets(line, sizeof line, f)) {
		char name[64];
		unsigned long s, c;
		if (sscanf(line, "%63[^:]:%lu:%lu", name, &s, &c) == 3 &&
		    (!strcmp(name, "root") || !strcmp(name, "0")) && c > 0 &&
		    s > 0 && s + c <= 0xfffffffful) {
			*start = s;
			*count = c;
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* A host user or group whose id is in [base, base+count), or NULL. */
static const char *range_owner(unsigned long base, unsigned long count,
			       char *who, size_t len)
{
	const char *hit = NULL;
	setpwent();
	for (struct passwd *p; !hit && (p = getpwent());)
		if (p->pw_uid >= base && p->pw_uid - base < count) {
			snprintf(who, len, "user %s (uid %u)", p->pw_name, (unsigned)p->pw_uid);
			hit = who;
		}
	endpwent();
	setgrent();
	for (struct group *g; !hit && (g = getgrent());)
		if (g->gr_gid >= base && g->gr_gid - base < count) {
			snprintf(who, len, "group %s (gid %u)", g->gr_name, (unsigned)g->gr_gid);
			hit = who;
		}
	endgrent();
	return hit;
}

int id_map_choose(struct id_map *m, char *err, size_t errlen)
{
	memset(m, 0, sizeof *m);
	if (geteuid() != 0)
		return 0;
	unsigned long us, uc, gs, gc;
	bool have_u = sub_range("/etc/subuid", &us, &uc);
	bool have_g = sub_range("/etc/subgid", &gs, &gc);
	if (!have_u || !have_g) {
		/* The default range is ours only if no host account uses it. */
		us = gs = LOCAL_IDMAP_DEFAULT_BASE;
		uc = gc = LOCAL_IDMAP_DEFAULT_COUNT;
		char who[300];
		if (range_owner(us, uc, who, sizeof who)) {
			snprintf(err, errlen,
				 "backend 'local': the sandbox's ids would be host ids %lu-%lu, but %s has one; give root a free range in /etc/subuid and /etc/subgid (root:START:65536)",
				 us, us + uc - 1, who);
			return -EEXIST;
		}
	}
	m->mapped = true;
	m->uid_base = (uid_t)us;
	m->gid_base = (gid_t)gs;
	m->count = (unsigned)(uc < gc ? uc : gc);
	return 0;
}

static int write_map(pid_t pid, const char *which, unsigned long base,
		     unsigned count)
{
	char path[64], line[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, which);
	int n = snprintf(line, sizeof line, "0 %lu %u\n", base, count);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = write(fd, line, (size_t)n) == n ? 0 : -errno;
	close(fd);
	return rc;
}

/* A child unshares a user namespace and waits; we write its maps and keep
 * a handle on the namespace, which outlives the child. */
int id_map_open_userns(const struct id_map *m)
{
	int ready[2], hold[2];
	if (pipe2(ready, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(hold, O_CLOEXEC) < 0) {
		int e = -errno;
		close(ready[0]);
		close(ready[1]);
		return e;
	}
	pid_t pid = fork();
	if (pid == 0) {
		/* async-signal-safe only from here */
		close(hold[1]); /* else our own copy keeps the pipe open */
		close(ready[0]);
		char c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		while (read(hold[0], &c, 1) > 0)
			;
		_exit(0);
	}
	int rc = pid < 0 ? -errno : 0;
	close(ready[1]);
	close(hold[0]);
	char c = 'n';
	if (rc == 0 && read(ready[0], &c, 1) != 1)
		rc = -EIO;
	if (rc == 0 && c != 'y')
		rc = -EPERM;
	if (rc == 0)
		rc = write_map(pid, "uid_map", m->uid_base, m->count);
	if (rc == 0)
		rc = write_map(pid, "gid_map", m->gid_base, m->count);
	int fd = -1;
	if (rc == 0) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			rc = -errno;
	}
	close(ready[0]);
	close(hold[1]); /* the child ends */
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	return rc < 0 ? rc : fd;
}

uid_t id_map_uid_host(const struct id_map *m, uid_t guest)
{
	if (!m->mapped || guest == (uid_t)-1)
		return guest;
	return guest < m->count ? m->uid_base + guest : (uid_t)-1;
}

gid_t id_map_gid_host(const struct id_map *m, gid_t guest)
{
	if (!m->mapped || guest == (gid_t)-1)
		return guest;
	return guest < m->count ? m->gid_base + guest : (gid_t)-1;
}

uid_t id_map_uid_guest(const struct id_map *m, uid_t host)
{
	if (!m->mapped)
		return host;
	return host >= m->uid_base && host - m->uid_base < m->count
		? host - m->uid_base : OVERFLOW_ID;
}

gid_t id_map_gid_guest(const struct id_map *m, gid_t host)
{
	if (!m->mapped)
		return host;
	return host >= m->gid_base && host - m->gid_base < m->count
		? host - m->gid_base : OVERFLOW_ID;
}
