/* The terminal of an exec (sbexec -t): Modal's PTYInfo (api.proto, set as
 * TaskExecStartRequest.pty_info = 9), filled in as the Go and JS SDKs fill
 * it for a sandbox exec with pty=true, but with the caller's window size.
 *
 * Modal has no call that resizes a running exec's terminal: the router
 * (task_command_router.proto) has none, and no SDK sends a size after the
 * start. A command's terminal keeps the size it started with. */
#include "modal.h"

#include <string.h>

/* PTYInfo fields */
enum {
	PTY_ENABLED = 1,        /* "soon deprecated", still sent by every SDK */
	PTY_ROWS = 2,
	PTY_COLS = 3,
	PTY_ENV_TERM = 4,
	PTY_TYPE = 7,
	PTY_NO_TERMINATE_ON_IDLE_STDIN = 8,
};

#define PTY_TYPE_SHELL 2
/* what the Go and JS SDKs name the terminal */
#define MODAL_DEFAULT_TERM "xterm-256color"

/* The last TERM=... of env, or NULL. */
static const char *term_of(const char *const *env)
{
	const char *term = NULL;
	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], "TERM=", 5) == 0)
			term = env[i] + 5;
	return term;
}

void modal_pty_info(struct pb_buf *out, unsigned short rows, unsigned short cols,
		    const char *const *spec_env, const char *const *env)
{
	/* The terminal's name goes to the server apart from the command's
	 * environment; which of the two wins there is not documented, so a
	 * TERM the caller set is sent as the name too. */
	const char *term = term_of(env);
	if (!term)
		term = term_of(spec_env);
	pb_bool(out, PTY_ENABLED, true);
	/* 0 (stdin and stdout not terminals): the server's default size */
	pb_uint(out, PTY_ROWS, rows);
	pb_uint(out, PTY_COLS, cols);
	pb_string(out, PTY_ENV_TERM, term ? term : MODAL_DEFAULT_TERM);
	pb_uint(out, PTY_TYPE, PTY_TYPE_SHELL);
	/* a terminal nobody types at for a while is still in use */
	pb_bool(out, PTY_NO_TERMINATE_ON_IDLE_STDIN, true);
}
