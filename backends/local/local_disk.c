#include "local_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void image_path(const char *host_dir, char *out, size_t len)
{
	snprintf(out, len, "%s.img", host_dir);
}

static const char *tool_path(const char *name, char *buf, size_t n)
{
	static const char *const dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin", NULL};
	for (size_t i = 0; dirs[i]; i++) {
		snprintf(buf, n, "%s/%s", dirs[i], name);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return NULL;
}

const char *local_disk_unenforceable(uint64_t mib)
{
	char buf[256];
	if (geteuid() != 0)
		return "backend 'local' can enforce disk= only when sbfs runs as root "
		       "(it mounts the workspace on a file system of that size); drop disk= or run sbfs as root";
	if (mib < LOCAL_DISK_MIN_MIB)
		return "backend 'local' needs disk= of at least 16 MiB (the file system's own metadata needs room)";
	if (!tool_path("mkfs.ext4", buf, sizeof buf) || !tool_path("mount", buf, sizeof buf))
		return "backend 'local' needs mkfs.ext4 (e2fsprogs) and mount to enforce disk=; install them or drop disk=";
	if (access("/dev/loop-control", F_OK) != 0)
		return "backend 'local' cannot enforce disk= here: this machine has no loop devices (/dev/loop-control); drop disk=";
	return NULL;
}

/* Runs argv with no environment; 0 when it exits 0, else -EIO with its
 * first line of stderr in err. */
static int run_tool(const char *const *argv, char *err, size_t errlen)
{
	int errfd = memfd_create("sbfs-disk-stderr", MFD_CLOEXEC);
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (errfd < 0 || devnull < 0) {
		int e = -errno;
		if (errfd >= 0) close(errfd);
		if (devnull >= 0) close(devnull);
		return e;
	}
	pid_t pid = fork();
	if (pid == 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(errfd, 2);
		syscall(SYS_close_range, 3U, ~0U, 0U);
		static char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		execve(argv[0], (char *const *)argv, env);
		_exit(127);
	}
	close(devnull);
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		int e = -errno;
		close(errfd);
		return e;
	}
	int rc = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char msg[256] = "";
		ssize_t n = pread(errfd, msg, sizeof msg - 1, 0);
		msg[n > 0 ? n : 0] = '\0';
		msg[strcspn(msg, "\n")] = '\0';
		snprintf(err, errlen, "%s failed: %s", argv[0],
			 msg[0] ? msg : "no message");
		rc = -EIO;
	}
	close(errfd);
	return rc;
}

static bool is_mount_point(const char *dir)
{
	struct stat st, parent;
	char up[4200];
	snprintf(up, sizeof up, "%s/..", dir);
	return lstat(dir, &st) == 0 && stat(up, &parent) == 0 &&
	       st.st_dev != parent.st_dev;
}

static int mount_image(const char *host_dir, char *err, size_t errlen)
{
	char img[4200], mount_bin[64];
	image_path(host_dir, img, sizeof img);
	tool_path("mount", mount_bin, sizeof mount_bin);
	/* mount(8) sets the loop device up, and frees it at unmount */
	const char *argv[] = {mount_bin, "-t", "ext4", "-o", "loop,nosuid,nodev,noatime",
			      "--", img, host_dir, NULL};
	return run_tool(argv, err, errlen);
}

int local_disk_create(const char *host_dir, uint64_t mib, char *err,
		      size_t errlen)
{
	char img[4200], mkfs[64], owner[64];
	image_path(host_dir, img, sizeof img);
	int fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot create the workspace image %.300s: %s", img, strerror(e));
		return -e;
	}
	/* sparse: the host's disk holds only what the sandbox writes */
	int rc = ftruncate(fd, (off_t)(mib << 20)) < 0 ? -errno : 0;
	close(fd);
	if (rc < 0) {
		snprintf(err, errlen, "cannot size the workspace image %.300s: %s", img, strerror(-rc));
		unlink(img);
		return rc;
	}
	tool_path("mkfs.ext4", mkfs, sizeof mkfs);
	snprintf(owner, sizeof owner, "root_owner=%u:%u", (unsigned)getuid(), (unsigned)getgid());
	/* no reserved blocks: the limit is the size the user asked for */
	const char *argv[] = {mkfs, "-q", "-F", "-m", "0", "-E", owner, "--", img, NULL};
	rc = run_tool(argv, err, errlen);
	if (rc == 0)
		rc = mount_image(host_dir, err, errlen);
	if (rc < 0) {
		unlink(img);
		return rc;
	}
	char lf[4200];
	snprintf(lf, sizeof lf, "%s/lost+found", host_dir);
	rmdir(lf); /* the workspace starts empty, as without disk= */
	chmod(host_dir, 0700);
	return 0;
}

bool local_disk_exists(const char *host_dir)
{
	char img[4200];
	image_path(host_dir, img, sizeof img);
	struct stat st;
	return lstat(img, &st) == 0 && S_ISREG(st.st_mode);
}

int local_disk_mount(const char *host_dir, char *err, size_t errlen)
{
	if (is_mount_point(host_dir))
		return 0;
	return mount_image(host_dir, err, errlen);
}

void local_disk_unmount(const char *host_dir)
{
	if (!is_mount_point(host_dir))
		return;
	if (umount2(host_dir, UMOUNT_NOFOLLOW) < 0 && errno == EBUSY)
		umount2(host_dir, MNT_DETACH | UMOUNT_NOFOLLOW);
}

void local_disk_remove(const char *host_dir)
{
	local_disk_unmount(host_dir);
	char img[4200];
	image_path(host_dir, img, sizeof img);
	unlink(img);
}
