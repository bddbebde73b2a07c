/* Claims are files under $XDG_STATE_HOME/sbfs/mounted/, one per sandbox,
 * named BACKEND-ID (hex-escaped where the id holds anything but letters,
 * digits, '.', '_' and '-'), holding "MOUNTPOINT\nPID\n" and locked with
 * flock for as long as the daemon lives: no pid is trusted, a dead
 * daemon's lock is gone with it. */
#include "sandbox_claim.h"
#include "fs/writeback/wb_journal.h"
#include "util/log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int claim_path(const char *backend, const char *id, char *out, size_t len)
{
	char state[PATH_MAX];
	wb_state_dir(state, sizeof state);
	char name[NAME_MAX + 1];
	size_t n = (size_t)snprintf(name, sizeof name, "%s-", backend);
	for (const unsigned char *p = (const unsigned char *)id; *p && n + 4 < sizeof name; p++) {
		if (isalnum(*p) || *p == '.' || *p == '_' || *p == '-')
			name[n++] = (char)*p;
		else
			n += (size_t)snprintf(name + n, sizeof name - n, "%%%02x", *p);
	}
	name[n] = '\0';
	/* the state folder and its mounted/ folder, made as needed */
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", state);
	for (char *s = dir + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if ((size_t)snprintf(dir, sizeof dir, "%s/mounted", state) >= sizeof dir)
		return -ENAMETOOLONG;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if ((size_t)snprintf(out, len, "%s/%s", dir, name) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* The holder's "MOUNTPOINT (sbfs pid N)", from its claim file. */
static void describe_holder(int fd, char *out, size_t len)
{
	char buf[PATH_MAX + 32];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	char *nl = strchr(buf, '\n');
	long pid = nl ? strtol(nl + 1, NULL, 10) : 0;
	if (nl)
		*nl = '\0';
	if (buf[0])
		snprintf(out, len, "%s (sbfs pid %ld)", buf, pid);
	else
		snprintf(out, len, "another sbfs mount");
}

int sandbox_claim(const char *backend, const char *id, const char *mountpoint,
		  char *err, size_t errlen)
{
	char path[PATH_MAX];
	int r = claim_path(backend, id, path, sizeof path);
	for (int tries = 0; r == 0 && tries < 5; tries++) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			r = -errno;
			break;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			r = -errno;
			if (r == -EWOULDBLOCK) {
				char holder[PATH_MAX + 64];
				describe_holder(fd, holder, sizeof holder);
				snprintf(err, errlen,
					 "sandbox %s is already mounted at %s; one mount per sandbox: use that mount, or unmount it first (sbfs umount)",
					 id, holder);
				close(fd);
				return -2;
			}
			close(fd);
			break;
		}
		/* A holder that was dropping its claim may have removed the
		 * file between our open and our lock: lock the one that is
		 * there now. */
		struct stat held, now;
		if (fstat(fd, &held) < 0 || stat(path, &now) < 0 ||
		    held.st_ino != now.st_ino || held.st_dev != now.st_dev) {
			close(fd);
			continue;
		}
		char rec[PATH_MAX + 32];
		int len = snprintf(rec, sizeof rec, "%s\n%ld\n", mountpoint, (long)getpid());
		if (ftruncate(fd, 0) < 0 || pwrite(fd, rec, (size_t)len, 0) != len)
			sb_warn("could not record the mount of sandbox %s in %s: %s", id, path,
				strerror(errno));
		return fd;
	}
	sb_warn("could not record the mount of sandbox %s (%s): another attach=%s would not be refused",
		id, r ? strerror(-r) : "it kept changing", id);
	return -1;
}

void sandbox_claim_drop(int fd, const char *backend, const char *id)
{
	if (fd < 0)
		return;
	char path[PATH_MAX];
	if (claim_path(backend, id, path, sizeof path) == 0)
		unlink(path);
	close(fd);
}
