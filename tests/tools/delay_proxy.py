#!/usr/bin/env python3
"""A unix-socket proxy in front of an engine's API socket that holds chosen
HTTP requests back: an engine that is slow to answer, on demand.

    delay_proxy.py LISTEN_SOCKET UPSTREAM_SOCKET RULE_FILE

Bytes go through unchanged both ways, half-closes too (a docker exec's
stdin EOF is one). While RULE_FILE exists and holds "REGEX SECONDS", a
request whose first line matches REGEX is held SECONDS before it goes on,
and each one held adds a line to RULE_FILE.held. Clients such as libcurl
send a request only once the previous answer is in, so a request starts a
fresh read of the client's side."""
import os
import re
import socket
import sys
import threading
import time

METHODS = (b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ")


def rule(path):
    try:
        with open(path) as f:
            regex, seconds = f.read().rsplit(None, 1)
        return re.compile(regex.strip()), float(seconds)
    except (OSError, ValueError, re.error):
        return None


def pump(src, dst, rule_file):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if rule_file and data.startswith(METHODS):
                r = rule(rule_file)
                line = data.split(b"\r\n", 1)[0].decode("latin-1")
                if r and r[0].search(line):
                    with open(rule_file + ".held", "a") as f:
                        f.write(line + "\n")
                    time.sleep(r[1])
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def serve(client, upstream_path, rule_file):
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(upstream_path)
    except OSError:
        client.close()
        return
    there = threading.Thread(target=pump, args=(client, up, rule_file), daemon=True)
    there.start()
    pump(up, client, None)
    there.join()
    client.close()
    up.close()


def main():
    listen_path, upstream_path, rule_file = sys.argv[1:4]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(listen_path)
    os.chmod(listen_path, 0o600)
    srv.listen(64)
    while True:
        client, _ = srv.accept()
        threading.Thread(target=serve, args=(client, upstream_path, rule_file),
                         daemon=True).start()


if __name__ == "__main__":
    main()
