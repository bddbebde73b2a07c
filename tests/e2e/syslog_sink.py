#!/usr/bin/env python3
"""A syslog daemon's /dev/log for one test: binds a datagram unix socket at
SOCKET and appends each datagram it receives, as one line, to OUT. Exits
when SOCKET is removed (the test's end) or after 600 s.

usage: syslog_sink.py SOCKET OUT"""
import os
import select
import socket
import sys
import time

path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
end = time.monotonic() + 600
with open(out, "ab", buffering=0) as f:
    while time.monotonic() < end and os.path.exists(path):
        if select.select([s], [], [], 0.5)[0]:
            f.write(s.recv(65536).replace(b"\n", b"\\n") + b"\n")
