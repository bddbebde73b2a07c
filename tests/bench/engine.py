#!/usr/bin/env python3
"""The docker backend against its own engine (issue 16, item 5): each file
primitive done the way a program talks to the engine today (its HTTP API:
an archive PUT, HEAD or GET, or an exec) and the same through an sbfs
docker mount of the same container. Run it through tests/bench/engine; see
tests/bench/README.md.

Both go through one delaying proxy (tests/tools/delay_proxy.py) in front of
the engine's socket, which holds every request the latency asked for and
counts it: the figures are the same requests at the same price for both,
and "requests" is what each side sent to the engine per operation.
"""
import argparse
import http.client
import io
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (the mount helpers and the cleanup)

WORKDIR = "/workspace"  # the docker backend's workspace in the container


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=300)
        self.sock_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(300)
        self.sock.connect(self.sock_path)


class Engine:
    """The engine's API, as a program uses it: one connection per request
    (an exec's start takes its connection over for the stream)."""

    def __init__(self, sock, container):
        self.sock, self.c = sock, container

    def request(self, method, url, body=None, headers=None):
        conn = UnixHTTP(self.sock)
        try:
            conn.request(method, url, body=body, headers=headers or {})
            r = conn.getresponse()
            data = r.read()
            if r.status >= 300:
                raise RuntimeError(f"{method} {url}: {r.status} {data[:200]!r}")
            return r, data
        finally:
            conn.close()

    def put_file(self, path, data):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            info = tarfile.TarInfo(os.path.basename(path))
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            t.addfile(info, io.BytesIO(data))
        self.request("PUT", f"/containers/{self.c}/archive?path={os.path.dirname(path)}",
                     buf.getvalue(), {"Content-Type": "application/x-tar"})

    def stat(self, path):
        r, _ = self.request("HEAD", f"/containers/{self.c}/archive?path={path}")
        return r.getheader("X-Docker-Container-Path-Stat")

    def get_file(self, path):
        _, data = self.request("GET", f"/containers/{self.c}/archive?path={path}")
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            return t.extractfile(t.getmembers()[0]).read()

    def exec(self, argv):
        """Runs argv in the container: (exit code, stdout bytes)."""
        _, data = self.request("POST", f"/containers/{self.c}/exec",
                               json.dumps({"Cmd": argv, "AttachStdout": True,
                                           "AttachStderr": True,
                                           "WorkingDir": WORKDIR}),
                               {"Content-Type": "application/json"})
        eid = json.loads(data)["Id"]
        _, raw = self.request("POST", f"/exec/{eid}/start",
                              json.dumps({"Detach": False, "Tty": False}),
                              {"Content-Type": "application/json"})
        out, i = [], 0
        while i + 8 <= len(raw):  # the multiplexed stream: 8-byte headers
            kind, n = raw[i], struct.unpack(">I", raw[i + 4:i + 8])[0]
            if kind == 1:
                out.append(raw[i + 8:i + 8 + n])
            i += 8 + n
        _, data = self.request("GET", f"/exec/{eid}/json")
        return json.loads(data)["ExitCode"], b"".join(out)


def held(rule):
    try:
        with open(rule + ".held") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def measure(n, rule, prepare, op):
    """n runs of op(i), prepare(i) untimed before each: (median ms,
    requests per run)."""
    ms, reqs = [], 0
    for i in range(n):
        prepare(i)
        r0 = held(rule)
        t0 = time.monotonic()
        op(i)
        ms.append((time.monotonic() - t0) * 1000)
        reqs += held(rule) - r0
    return statistics.median(ms), reqs / n


