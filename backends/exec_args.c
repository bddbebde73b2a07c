/* How much command line an exec can carry into the sandbox. The kernel
 * refuses an execve whose argv and envp strings, with a pointer for each,
 * exceed ARG_MAX (a quarter of the stack limit: 2 MiB with Linux's default
 * 8 MiB stack; fs/exec.c, bprm_stack_limits), so that is what a sandbox
 * takes unless its vendor's API says less. The command runs behind the
 * backend's own wrapper (nsenter and env -i on local, the exec marker's
 * variable and script elsewhere) and with the spec's environment, which
 * come out of the same room. */
#include "backend.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Linux's ARG_MAX with the default 8 MiB stack: what a container, a VM or
 * gVisor gives a command unless its stack limit was raised. */
#define SB_EXEC_ARG_MAX ((size_t)2 << 20)
/* The backend's own argv and variables around the command: local's
 * nsenter/setpriv/env prefix and default PATH and HOME (about 400 bytes),
 * the exec marker's variable, a decoder script for non-UTF-8 argv, the
 * image's environment: 16 KiB, or a sixteenth of a smaller limit (Modal's
 * counts the arguments alone). */
#define SB_EXEC_ARG_HEADROOM ((size_t)16 << 10)

static size_t arg_max(const struct sb_backend *b)
{
	if (b->ops->exec_arg_max)
		return b->ops->exec_arg_max;
	/* A command on this host's kernel (local, and the sbx CLI that the
	 * daemon runs) has the daemon's own ARG_MAX, which follows its stack
	 * limit. */
	long host = sysconf(_SC_ARG_MAX);
	return host > 0 && (size_t)host < SB_EXEC_ARG_MAX ? (size_t)host : SB_EXEC_ARG_MAX;
}

size_t sb_exec_arg_cost(const struct sb_backend *b, size_t len)
{
	return len + 1 + (b->ops->exec_arg_text_only ? 0 : sizeof(char *));
}

size_t sb_exec_arg_room(const struct sb_backend *b)
{
	size_t max = arg_max(b);
	size_t used = max / 16 < SB_EXEC_ARG_HEADROOM ? max / 16 : SB_EXEC_ARG_HEADROOM;
	for (size_t i = 0; b->spec.env && b->spec.env[i]; i++)
		used += sb_exec_arg_cost(b, strlen(b->spec.env[i]));
	return max > used ? max - used : 0;
}

void sb_exec_arg_refusal(const struct sb_backend *b, char *msg, size_t msglen)
{
	const char *what = b->ops->exec_arg_max_what ? b->ops->exec_arg_max_what : "ARG_MAX";
	snprintf(msg, msglen,
		 "argument list too long: the arguments and environment take more than the %zu bytes a %s sandbox can pass (%s: %zu, less its own environment); pass large data on stdin or in a file",
		 sb_exec_arg_room(b), b->ops->name, what, arg_max(b));
}
