#!/usr/bin/python3
"""A fake E2B for sbfs tests, written from e2b-dev/E2B's spec/openapi.yml
and spec/envd/ (envd.yaml and the process and filesystem protos), in the Python standard library only.

One HTTP/1.1 listener on 127.0.0.1 serves both planes, told apart as E2B's
edge does: a Host of api.<domain> is the control plane, 49983-<id>.<domain>
is that sandbox's envd; with an IP or localhost Host, the E2b-Sandbox-Id
and E2b-Sandbox-Port headers route to envd, anything else is the control
plane. FAKE_E2B_TLS=1 serves TLS with a CA of its own (STATE/tls/ca.pem)
and a certificate for *.<domain>, api.<domain> and 127.0.0.1.

A sandbox is a directory bound as / under bubblewrap (the host's /usr and
/etc read-only on top, no network unless allow_internet_access); its first
process is agent.py, which does every file operation inside the sandbox's
own view; commands enter its namespaces with nsenter.

STATE/url holds "E2B_API_URL E2B_SANDBOX_URL" (plain) or "DOMAIN" (TLS).
Faults: STATE/faults.json, re-read on every request, counts consumed:
  {"rate_limit": {"count": 2, "path": "/sandboxes", "method": "POST",
                  "retry_after": 0.2},          # 429 on the control plane
   "envd_rate_limit": {"count": 1, "proc": "filesystem.Filesystem/Stat"},
   "cut_stream": {"count": 1},    # Process/Start closes after start+output
   "stall_envd": {"count": 1, "seconds": 20, "proc": "..."},
   "mkdir_denied": {"path": "/workspace"}}  # MakeDir there only as root
STATE/requests.log: one line per request: PLANE METHOD PATH STATUS USER
STATE/calls.log: each process call's request as JSON, and what data kinds
each of its streams sent (tests check the wire shape of -t with it).
STATE/sandboxes/ID.json: the create request's body, for tests to inspect.
"""
import base64
import fcntl
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import ssl
import string
import struct
import subprocess
import sys
import termios
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
STATE = os.environ.get("FAKE_E2B_STATE", "/tmp/fake-e2b")
API_KEY = os.environ.get("FAKE_E2B_API_KEY", "e2b_fake_key")
TLS = os.environ.get("FAKE_E2B_TLS") == "1"
DOMAIN_BASE = os.environ.get("FAKE_E2B_DOMAIN", "e2b.localhost")
TEMPLATES = {"base"}
LOCK = threading.RLock()
SANDBOXES = {}
DOMAIN = ""


def rid(n=20):
    return "i" + "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(n))


# ---------------------------------------------------------------- faults

