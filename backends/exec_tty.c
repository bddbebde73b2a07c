#include "exec_tty.h"
#include "exec_pump.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

int exec_tty_open(const struct sb_exec_tty *tty, int *master, int *input,
		  int *slave)
{
	char name[64];
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -errno;
	int s = -1, w = -1;
	if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, sizeof name) != 0 ||
	    (s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    (w = fcntl(m, F_DUPFD_CLOEXEC, 0)) < 0) {
		int e = errno ? errno : EIO;
		close(m);
		if (s >= 0)
			close(s);
		return -e;
	}
	struct winsize ws = {.ws_row = tty->rows, .ws_col = tty->cols};
	if (ws.ws_row && ws.ws_col)
		ioctl(m, TIOCSWINSZ, &ws);
	*master = m;
	*input = w;
	*slave = s;
	return 0;
}

void exec_tty_follow_size(const struct sb_exec_tty *tty, int master)
{
	struct winsize ws = {0};
	if (exec_tty_resize(tty, &ws.ws_row, &ws.ws_col))
		ioctl(master, TIOCSWINSZ, &ws);
}

void exec_tty_type_eof(int *input)
{
	if (*input < 0)
		return;
	(void)!write(*input, "\x04", 1);
	close(*input);
	*input = -1;
}
