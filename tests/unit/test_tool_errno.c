/* sb_tool_errno on the messages real tools print, and on what coreutils
 * and busybox print here when a write meets a full disk (/dev/full). */
#include "util/tool_errno.h"
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* The stderr of `sh -c SCRIPT` run with LC_ALL=C, as the shell fallback
 * runs its tools; NULL if it could not run. */
static char *stderr_of(const char *script)
{
	int p[2];
	if (pipe(p) < 0)
		return NULL;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		execle("/bin/sh", "sh", "-c", script, (char *)NULL,
		       (char *[]){"LC_ALL=C", "PATH=/usr/bin:/bin", NULL});
		_exit(127);
	}
	close(p[1]);
	static char buf[4096];
	size_t got = 0;
	ssize_t n;
	while (got < sizeof buf - 1 && (n = read(p[0], buf + got, sizeof buf - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = 0;
	close(p[0]);
	waitpid(pid, NULL, 0);
	return buf;
}

int main(void)
{
	CHECK_INT(sb_tool_errno("cat: write error: No space left on device\n", EACCES), ENOSPC);
	CHECK_INT(sb_tool_errno("mkdir: cannot create directory '/w/d': Read-only file system", EACCES), EROFS);
	CHECK_INT(sb_tool_errno("truncate: failed to truncate '/w/f' at 9 bytes: File too large", EACCES), EFBIG);
	CHECK_INT(sb_tool_errno("mv: cannot move 'a' to 'b': Permission denied", EIO), EACCES);
	CHECK_INT(sb_tool_errno("chmod: changing permissions of 'f': Operation not permitted", EACCES), EPERM);
	CHECK_INT(sb_tool_errno("cat: write error: Quota exceeded", EACCES), EDQUOT);
	/* the first message said wins: the cause, not what followed from it */
	CHECK_INT(sb_tool_errno("x: No space left on device\ny: Input/output error", EACCES), ENOSPC);
	CHECK_INT(sb_tool_errno("something unheard of", EACCES), EACCES);
	CHECK_INT(sb_tool_errno("", EACCES), EACCES);
	CHECK_INT(sb_tool_errno(NULL, EPROTO), EPROTO);

	/* What the tools really print. */
	char *err = stderr_of("echo x | cat > /dev/full");
	CHECK(err != NULL);
	CHECK_INT(sb_tool_errno(err, EACCES), ENOSPC);
	if (access("/bin/busybox", X_OK) == 0) {
		err = stderr_of("echo x | /bin/busybox cat > /dev/full");
		CHECK_INT(sb_tool_errno(err, EACCES), ENOSPC);
	}
	err = stderr_of("mkdir /proc/sbfs-test-dir");
	CHECK(sb_tool_errno(err, 0) != 0);
	return unit_done("tool_errno");
}