def faults():
    try:
        with open(os.path.join(STATE, "faults.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def take(name, **match):
    with LOCK:
        fs = faults()
        f = fs.get(name)
        if not f:
            return None
        for k, v in match.items():
            if f.get(k) not in (None, v):
                return None
        if "count" in f:
            if f["count"] <= 0:
                return None
            f["count"] -= 1
            tmp = os.path.join(STATE, "faults.json.tmp")
            with open(tmp, "w") as out:
                json.dump(fs, out)
            os.replace(tmp, os.path.join(STATE, "faults.json"))
        return f


# ---------------------------------------------------------------- sandboxes

class Gone(Exception):
    pass


SPAWN_Q = []
SPAWN_COND = threading.Condition()


def spawner():
    """Starts the sandboxes' first processes from one thread that lives as
    long as the server: bwrap's --die-with-parent follows the thread that
    forked it, and a request's thread ends with its connection."""
    while True:
        with SPAWN_COND:
            while not SPAWN_Q:
                SPAWN_COND.wait()
            job = SPAWN_Q.pop(0)
        try:
            job["result"] = subprocess.Popen(*job["args"], **job["kw"])
        except Exception as e:  # handed back to the request
            job["result"] = e
        with SPAWN_COND:
            job["done"] = True
            SPAWN_COND.notify_all()


def spawn(*args, **kw):
    job = {"args": args, "kw": kw, "done": False}
    with SPAWN_COND:
        SPAWN_Q.append(job)
        SPAWN_COND.notify_all()
        while not job["done"]:
            SPAWN_COND.wait()
    if isinstance(job["result"], Exception):
        raise job["result"]
    return job["result"]


class Proc:
    def __init__(self, sb, popen, stdin, first_sub, tty=None):
        self.sb = sb
        self.popen = popen
        self.pid = popen.pid
        self.stdin_open = stdin
        self.is_pty = tty is not None
        self.tty = tty          # a PTY process's master until it ended
        self.tty_lock = threading.Lock()  # held to use or close self.tty
        # the Start stream subscribes before any output can come
        self.subs = [first_sub]  # queues of the live streams
        self.end = None         # the end event once it exited
        self.cond = threading.Condition()
        self.eofs = 0
        self.deadline_hit = False
        if tty is not None:
            threading.Thread(target=self.pump_tty, daemon=True).start()
            return
        for name, f in (("stdout", popen.stdout), ("stderr", popen.stderr)):
            threading.Thread(target=self.pump, args=(name, f), daemon=True).start()

    def publish(self, ev):
        with self.cond:
            for q in self.subs:
                q.append(ev)
            self.cond.notify_all()

    def pump(self, name, f):
        while True:
            b = os.read(f.fileno(), 32768)
            if not b:
                break
            # output with nobody subscribed is discarded, as envd does
            self.publish({"data": {name: base64.b64encode(b).decode()}})
        f.close()  # a long-lived fake runs thousands of commands
        with self.cond:
            self.eofs += 1
            last = self.eofs == 2
        if last:
            self.ended(self.popen.wait())

    def pump_tty(self):
        """envd reads a PTY's master in 16 KiB chunks as `pty` data (no
        stderr: the terminal is all three streams) until the process
        exits: what is in the master then is read, and it is closed, so a
        background job still holding the terminal does not hold the end."""
        fd = self.tty
        drain_until = None
        # poll, not select: a busy fake's descriptors pass 1024, where
        # select raises and this thread would die without an end event
        ready = select.poll()
        ready.register(fd, select.POLLIN)
        while True:
            exited = self.popen.poll() is not None
            if exited and drain_until is None:
                # what a background job writes after that is not waited for
                drain_until = time.time() + 0.5
            try:
                if not ready.poll(0 if exited else 100) or \
                        (exited and time.time() > drain_until):
                    if exited:
                        break
                    continue
                b = os.read(fd, 16384)
            except OSError:  # EIO: no process holds the terminal any more
                break
            if not b:
                break
            self.publish({"data": {"pty": base64.b64encode(b).decode()}})
        rc = self.popen.wait()
        with self.tty_lock:
            self.tty = None
            os.close(fd)
        self.ended(rc)

    def ended(self, rc):
        if self.stdin_open:
            # a write racing this fails as envd's to an exited process
            self.stdin_open = False
            try:
                self.popen.stdin.close()
            except OSError:
                pass
        if rc < 0:
            name = {9: "killed", 15: "terminated", 2: "interrupt", 1: "hangup",
                    6: "aborted", 11: "segmentation fault", 13: "broken pipe"}.get(-rc, "signal %d" % -rc)
            end = {"exitCode": -1, "status": "signal: " + name, "error": "signal: " + name}
        else:
            end = {"exited": True, "status": "exit status %d" % rc}
            if rc:
                end["exitCode"] = rc
                end["error"] = "exit status %d" % rc
        with self.cond:
            self.end = end
            self.cond.notify_all()
            for q in self.subs:
                q.append({"end": end})

    def inner(self):
        """The command's own pid: nsenter's child in the sandbox's pid
        namespace, or None before nsenter forked it."""
        try:
            with open("/proc/%d/task/%d/children" % (self.pid, self.pid)) as f:
                kids = f.read().split()
            return int(kids[0]) if kids else None
        except (OSError, ValueError):
            return None

    def signal(self, sig):
        # Only while its leader is not reaped: after that the group's id
        # may be another process's (the e2e suite wraps the pid space),
        # and a kill of it took down an sbfs of another test.
        if self.popen.poll() is not None:
            return
        if self.is_pty:
            # a PTY command is a session of its own (setsid -c), out of
            # nsenter's group: envd signals the process itself
            kid = self.inner()
            if kid:
                try:
                    os.kill(kid, sig)
                except OSError:
                    pass
        try:
            os.killpg(self.popen.pid, sig)
        except OSError:
            pass


class Sandbox:
    def __init__(self, body):
        self.id = rid()
        self.body = body
        self.template = body.get("templateID")
        self.metadata = body.get("metadata") or {}
        self.env = body.get("envVars") or {}
        self.secure = bool(body.get("secure"))
        self.token = rid(32) if self.secure else ""
        net = body.get("network") or {}
        self.blocked = body.get("allow_internet_access") is False or bool(net.get("denyOut")) \
            or bool(net.get("allowOut"))
        self.started = time.time()
        self.killed = False
        self.paused = False
        self.procs = {}
        self.alock = threading.Lock()
        self.root = os.path.join(STATE, "sandboxes", self.id)
        os.makedirs(os.path.join(self.root, "fs", "home", "user"))
        os.makedirs(os.path.join(self.root, "fs", "root"))
        os.makedirs(os.path.join(self.root, "fs", "tmp"))
        with open(os.path.join(STATE, "sandboxes", self.id + ".json"), "w") as f:
            json.dump(body, f)
        self.start_agent()
        self.timer = None
        self.set_timeout(int(body.get("timeout") or 15))

    def start_agent(self):
        fs = os.path.join(self.root, "fs")
        a = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--hostname", "e2b", "--bind", fs, "/",
             "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(d):
                a += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                a += ["--ro-bind", d, d]
        a += ["--proc", "/proc", "--dev", "/dev",
              "--ro-bind", os.path.join(HERE, "agent.py"), "/.e2b-agent.py"]
        if self.blocked:
            a += ["--unshare-net"]
        r, w = os.pipe()
        a += ["--info-fd", str(w), "--", "/usr/bin/python3", "/.e2b-agent.py"]
        self.agent = spawn(a, pass_fds=(w,), stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, start_new_session=True)
        os.close(w)
        info = b""
        while True:
            chunk = os.read(r, 4096)
            if not chunk:
                break
            info += chunk
            try:
                self.init_pid = json.loads(info)["child-pid"]
                break
            except ValueError:
                continue
        os.close(r)
        if json.loads(self.agent.stdout.readline()).get("ready") is not True:
            raise RuntimeError("agent did not start")

    def set_timeout(self, secs):
        with LOCK:
            if self.timer:
                self.timer.cancel()
            self.end_at = time.time() + secs
            self.timer = threading.Timer(secs, self.kill)
            self.timer.daemon = True
            self.timer.start()

    def agent_call(self, req, data_iter=None):
        with self.alock:
            if self.killed:
                raise Gone()
            try:
                self.agent.stdin.write(json.dumps(req).encode() + b"\n")
                if data_iter is not None:
                    for chunk in data_iter:
                        self.agent.stdin.write(chunk)
                self.agent.stdin.flush()
                line = self.agent.stdout.readline()
            except (OSError, ValueError):
                raise Gone()
            if not line:
                raise Gone()
            return json.loads(line)

    def command(self, cmd, args, envs, cwd, pty=False):
        ns = ["nsenter", "-t", str(self.init_pid), "-m", "-p", "-i", "-u"]
        if self.blocked:
            ns.append("-n")
        ns.append("--")
        if pty:
            # envd's pty.Start: the command leads a session whose
            # controlling terminal is the PTY (nsenter, which forks it
            # into the pid namespace, stays out of that session)
            ns += ["/usr/bin/setsid", "-c"]
        e = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "HOME": "/root", "USER": "root", "LOGNAME": "root"}
        e.update(self.env)
        e.update(envs)
        return ns + ["/usr/bin/env", "-i", "-C", cwd] + \
            ["%s=%s" % kv for kv in e.items()] + ["/bin/sh", "-c", 'exec "$@"', "--", cmd] + args

    def pause(self, on):
        """Paused: every process stopped, the files kept; the proxy cannot
        reach envd."""
        self.paused = on
        sig = signal.SIGSTOP if on else signal.SIGCONT
        for pg in [p.pid for p in [self.agent] + [q.popen for q in self.procs.values()]
                   if p.poll() is None]:
            try:
                os.killpg(pg, sig)
            except OSError:
                pass

    def kill(self):
        with LOCK:
            if self.killed:
                return
            self.killed = True
            if self.timer:
                self.timer.cancel()
        for p in list(self.procs.values()):
            p.signal(signal.SIGKILL)
        try:
            if self.agent.poll() is None:
                os.killpg(self.agent.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.agent.wait(5)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def info(self, detail=False):
        d = {"sandboxID": self.id, "templateID": self.template, "alias": self.template,
             "clientID": "fake", "envdVersion": "0.6.13", "domain": DOMAIN or None}
        if detail is None:
            d["envdAccessToken"] = self.token or None
            d["trafficAccessToken"] = None
            return d
        d.update({"startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
                  "endAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.end_at)),
                  "state": "paused" if self.paused else "running", "metadata": self.metadata, "cpuCount": 2,
                  "memoryMB": 512, "diskSizeMB": 1024})
        if detail:
            d["envdAccessToken"] = self.token or None
        return d


def pty_size(pty):
    """(cols, rows) of a PTY message as protojson reads it, None when it
    would refuse it; envd takes each as a uint16."""
    if not isinstance(pty, dict) or set(pty) - {"size"}:
        return None
    size = pty.get("size") or {}
    if not isinstance(size, dict) or set(size) - {"cols", "rows"}:
        return None
    out = []
    for k in ("cols", "rows"):
        v = size.get(k, 0)
        if isinstance(v, str) and v.isdigit():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 32:
            return None
        out.append(v & 0xffff)
    return tuple(out)


def log_call(proc, req):
    """STATE/calls.log: one JSON line per process call and its request,
    and after each stream's end what kinds of data it sent."""
    with LOCK, open(os.path.join(STATE, "calls.log"), "a") as f:
        f.write(json.dumps({"proc": proc, "req": req}) + "\n")


def live(sid):
    with LOCK:
        sb = SANDBOXES.get(sid)
        return sb if sb and not sb.killed else None


# ---------------------------------------------------------------- HTTP

def envelope(obj, flags=0):
    b = json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(b)) + b


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-e2b"

    def log_message(self, fmt, *args):
        pass

    def user(self):
        """envd's user: Basic auth with an empty password, "-" if none."""
        a = self.headers.get("Authorization") or ""
        if not a.startswith("Basic "):
            return "-"
        try:
            return base64.b64decode(a[6:]).decode().split(":", 1)[0] or "-"
        except ValueError:
            return "?"

    def log(self, plane, status):
        with open(os.path.join(STATE, "requests.log"), "a") as f:
            f.write("%s %s %s %s %s\n" % (plane, self.command, self.path.split("?")[0], status,
                                         self.user()))

    def send_json(self, plane, status, obj, headers=None):
        body = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(status)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.log(plane, status)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def body_chunks(self):
        """The request body as it arrives: Content-Length or chunked."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return
                left = size
                while left:
                    c = self.rfile.read(min(left, 1 << 20))
                    if not c:
                        return
                    left -= len(c)
                    yield c
                self.rfile.readline()
        left = int(self.headers.get("Content-Length") or 0)
        while left:
            c = self.rfile.read(min(left, 1 << 20))
            if not c:
                return
            left -= len(c)
            yield c

    def route(self):
        host = (self.headers.get("Host") or "").split(":")[0]
        m = re.match(r"^(\d+)-([a-z0-9]+)\.", host)
        if m:
            return "envd", m.group(2), int(m.group(1))
        if host.startswith("api."):
            return "api", None, None
        sid = self.headers.get("E2b-Sandbox-Id")
        if sid is not None or self.headers.get("E2b-Sandbox-Port") is not None:
            if not sid or not self.headers.get("E2b-Sandbox-Port"):
                return "bad", "Missing header: E2b-Sandbox-Id or E2b-Sandbox-Port", None
            return "envd", sid, int(self.headers["E2b-Sandbox-Port"])
        return "api", None, None

    def handle_any(self):
        plane, sid, port = self.route()
        if plane == "bad":
            self.body()
            return self.send_json("envd", 400, {"code": 400, "message": sid})
        if plane == "api":
            return self.api()
        return self.envd(sid, port)

    do_GET = do_POST = do_DELETE = do_PUT = handle_any

    # ---------------- control plane

    def api(self):
        raw = self.body()
        u = urllib.parse.urlsplit(self.path)
        path = u.path
        if self.headers.get("X-API-Key") != API_KEY:
            return self.send_json("api", 401, {"code": 401, "message": "Invalid API key, it must start with 'e2b_'"})
        f = take("rate_limit", path=path, method=self.command)
        if f:
            return self.send_json("api", 429, {"code": 429, "message": "Rate limit exceeded"},
                                  {"Retry-After": str(f.get("retry_after", 0.2))})
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return self.send_json("api", 400, {"code": 400, "message": "invalid JSON body"})
        m = re.match(r"^/sandboxes/([^/]+)(/timeout|/connect|/refreshes|/pause)?$", path)
        if self.command == "POST" and path == "/sandboxes":
            return self.create(body)
        if self.command == "GET" and path == "/v2/sandboxes":
            return self.list(u.query)
        if not m:
            return self.send_json("api", 404, {"code": 404, "message": "no route " + path})
        sid, sub = m.group(1), m.group(2)
        sb = live(sid)
        if not sb:
            return self.send_json("api", 404, {"code": 404, "message": "Sandbox \"%s\" doesn't exist or you don't have access to it" % sid})
        if self.command == "DELETE" and not sub:
            sb.kill()
            return self.send_json("api", 204, None)
        if self.command == "GET" and not sub:
            return self.send_json("api", 200, sb.info(detail=True))
        if self.command == "POST" and sub == "/timeout":
            t = body.get("timeout")
            if not isinstance(t, int) or t <= 0:
                return self.send_json("api", 400, {"code": 400, "message": "timeout must be a positive integer"})
            sb.set_timeout(t)
            return self.send_json("api", 204, None)
        if self.command == "POST" and sub == "/connect":
            t = body.get("timeout")
            if not isinstance(t, int) or t <= 0:
                return self.send_json("api", 400, {"code": 400, "message": "timeout is required"})
            resumed = sb.paused
            if resumed:
                sb.pause(False)
                sb.set_timeout(t)  # a resumed sandbox's timeout starts again
            elif sb.end_at < time.time() + t:
                sb.set_timeout(t)  # the TTL is only extended
            return self.send_json("api", 201 if resumed else 200, sb.info(detail=None))
        if self.command == "POST" and sub == "/pause":
            if sb.paused:
                return self.send_json("api", 409, {"code": 409, "message": "Sandbox is already paused"})
            sb.pause(True)
            return self.send_json("api", 204, None)
        return self.send_json("api", 405, {"code": 405, "message": "method not allowed"})

    def create(self, body):
        if not isinstance(body, dict) or not isinstance(body.get("templateID"), str):
            return self.send_json("api", 400, {"code": 400, "message": "templateID is required"})
        if body["templateID"] not in TEMPLATES:
            return self.send_json("api", 404, {"code": 404, "message": "template '%s' not found" % body["templateID"]})
        t = body.get("timeout", 15)
        if not isinstance(t, int) or t <= 0 or t > 86400:
            return self.send_json("api", 400, {"code": 400, "message": "Timeout cannot be greater than 24 hours"})
        for k in ("envVars", "metadata"):
            v = body.get(k)
            if v is not None and (not isinstance(v, dict) or
                                  not all(isinstance(x, str) for x in v.values())):
                return self.send_json("api", 400, {"code": 400, "message": "%s must map strings to strings" % k})
        net = body.get("network") or {}
        for c in net.get("denyOut") or []:
            if not re.match(r"^[0-9.]+(/\d+)?$", c):
                return self.send_json("api", 400, {"code": 400, "message": "denyOut takes CIDRs or IPs only"})
        sb = Sandbox(body)
        with LOCK:
            SANDBOXES[sb.id] = sb
        return self.send_json("api", 201, sb.info(detail=None))

    def list(self, query):
        q = urllib.parse.parse_qs(query)
        want = {}
        for md in q.get("metadata", []):
            # the server decodes the filter twice more (notes 1.3)
            for pair in urllib.parse.unquote(md).split("&"):
                if "=" in pair:
                    k, v = pair.split("=", 1)
                    want[urllib.parse.unquote(urllib.parse.unquote(k))] = \
                        urllib.parse.unquote(urllib.parse.unquote(v))
        limit = int((q.get("limit") or ["100"])[0])
        if not 1 <= limit <= 100:
            return self.send_json("api", 400, {"code": 400, "message": "limit must be 1..100"})
        start = int((q.get("nextToken") or ["0"])[0])
        with LOCK:
            sbs = [s for s in SANDBOXES.values() if not s.killed and
                   all(s.metadata.get(k) == v for k, v in want.items())]
        sbs.sort(key=lambda s: s.started)
        page = sbs[start:start + limit]
        hdr = {"X-Total-Running": str(len(sbs))}
        if start + limit < len(sbs):
            hdr["X-Next-Token"] = str(start + limit)
        return self.send_json("api", 200, [s.info() for s in page], hdr)

    # ---------------- envd

    def envd(self, sid, port):
        sb = live(sid)
        if not sb or sb.paused:
            self.body()
            return self.send_json("envd", 502, {"sandboxId": sid, "message": "The sandbox was not found", "code": 502})
        if port != 49983:
            self.body()
            return self.send_json("envd", 502, {"sandboxId": sid, "message": "The sandbox is running but port is not open", "code": 502})
        path = urllib.parse.urlsplit(self.path).path
        if path == "/health":
            return self.send_json("envd", 204, None)
        if sb.secure and self.headers.get("X-Access-Token") != sb.token:
            self.body()
            return self.send_json("envd", 401, {"code": 401, "message": "unauthorized access, please provide a valid access token or method signing if supported"})
        proc = path.lstrip("/")
        f = take("stall_envd", proc=proc)
        if f:
            time.sleep(f.get("seconds", 20))
        f = take("envd_rate_limit", proc=proc)
        if f:
            self.body()
            return self.send_json("envd", 429, {"code": 429, "message": "Rate limit exceeded"},
                                  {"Retry-After": str(f.get("retry_after", 0.2))})
        try:
            if path == "/files":
                return self.files(sb)
            if proc in ("process.Process/Start", "process.Process/Connect"):
                return self.stream(sb, proc)
            return self.unary(sb, proc)
        except Gone:
            return self.send_json("envd", 502, {"sandboxId": sid, "message": "The sandbox was not found", "code": 502})

    def files(self, sb):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, errors="surrogateescape")
        p = (q.get("path") or [""])[0]
        if self.command != "POST":
            self.body()
            return self.send_json("envd", 405, {"code": 405, "message": "only upload is faked"})
        ct = self.headers.get("Content-Type", "")
        if ct != "application/octet-stream":
            self.body()
            return self.send_json("envd", 400, {"code": 400, "message": "unsupported Content-Type " + ct})
        if not p.startswith("/"):
            p = os.path.join("/root", p)
        chunks = list(self.body_chunks()) if "chunked" in self.headers.get("Transfer-Encoding", "") else None
        size = sum(len(c) for c in chunks) if chunks is not None else int(self.headers.get("Content-Length") or 0)
        r = sb.agent_call({"op": "write", "path": p, "size": size},
                          chunks if chunks is not None else self.body_chunks())
        if "error" in r:
            e = r["error"]
            status = {"is_dir": 400, "not_found": 404, "permission_denied": 401,
                      "no_space": 507}.get(e["code"], 500)
            return self.send_json("envd", status, {"code": status, "message": e["message"]})
        return self.send_json("envd", 200, r["ok"])

    def connect_error(self, code, message):
        status = {"not_found": 404, "already_exists": 409, "invalid_argument": 400,
                  "permission_denied": 403, "failed_precondition": 400, "internal": 500,
                  "unauthenticated": 401, "unimplemented": 501, "deadline_exceeded": 504}.get(code, 500)
        return self.send_json("envd", status, {"code": code, "message": message})

    def unary(self, sb, proc):
        if self.headers.get("Content-Type") != "application/json":
            self.body()
            return self.send_json("envd", 415, {"code": 415, "message": "unsupported content type"})
        try:
            req = json.loads(self.body() or b"{}")
        except ValueError:
            return self.connect_error("invalid_argument", "bad JSON")
        fsops = {"filesystem.Filesystem/Stat": "stat", "filesystem.Filesystem/ListDir": "list",
                 "filesystem.Filesystem/MakeDir": "mkdir", "filesystem.Filesystem/Remove": "remove",
                 "filesystem.Filesystem/Move": "move"}
        if proc in fsops:
            for k in ("path", "source", "destination"):
                if k in req and not req[k].startswith("/"):
                    req[k] = os.path.join("/root", req[k])
            f = faults().get("mkdir_denied")
            if proc.endswith("/MakeDir") and f and f.get("path") == req.get("path") \
                    and self.user() != "root":
                # a template whose default user may not create there
                return self.connect_error("permission_denied", "error making directory: permission denied")
            req["op"] = fsops[proc]
            r = sb.agent_call(req)
            if "error" in r:
                return self.connect_error(r["error"]["code"], r["error"]["message"])
            return self.send_json("envd", 200, r["ok"])
        if proc in ("process.Process/SendSignal", "process.Process/SendInput",
                    "process.Process/CloseStdin", "process.Process/Update"):
            log_call(proc, req)
            pid = ((req.get("process") or {}).get("pid"))
            p = sb.procs.get(pid)
            if not p or p.end is not None:
                return self.connect_error("not_found", "process with pid %s not found" % pid)
            if proc.endswith("SendSignal"):
                s = req.get("signal")
                sig = {"SIGNAL_SIGKILL": 9, "SIGNAL_SIGTERM": 15, 9: 9, 15: 15}.get(s)
                if not sig:
                    return self.connect_error("invalid_argument", "invalid signal")
                p.signal(sig)
                return self.send_json("envd", 200, {})
            if proc.endswith("Update"):
                return self.update(p, req)
            if p.is_pty:
                return self.pty_input(p, proc, req)
            inp = req.get("input") or {}
            if proc.endswith("SendInput") and "stdin" not in inp:
                if "pty" in inp:
                    return self.connect_error("internal", "error writing to tty: tty not assigned to process \u2014 input should be written to the stdin, not the tty")
                return self.connect_error("unimplemented", "invalid input type <nil>")
            if not p.stdin_open:
                # envd: closing a closed (or never opened) stdin is no error
                if proc.endswith("CloseStdin"):
                    return self.send_json("envd", 200, {})
                return self.connect_error("internal", "error writing to stdin: stdin not enabled or closed")
            try:
                if proc.endswith("CloseStdin"):
                    p.stdin_open = False
                    p.popen.stdin.close()
                else:
                    data = base64.b64decode(inp.get("stdin", ""), validate=True)
                    p.popen.stdin.write(data)
                    p.popen.stdin.flush()
            except (OSError, ValueError) as e:
                return self.connect_error("internal", "error writing to stdin: %s" % e)
            return self.send_json("envd", 200, {})
        if proc == "process.Process/List":
            return self.send_json("envd", 200, {"processes": [
                {"pid": p.pid, "config": {"cmd": "?"}} for p in sb.procs.values() if p.end is None]})
        return self.connect_error("unimplemented", proc + " is not implemented")

    def update(self, p, req):
        """Update: a new size for a PTY process's terminal (TIOCSWINSZ on
        its master, which sends its foreground group SIGWINCH)."""
        if "pty" not in req:
            return self.send_json("envd", 200, {})
        size = pty_size(req["pty"])
        if size is None:
            return self.connect_error("invalid_argument", "invalid value for PTY: %s" % json.dumps(req["pty"]))
        with p.tty_lock:
            fd = p.tty
            if not p.is_pty or fd is None:
                return self.connect_error("internal", "error resizing tty: tty not assigned to process")
            try:
                fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
            except OSError as e:
                return self.connect_error("internal", "error resizing tty: %s" % e)
        return self.send_json("envd", 200, {})

    def pty_input(self, p, proc, req):
        """A PTY process takes input as typed bytes only: envd has no
        stdin pipe to write or close for it (EOF is a typed ^D)."""
        if proc.endswith("CloseStdin"):
            return self.connect_error("unknown", "error closing stdin: cannot close stdin for PTY process \u2014 send Ctrl+D (0x04) instead")
        inp = req.get("input") or {}
        if "pty" not in inp:
            if "stdin" in inp:
                return self.connect_error("internal", "error writing to stdin: tty assigned to process \u2014 input should be written to the pty, not the stdin")
            return self.connect_error("unimplemented", "invalid input type <nil>")
        try:
            data = base64.b64decode(inp["pty"], validate=True)
        except (ValueError, TypeError) as e:
            return self.connect_error("invalid_argument", "invalid value for bytes field pty: %s" % e)
        try:
            with p.tty_lock:
                if p.tty is None:
                    raise OSError(5, "input/output error")
                view = memoryview(data)
                while view:
                    view = view[os.write(p.tty, view):]
        except OSError as e:
            return self.connect_error("internal", "error writing to tty: error writing to tty of process '%d': %s" % (p.pid, e))
        return self.send_json("envd", 200, {})

    def stream(self, sb, proc):
        if self.headers.get("Content-Type") != "application/connect+json":
            self.body()
            return self.send_json("envd", 415, {"code": 415, "message": "unsupported content type"})
        raw = self.body()
        if len(raw) < 5:
            return self.send_json("envd", 400, {"code": "invalid_argument", "message": "no envelope"})
        flags, n = struct.unpack(">BI", raw[:5])
        if flags != 0 or n != len(raw) - 5:
            return self.send_json("envd", 400, {"code": "invalid_argument", "message": "bad envelope"})
        req = json.loads(raw[5:])
        log_call(proc, req)
        timeout_ms = int(self.headers.get("Connect-Timeout-Ms") or 0)
        keepalive = float(self.headers.get("Keepalive-Ping-Interval") or 90)
        # Errors of a stream travel in its end-stream envelope, with 200
        self.send_response(200)
        self.send_header("Content-Type", "application/connect+json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        status = "200"

        def send(b):
            self.wfile.write(b"%x\r\n" % len(b) + b + b"\r\n")
            self.wfile.flush()

        def finish(err=None):
            send(envelope({"error": err} if err else {}, 2))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        q = []
        if proc.endswith("/Start"):
            p = self.start(sb, req, q)
            if isinstance(p, dict):
                self.log("envd", "200:" + p["code"])
                return finish(p)
        else:
            pid = (req.get("process") or {}).get("pid")
            p = sb.procs.get(pid)
            if not p:
                self.log("envd", "200:not_found")
                return finish({"code": "not_found", "message": "process with pid %s not found" % pid})
            with p.cond:
                p.subs.append(q)
                if p.end is not None:
                    q.append({"end": p.end})
        cut = take("cut_stream") if proc.endswith("/Start") else None
        deadline = time.time() + timeout_ms / 1000.0 if timeout_ms else None
        if deadline and proc.endswith("/Start"):
            t = threading.Timer(timeout_ms / 1000.0, lambda: (setattr(p, "deadline_hit", True), p.signal(9)))
            t.daemon = True
            t.start()
        try:
            send(envelope({"event": {"start": {"pid": p.pid}}}))
            last = time.time()
            sent = 0
            kinds = {}
            while True:
                with p.cond:
                    if not q:
                        p.cond.wait(0.2)
                    evs, q[:] = list(q), []
                for ev in evs:
                    if "end" in ev and p.deadline_hit:
                        status = "200:deadline_exceeded"
                        return finish({"code": "deadline_exceeded", "message": "context deadline exceeded"})
                    if cut and "end" in ev:
                        # the connection drops before the end event arrives
                        status = "200:cut"
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    send(envelope({"event": ev}))
                    sent += 1
                    for k in ev.get("data", {}):
                        kinds[k] = kinds.get(k, 0) + 1
                    last = time.time()
                    if "end" in ev:
                        log_call(proc + " sent", {"pid": p.pid, "pty": p.is_pty, "data": kinds})
                        return finish()
                if time.time() - last >= keepalive:
                    send(envelope({"event": {"keepalive": {}}}))
                    last = time.time()
        except (OSError, ValueError):
            status = "200:client-gone"
        finally:
            with p.cond:
                if q in p.subs:
                    p.subs.remove(q)
            self.log("envd", status)

    def start(self, sb, req, q):
        pr = req.get("process") or {}
        cmd = pr.get("cmd")
        if not isinstance(cmd, str) or not cmd:
            return {"code": "invalid_argument", "message": "cmd is required"}
        cwd = pr.get("cwd") or "/root"
        if not cwd.startswith("/"):
            cwd = os.path.join("/root", cwd)
        r = sb.agent_call({"op": "isdir", "path": cwd})
        if not r.get("ok", {}).get("isdir"):
            return {"code": "invalid_argument", "message": "cwd '%s' does not exist" % cwd}
        stdin = req.get("stdin", True) is not False
        pty = req.get("pty")
        argv = sb.command(cmd, list(pr.get("args") or []), pr.get("envs") or {}, cwd,
                          pty is not None)
        argv = [a.encode("utf-8", "surrogateescape") for a in argv]
        if pty is not None:
            size = pty_size(pty)
            if size is None:
                return {"code": "invalid_argument", "message": "invalid value for PTY: %s" % json.dumps(pty)}
            # envd: a PTY process has the terminal as stdin, stdout and
            # stderr; the request's stdin has no say
            master, slave = os.openpty()
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
            try:
                po = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                                      start_new_session=True)
            except OSError as e:
                os.close(master)
                return {"code": "invalid_argument", "message": "error starting pty with command '%s': %s" % (cmd, e)}
            finally:
                os.close(slave)
            p = Proc(sb, po, False, q, master)
            sb.procs[p.pid] = p
            return p
        try:
            po = subprocess.Popen(argv,
                                  stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  start_new_session=True)
        except OSError as e:
            return {"code": "invalid_argument", "message": "error starting process: %s" % e}
        p = Proc(sb, po, stdin, q)
        sb.procs[p.pid] = p
        return p


def make_tls(state, domain):
    d = os.path.join(state, "tls")
    os.makedirs(d, exist_ok=True)
    ca, cakey = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    key, csr, crt = os.path.join(d, "srv.key"), os.path.join(d, "srv.csr"), os.path.join(d, "srv.pem")
    ext = os.path.join(d, "ext.cnf")
    host = domain.split(":")[0]
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:*.%s,DNS:api.%s,IP:127.0.0.1\n"
                "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n" % (host, host))
    q = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "check": True}
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=fake E2B test CA", "-keyout", cakey, "-out", ca,
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign"], **q)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=api." + host,
                    "-keyout", key, "-out", csr], **q)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey,
                    "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", crt], **q)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    return ctx


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global DOMAIN
    # A vendor's commands start with every signal at its default; a
    # background start of this fake from a shell ignored SIGINT and SIGQUIT,
    # and its children would inherit that.
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    os.makedirs(os.path.join(STATE, "sandboxes"), exist_ok=True)
    threading.Thread(target=spawner, daemon=True).start()
    srv = Server(("127.0.0.1", 0), Handler)
    port = srv.server_address[1]
    if TLS:
        DOMAIN = "%s:%d" % (DOMAIN_BASE, port)
        ctx = make_tls(STATE, DOMAIN)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        line = DOMAIN
    else:
        line = "http://127.0.0.1:%d http://127.0.0.1:%d" % (port, port)
    with open(os.path.join(STATE, "port"), "w") as f:
        f.write(str(port))

    def stop(*_):
        for sb in list(SANDBOXES.values()):
            sb.kill()
        os._exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with open(os.path.join(STATE, "url.tmp"), "w") as f:
        f.write(line + "\n")
    os.replace(os.path.join(STATE, "url.tmp"), os.path.join(STATE, "url"))
    srv.serve_forever()


main()
