/* `sbfs umount`: unmounts and waits for the daemon's teardown (the final
 * uploads, the save of what could not land, the sandbox's destroy), then
 * reports it and exits with the daemon's status. fusermount3 -u alone
 * returns before any of that and says nothing of it. */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"

extern char **environ;

/* A mount busy for a moment (a file's last release still on its way from
 * a process that just exited) is tried again this often, this far apart,
 * before it is reported busy. */
#define UNMOUNT_TRIES 10
#define UNMOUNT_RETRY_MS 200

/* fusermount3 -u [-z] MOUNT: 0, or -1 once it failed (it printed why,
 * unless quiet), -2 when it could not run. */
static int run_fusermount(const char *mount, bool lazy, bool quiet)
{
	char *argv[5];
	int n = 0;
	argv[n++] = "fusermount3";
	argv[n++] = "-u";
	if (lazy)
		argv[n++] = "-z";
	argv[n++] = (char *)mount;
	argv[n] = NULL;
	pid_t pid;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	if (quiet)
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	int rc = posix_spawnp(&pid, "fusermount3", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		fprintf(stderr, "sbfs: cannot run fusermount3: %s (install fuse3)\n",
			strerror(rc));
		return -2;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int control_client_unmount(const char *mount, bool lazy, bool json, FILE *out)
{
	char err[PATH_MAX * 2 + 256];
	struct control_target t;
	if (control_find_mount("sbfs", mount, NULL, &t, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	/* Our own working directory must not keep the mount busy. */
	if (chdir("/") < 0)
		fprintf(stderr, "sbfs: cannot leave the current directory: %s\n",
			strerror(errno));
	struct frame f = {0};
	int fd = -1;
	json_t *ok = control_request(&t, "unmount", NULL, &fd, &f, err, sizeof err);
	frame_free(&f);
	if (!ok) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	/* Held from now on, so the daemon's exit is waited for even after
	 * its pid could be reused. */
	json_int_t pid = json_integer_value(json_object_get(ok, "pid"));
	int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, (pid_t)pid, 0) : -1;
	json_decref(ok);
	int unmounted = -1;
	for (int i = 1; unmounted == -1 && i <= UNMOUNT_TRIES; i++) {
		if (i > 1)
			usleep(UNMOUNT_RETRY_MS * 1000);
		unmounted = run_fusermount(t.mount, lazy, i < UNMOUNT_TRIES);
	}
	if (unmounted < 0) {
		fprintf(stderr,
			"sbfs: %s is still mounted; if it is busy, `fuser -vm %s` names who uses it, "
			"and `sbfs umount -l %s` detaches it now and finishes when they let go\n",
			t.mount, t.mount, t.mount);
		close(fd);
		if (pidfd >= 0)
			close(pidfd);
		return 1;
	}
	/* The daemon answers once the sandbox is destroyed (or kept), then
	 * exits: umount returns when it is gone. */
	int rc = frame_read(fd, &f);
	close(fd);
	if (pidfd >= 0) {
		struct pollfd p = {.fd = pidfd, .events = POLLIN};
		while (poll(&p, 1, 60000) < 0 && errno == EINTR)
			;
		close(pidfd);
	}
	json_error_t jerr;
	json_t *rep = rc > 0 && f.type == FRAME_JSON
			      ? json_loadb(f.data ? f.data : "", f.len, 0, &jerr)
			      : NULL;
	int status = 1;
	if (!json_is_object(rep)) {
		fprintf(stderr,
			"sbfs: %s is unmounted, but its daemon ended without saying how its "
			"teardown went (see its -o log= file, or the system log: journalctl -t sbfs)\n",
			t.mount);
	} else {
		status = (int)json_integer_value(json_object_get(rep, "status"));
		if (json) {
			fprintf(out, "%.*s\n", (int)f.len, f.data);
		} else {
			size_t i;
			json_t *m;
			json_array_foreach(json_object_get(rep, "messages"), i, m)
				fprintf(stderr, "sbfs: %s\n", json_string_value(m));
			const char *id = json_string_value(json_object_get(rep, "sandbox"));
			if (json_is_true(json_object_get(rep, "kept")))
				fprintf(out, "sandbox %s kept; mount it again with -o attach=%s\n",
					id, id);
		}
	}
	json_decref(rep);
	frame_free(&f);
	return status;
}
