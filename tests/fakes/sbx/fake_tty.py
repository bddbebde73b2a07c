#!/usr/bin/env python3
"""The terminal of the fake `sbx exec -t` (tests/fakes/sbx/sbx).

    fake_tty.py [-i] CMD [ARG...]

As docker's exec -t (which sbx's follows): the command gets a new pty of
its own "in the VM" (CMD is the nsenter into the fake VM, which makes it
the controlling terminal of a session there); this side, the CLI, relays
it to its own stdin and stdout, which it puts in raw mode while it runs
(so ^C, ^D and the rest reach the VM's terminal as typed bytes, and that
terminal echoes and cooks them), gives it the CLI terminal's size and
each change of it (SIGWINCH), and exits with the command's status (128+N
for signal N). -i: what comes on stdin is typed (docker's --interactive);
without it nothing is. The CLI's end of stdin types nothing: a terminal
has no end of input but its EOF character.

What it does not fake: the VM keeps no terminal of its own once the CLI
is gone (docker's daemon holds it); the command then gets the hangup.
"""
import fcntl
import os
import select
import signal
import sys
import termios
import tty


def main():
    args = sys.argv[1:]
    attach = bool(args) and args[0] == "-i"
    if attach:
        args = args[1:]
    master, slave = os.openpty()

    def copy_size(*_):
        for fd in (0, 1):
            try:
                ws = fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
            except OSError:
                continue
            fcntl.ioctl(master, termios.TIOCSWINSZ, ws)
            return

    copy_size()
    pid = os.fork()
    if pid == 0:
        # the VM's side: not in the CLI's session or process group
        os.setsid()
        os.close(master)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        if slave > 2:
            os.close(slave)
        try:
            os.execvp(args[0], args)
        finally:
            os._exit(127)
    os.close(slave)
    signal.signal(signal.SIGWINCH, copy_size)
    saved = None
    if attach and os.isatty(0):
        saved = termios.tcgetattr(0)
        tty.setraw(0, termios.TCSANOW)
    try:
        status = relay(master, pid, attach)
    finally:
        if saved is not None:
            termios.tcsetattr(0, termios.TCSADRAIN, saved)
    code = os.waitstatus_to_exitcode(status)
    sys.exit(128 - code if code < 0 else code)


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def relay(master, pid, attach):
    # both ways at once, as docker's CLI does: a command that stops reading
    # while it writes never blocks what is typed, nor the other way round
    os.set_blocking(master, False)
    reading = attach
    typed = b""
    status = None
    while True:
        fds = [master] + ([0] if reading and not typed else [])
        # once the command ended: what its terminal still holds, then go
        # (a process it left in the background does not keep the CLI)
        ready, writable, _ = select.select(fds, [master] if typed else [], [],
                                           0.2 if status is not None else 0.5)
        if master in ready:
            try:
                data = os.read(master, 65536)
            except BlockingIOError:
                data = None
            except OSError:  # EIO: nothing holds the VM's terminal any more
                data = b""
            if data == b"":
                break
            if data:
                write_all(1, data)
        elif status is not None:
            break
        if 0 in ready:
            try:
                data = os.read(0, 65536)
            except OSError:
                data = b""
            if data:
                typed = data
            else:
                reading = False
        if typed and master in writable:
            try:
                typed = typed[os.write(master, typed):]
            except BlockingIOError:
                pass
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
    if status is None:
        status = os.waitpid(pid, 0)[1]
    return status


if __name__ == "__main__":
    main()
