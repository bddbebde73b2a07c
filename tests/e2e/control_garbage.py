#!/usr/bin/env python3
"""Sends hostile input to an sbfs control socket: noise, lying lengths,
truncated frames, frames out of order, and a connection that stops halfway (held open while the rest are served).
Prints one line per case with what the daemon did (an error reply or a
disconnect) and exits 1 if any connection got anything else (a reply that
is not an error, or no answer at all within the deadline). Deterministic
seed. Usage: control_garbage.py SOCKET"""
import json
import random
import socket
import struct
import sys

DEADLINE_S = 20
MAX_PAYLOAD = 1 << 20


def frame(t, payload=b""):
    return struct.pack(">I", len(payload) + 1) + t + payload


def talk(path, data, shut=True):
    """Sends data, half-closes, and reads until the daemon closes."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(DEADLINE_S)
    s.connect(path)
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the daemon hung up early: a disconnect
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    except socket.timeout:
        s.close()
        return None
    s.close()
    return got


def verdict(reply):
    """'error: ...', 'disconnect', or None for anything unacceptable."""
    if reply is None:
        return None
    if reply == b"":
        return "disconnect"
    if len(reply) < 5:
        return None
    n, t = struct.unpack(">I", reply[:4])[0], reply[4:5]
    body = reply[5:4 + n]
    if t not in (b"J", b"X"):
        return None
    try:
        err = json.loads(body).get("error")
    except ValueError:
        return None
    return "error: " + err if err else None


def cases(rng):
    hdr = frame(b"H", b'{"op":"exec"}')
    yield "noise", bytes(rng.getrandbits(8) for _ in range(4096))
    yield "length 0xffffffff", struct.pack(">I", 0xFFFFFFFF) + b"H"
    yield "length past the cap", struct.pack(">I", MAX_PAYLOAD + 2) + b"H" + b"x" * 100
    yield "length 0", struct.pack(">I", 0) + b"H"
    yield "header cut short", b"\x00\x00"
    yield "payload cut short", struct.pack(">I", 100) + b"H" + b"{"
    yield "header not JSON", frame(b"H", b"\xff\xfe{{{")
    yield "header JSON but not an object", frame(b"H", b"[1,2,3]")
    yield "op not a string", frame(b"H", b'{"op":7}')
    yield "op too long", frame(b"H", json.dumps({"op": "x" * 5000}).encode())
    yield "argument before the header", frame(b"A", b"ls") + frame(b"G")
    yield "unknown frame type", hdr + frame(b"\x00", b"?") + frame(b"G")
    yield "stdin frame before go", hdr + frame(b"I", b"data") + frame(b"G")
    yield "NUL in an argument", hdr + frame(b"A", b"sh\x00-c") + frame(b"G")
    yield "env without =", hdr + frame(b"A", b"true") + frame(b"V", b"NOEQUALS") + frame(b"G")
    yield "cwd twice", hdr + frame(b"A", b"true") + frame(b"C", b"") + frame(b"C", b"") + frame(b"G")
    yield "cwd above the mount", hdr + frame(b"A", b"true") + frame(b"C", b"../../..") + frame(b"G")
    # past what any sandbox can pass (ARG_MAX, 2 MiB, a pointer per string)
    yield "300,000 arguments", hdr + b"".join(frame(b"A", b"x") for _ in range(300000)) + frame(b"G")
    yield "arguments over 2 MiB", hdr + b"".join(frame(b"A", b"y" * 60000) for _ in range(40)) + frame(b"G")
    yield "empty argv", hdr + frame(b"G")
    yield "negative timeout", frame(b"H", b'{"op":"exec","timeout":-1}') + frame(b"A", b"true") + frame(b"G")
    yield "unknown op", frame(b"H", b'{"op":"frobnicate"}') + frame(b"G")
    random_frames = b"".join(
        frame(bytes([rng.randrange(256)]), bytes(rng.getrandbits(8) for _ in range(rng.randrange(50))))
        for _ in range(200))
    yield "200 random frames", random_frames


def main():
    path = sys.argv[1]
    rng = random.Random(0x5BF5)
    bad = 0
    # a client that stops halfway through a frame stays connected while
    # every case below is served
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.connect(path)
    stalled.sendall(struct.pack(">I", 50) + b"H{")
    for name, data in cases(rng):
        v = verdict(talk(path, data))
        print("%-32s %s" % (name, v or "UNACCEPTABLE"))
        if not v:
            bad += 1
    stalled.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