def primitives(eng, mnt, n, mib):
    """(label, n, raw prepare, raw op, sbfs prepare, sbfs op). Every cold
    case uses a name neither side has seen, made through the engine; the
    docker backend has no watch, so the mount is told to forget what it
    cached (sbfs refresh) after each is made, as an sbexec would."""
    blob = b"x" * 4096
    big = os.urandom(1 << 20) * mib
    m = lambda name: os.path.join(mnt, name)  # noqa: E731
    w = lambda name: f"{WORKDIR}/{name}"  # noqa: E731
    nothing = lambda i: None  # noqa: E731

    def read_all(path):
        with open(path, "rb") as f:
            while f.read(1 << 22):
                pass

    def write(path, data):
        with open(path, "wb") as f:
            for off in range(0, len(data), 1 << 20):
                f.write(data[off:off + (1 << 20)])

    def refreshed(make):
        def prep(i):
            make(i)
            subprocess.run([bench.SBFS, "refresh", mnt], check=True, capture_output=True)
        return prep

    def make_dir(name, count):
        rc, _ = eng.exec(["sh", "-c", 'mkdir "$1" && cd "$1" && i=0; '
                          'while [ $i -lt "$2" ]; do : > f$i; i=$((i+1)); done',
                          "sh", name, str(count)])
        assert rc == 0

    def ls_l(path):
        for e in os.scandir(path):
            e.stat(follow_symlinks=False)

    return [
        ("run `true`", n, nothing, lambda i: eng.exec(["true"]),
         nothing, lambda i: subprocess.run([bench.SBEXEC, "-m", mnt, "--", "true"],
                                           check=True)),
        ("write a new 4 KiB file", n, nothing, lambda i: eng.put_file(w(f"rw{i}"), blob),
         nothing, lambda i: write(m(f"sw{i}"), blob)),
        ("stat a file never seen", n, lambda i: eng.put_file(w(f"rs{i}"), blob),
         lambda i: eng.stat(w(f"rs{i}")),
         refreshed(lambda i: eng.put_file(w(f"ss{i}"), blob)), lambda i: os.lstat(m(f"ss{i}"))),
        ("read a 4 KiB file never seen (archive GET)", n,
         lambda i: eng.put_file(w(f"rr{i}"), blob), lambda i: eng.get_file(w(f"rr{i}")),
         refreshed(lambda i: eng.put_file(w(f"sr{i}"), blob)), lambda i: read_all(m(f"sr{i}"))),
        ("read a 4 KiB file never seen (exec cat)", n,
         lambda i: eng.put_file(w(f"rc{i}"), blob), lambda i: eng.exec(["cat", f"rc{i}"]),
         refreshed(lambda i: eng.put_file(w(f"sc{i}"), blob)), lambda i: read_all(m(f"sc{i}"))),
        ("list 1,000 names with their attributes, never seen (exec ls -la)", 3,
         lambda i: make_dir(f"rl{i}", 1000), lambda i: eng.exec(["ls", "-la", f"rl{i}"]),
         refreshed(lambda i: make_dir(f"sl{i}", 1000)), lambda i: ls_l(m(f"sl{i}"))),
        (f"write a new {mib} MiB file", 3, nothing, lambda i: eng.put_file(w(f"rbw{i}"), big),
         nothing, lambda i: write(m(f"sbw{i}"), big)),
        (f"read a {mib} MiB file never seen (exec cat)", 3,
         lambda i: eng.put_file(w(f"rbr{i}"), big), lambda i: eng.exec(["cat", f"rbr{i}"]),
         refreshed(lambda i: eng.put_file(w(f"sbr{i}"), big)), lambda i: read_all(m(f"sbr{i}"))),
    ]


def engine_up(base):
    """A private engine (tests/docker/engine-up.sh) unless DOCKER_HOST and
    SBFS_DOCKER_IMAGE name one: (socket path, image)."""
    host, image = os.environ.get("DOCKER_HOST", ""), os.environ.get("SBFS_DOCKER_IMAGE")
    if host.startswith("unix://") and image:
        return host[len("unix://"):], image
    d = os.path.join(base, "engine")
    r = subprocess.run([os.path.join(bench.ROOT, "tests", "docker", "engine-up.sh"), d],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"engine: no engine to measure (tests/docker/engine-up.sh failed: "
                 f"{r.stderr.strip()[-300:]})")
    bench.CLEAN.cmds.append([os.path.join(bench.ROOT, "tests", "docker", "engine-down.sh"), d])
    env = dict(line.split("=", 1) for line in r.stdout.split())
    return env["DOCKER_HOST"][len("unix://"):], env["SBFS_DOCKER_IMAGE"]


