/* A host pty for a command that asks for a terminal (sbexec -t). The
 * local backend gives its slave to the command itself; the sbx backend
 * gives it to the `sbx` CLI, which (as docker's does) wants a terminal on
 * its own stdin and stdout and relays it to one in the VM. */
#ifndef SBFS_EXEC_TTY_H
#define SBFS_EXEC_TTY_H

#include "backend.h"

/* A new pty of tty's size, every descriptor CLOEXEC: *master is read as
 * what the terminal shows, *input (a second descriptor of the master) is
 * written as what is typed, so that closing input never hangs the
 * terminal up; *slave is for the process's stdin and stdout (and its
 * controlling terminal). 0 or a negative errno. */
int exec_tty_open(const struct sb_exec_tty *tty, int *master, int *input,
		  int *slave);

/* The size waiting on tty->resize_fd, if any, set on the master: the
 * kernel then sends SIGWINCH to the terminal's foreground group. */
void exec_tty_follow_size(const struct sb_exec_tty *tty, int master);

/* The end of what is typed: a terminal's end of input is its EOF
 * character (^D), typed; *input is then closed and set to -1. */
void exec_tty_type_eof(int *input);

#endif