def run_latency(base, upstream, image, lat, n, mib, rows):
    rule = os.path.join(base, f"rule{lat}")
    with open(rule, "w") as f:
        f.write(f". {lat / 1000}")  # every request: held lat ms, counted
    proxy_sock = os.path.join(base, f"proxy{lat}.sock")
    proxy = subprocess.Popen([sys.executable, os.path.join(bench.ROOT, "tests", "tools",
                                                           "delay_proxy.py"),
                              proxy_sock, upstream, rule])
    bench.CLEAN.pids.append(proxy.pid)
    while not os.path.exists(proxy_sock):
        time.sleep(0.01)
    mnt = os.path.join(base, f"mnt{lat}")
    os.makedirs(mnt)
    r = subprocess.run(["timeout", "120", bench.SBFS, "-o", f"backend=docker,image={image}",
                        mnt], capture_output=True, text=True,
                       env=dict(os.environ, DOCKER_HOST=f"unix://{proxy_sock}"))
    if r.returncode != 0:
        sys.exit(f"engine: the sbfs docker mount failed: {r.stderr.strip()}")
    bench.CLEAN.mounts.append(mnt)
    try:
        eng = Engine(proxy_sock, bench.sbfs_status(mnt)["sandbox"])
        for label, runs, rprep, rop, sprep, sop in primitives(eng, mnt, n, mib):
            raw = measure(runs, rule, rprep, rop)
            st0 = bench.sbfs_status(mnt)
            mount = measure(runs, rule, sprep, sop)
            calls = bench.calls_delta(st0, bench.sbfs_status(mnt))
            rows.append((lat, label, runs, raw, mount,
                         sum(calls.values()) / runs if calls else 0))
            bench.log(f"  {lat} ms, {label}: engine {raw[0]:.1f} ms ({raw[1]:.1f} requests), "
                      f"sbfs {mount[0]:.1f} ms ({mount[1]:.1f} requests)")
    finally:
        bench.unmount(mnt)
        bench.CLEAN.mounts.remove(mnt)


def report(rows, started):
    L = ["# sbfs docker backend against its engine", "",
         f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(started))} UTC, "
         f"{bench.build_info()}, run took {time.time() - started:.0f} s. "
         "Each row: the median of the runs; requests: to the engine per "
         "operation, counted by the proxy both went through; latency: what "
         "the proxy held each request. sbfs's time includes the setup calls "
         "a path needs the first time (the lookup of a name never seen) and, "
         "for `true`, starting the sbexec binary.", "",
         "| latency | operation | runs | engine API | requests | sbfs mount | requests "
         "(backend calls) | sbfs/engine |",
         "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for lat, label, runs, raw, mount, calls in rows:
        L.append(f"| {lat} ms | {label} | {runs} | {raw[0]:.1f} ms | {raw[1]:.1f} | "
                 f"{mount[0]:.1f} ms | {mount[1]:.1f} ({calls:.1f}) | "
                 f"{mount[0] / raw[0]:.2f} |")
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(prog="tests/bench/engine", description=__doc__)
    ap.add_argument("--runs", type=int, default=30, help="runs of each small operation")
    ap.add_argument("--mib", type=int, default=64, help="size of the big file")
    ap.add_argument("--latency-ms", default="0,50",
                    help="comma-separated latencies per engine request")
    ap.add_argument("--out", help="also write the Markdown table here")
    ap.add_argument("--workdir", default=os.environ.get("TMPDIR", "/var/tmp"))
    a = ap.parse_args()
    for tool in (bench.SBFS, bench.SBEXEC):
        if not os.access(tool, os.X_OK):
            sys.exit(f"engine: {tool} missing: build first (ninja -C build)")
    started = time.time()
    base = tempfile.mkdtemp(prefix="sbfs-engine-", dir=a.workdir)
    bench.CLEAN.dirs.append(base)
    bench.clean_on_signals()
    lats = [int(x) for x in a.latency_ms.split(",")]
    rows = []
    try:
        upstream, image = engine_up(base)
        for lat in lats:
            bench.log(f"== {lat} ms per engine request")
            run_latency(base, upstream, image, lat, a.runs, a.mib, rows)
        bench.emit(report(rows, started), a.out)
    finally:
        bench.CLEAN.run()


if __name__ == "__main__":
    main()
