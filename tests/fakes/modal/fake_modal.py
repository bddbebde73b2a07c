#!/usr/bin/python3
"""A fake Modal for sbfs tests, written from modal-labs/modal-client's
modal_proto/api.proto and task_command_router.proto: the control plane (modal.client.ModalClient) and the task command
router (modal.task_command_router.TaskCommandRouter) on one HTTP/2 gRPC
listener on 127.0.0.1, served by grpcio with generic raw-bytes handlers and
our own protobuf codec (pb.py). Plaintext (http://127.0.0.1:PORT), or with
FAKE_MODAL_TLS=1 TLS with a CA of its own, STATE/tls/ca.pem, and a server
certificate for localhost (https://localhost:PORT; the router URL it hands
out is the same, so every call a client makes is over TLS). Sandboxes are directories; commands run
as local processes under bubblewrap with the sandbox's directory bound at its
workdir, and a stand-in modal-sandbox-fs-tools (fs_tools.py). An exec with
pty_info runs on a terminal of its own (see Exec.start_pty). Each
TaskExecStart is recorded as a JSON line in STATE/sandboxes/ID/execs.jsonl.

Faults come from a JSON object in FAKE_MODAL_FAULTS at start, or in the file
STATE/faults.json (re-read on every call), e.g.
  {"trailers_only": {"method": "AppGetOrCreate", "code": 8, "message": "quota"},
   "unavailable": {"method": "SandboxCreate", "count": 2},
   "throttle": {"method": "AppGetOrCreate", "count": 1, "retry_after": 0.3},
   "drop_stream": {"count": 2},
   "expire_jwt": {"count": 1},
   "terminate_on_exec": {"match": "sleep", "after": 1.0},
   "client_too_old": true}
Counts are consumed; STATE/calls.log records one line per call:
  METHOD idempotency-key retry-attempt
"""
import fcntl
import json
import os
import random
import select
import shutil
import signal
import string
import struct
import subprocess
import sys
import termios
import threading
import time
from concurrent import futures

import grpc

import pb

HERE = os.path.dirname(os.path.abspath(__file__))
FS_TOOLS = os.path.join(HERE, "fs_tools.py")
API = "modal.client.ModalClient"
ROUTER = "modal.task_command_router.TaskCommandRouter"
TOKEN_ID = os.environ.get("FAKE_MODAL_TOKEN_ID", "ak-fake")
TOKEN_SECRET = os.environ.get("FAKE_MODAL_TOKEN_SECRET", "as-fake")
STATE = os.environ.get("FAKE_MODAL_STATE", "/tmp/fake-modal")
TASK_POLLS = 2  # SandboxGetTaskId answers empty this many times first

GS_SUCCESS, GS_FAILURE, GS_TERMINATED, GS_TIMEOUT = 1, 2, 3, 4

LOCK = threading.RLock()
COND = threading.Condition(LOCK)
FAULTS = json.loads(os.environ.get("FAKE_MODAL_FAULTS") or "{}")
TLS = os.environ.get("FAKE_MODAL_TLS") == "1"
URL = ""


def rid(prefix, n=22):
    return prefix + "".join(random.choice(string.ascii_letters + string.digits) for _ in range(n))


class Abort(Exception):
    def __init__(self, code, message, details=None):
        self.code, self.message, self.details = code, message, details


# ---------------------------------------------------------------- state

def pty_info(m):
    """modal.client.PTYInfo (api.proto) as a dict, None when unset."""
    if m is None:
        return None
    return {"enabled": bool(m.int(1)), "winsz_rows": m.int(2), "winsz_cols": m.int(3),
            "env_term": m.str(4), "env_colorterm": m.str(5), "env_term_program": m.str(6),
            "pty_type": m.int(7), "no_terminate_on_idle_stdin": bool(m.int(8))}


class Exec:
    def __init__(self, sb, exec_id, argv, env, workdir, timeout, pty=None):
        self.sb = sb
        self.id = exec_id
        self.argv = argv
        self.pty = pty
        self.master = None  # a terminal's master (non-blocking), until its end
        self.wlock = threading.Lock()  # guards master against its close
        self.out = [bytearray(), bytearray()]
        self.eof = [False, False]
        self.code = None
        self.signal = None
        self.stdin_off = 0
        self.stdin_closed = False
        self.proc = None
        self.start(env, workdir, timeout)

    def start(self, env, workdir, timeout):
        if self.pty is not None:
            self.start_pty(env, workdir)
        else:
            cmd = self.sb.command(workdir, env, self.argv)
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
            for i, f in enumerate((self.proc.stdout, self.proc.stderr)):
                threading.Thread(target=self.pump, args=(i, f.fileno()), daemon=True).start()
        threading.Thread(target=self.reap, daemon=True).start()
        if timeout:
            t = threading.Timer(timeout, self.kill)
            t.daemon = True
            t.start()

    def start_pty(self, env, workdir):
        """The command on a terminal, as Modal runs an exec with pty_info:
        the terminal is its stdin, stdout and stderr (so its errors come on
        the stdout stream and the stderr stream stays empty), of the size
        pty_info gives, named by env_term; it is the command's controlling
        terminal, in a session of its own made inside the sandbox's pid
        namespace (setsid + TIOCSCTTY there: from nsenter's side of the
        namespace the terminal's foreground group would be one the command
        cannot see). Input is written to its master; there is no call that
        resizes it later (task_command_router.proto has none)."""
        p = self.pty
        master, slave = os.openpty()
        if p["winsz_rows"] and p["winsz_cols"]:
            fcntl.ioctl(slave, termios.TIOCSWINSZ,
                        struct.pack("HHHH", p["winsz_rows"], p["winsz_cols"], 0, 0))
        e = {k: v for k, v in (("TERM", p["env_term"]), ("COLORTERM", p["env_colorterm"]),
                               ("TERM_PROGRAM", p["env_term_program"])) if v}
        e.update(env)
        cmd = self.sb.command(workdir, e, ["/usr/bin/setsid", "--ctty", "--wait", "--"] + self.argv)
        try:
            self.proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave,
                                         start_new_session=True)
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self.master = master
        self.eof[1] = True
        threading.Thread(target=self.pump, args=(0, master), daemon=True).start()

    def type_in(self, data):
        """Writes data to the terminal as it takes it; OSError once the
        terminal is gone."""
        view = memoryview(data)
        while view:
            with self.wlock:
                if self.master is None or self.done():
                    raise OSError("the terminal is gone")
                try:
                    n = os.write(self.master, view)
                except BlockingIOError:
                    n = 0
            view = view[n:]
            if not n:
                time.sleep(0.01)

    def pump(self, i, fd):
        while True:
            if self.pty is not None:  # non-blocking, for type_in
                ready = select.poll()
                ready.register(fd, select.POLLIN)
                ready.poll()
            try:
                b = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                b = b""  # a terminal's master: EIO once no one holds its other side
            if not b and self.pty is not None:
                with self.wlock:
                    os.close(fd)
                    self.master = None
            with COND:
                if not b:
                    self.eof[i] = True
                    COND.notify_all()
                    return
                self.out[i] += b
                COND.notify_all()

    def reap(self):
        rc = self.proc.wait()
        with COND:
            if rc < 0:
                self.signal = -rc
            else:
                self.code = rc
            COND.notify_all()

    def kill(self):
        # Only while its leader is not reaped: after that the group's id
        # may be another process's (the e2e suite wraps the pid space).
        if self.proc is None or self.proc.poll() is not None:
            return
        session = self.pty_session()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if session:
            kill_session(session)

    def pty_session(self):
        """A terminal's command leads a session of its own: nsenter's one
        child (read while nsenter lives, so the id is still that one)."""
        if self.pty is None:
            return 0
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    def done(self):
        return self.code is not None or self.signal is not None


def kill_session(sid):
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            if int(st[st.rindex(")") + 2:].split()[3]) == sid:
                os.kill(int(d), signal.SIGKILL)
        except (OSError, ValueError):
            pass


class Sandbox:
    def __init__(self, app_id, d, tags):
        self.id = rid("sb-")
        self.app_id = app_id
        self.task_id = rid("ta-")
        self.name = d.str(30) if d.has(30) else ""
        self.workdir = d.str(8) if d.has(8) else "/"
        self.timeout = d.int(7) or 300
        self.idle = d.int(33) if d.has(33) else None
        net = d.msg(22)
        self.network = net.int(1) if net else 0
        self.domains = net.strs(3) if net else []
        self.tags = tags
        self.created = time.time()
        self.result = None
        self.polls = 0
        self.execs = {}
        self.jwt = rid("jwt-", 32)
        self.root = os.path.join(STATE, "sandboxes", self.id)
        for sub in ("workspace", "tmp", "root"):
            os.makedirs(os.path.join(self.root, sub))
        self.start_init()
        t = threading.Timer(self.timeout, self.terminate, args=(GS_TIMEOUT,))
        t.daemon = True
        t.start()

    def start_init(self):
        """The sandbox: a bubblewrap container with its own pid and mount
        namespaces (and no network when blocked), the sandbox directory at
        its workdir, and an idle init; every exec enters it with nsenter."""
        a = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid",
             "--unshare-ipc", "--unshare-uts", "--hostname", "modal",
             "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(d):
                a += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                a += ["--ro-bind", d, d]
        a += ["--proc", "/proc", "--dev", "/dev",
              "--bind", os.path.join(self.root, "tmp"), "/tmp",
              "--bind", os.path.join(self.root, "root"), "/root",
              "--bind", os.path.join(self.root, "workspace"), self.workdir,
              "--ro-bind", FS_TOOLS, "/__modal/.bin/modal-sandbox-fs-tools"]
        if self.network in (2, 3):
            a += ["--unshare-net"]
        r, w = os.pipe()
        a += ["--info-fd", str(w), "--", "/bin/sh", "-c", "while :; do sleep 3600; done"]
        self.init = subprocess.Popen(a, pass_fds=(w,), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, start_new_session=True)
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

    def command(self, workdir, env, argv):
        ns = ["nsenter", "-t", str(self.init_pid), "-m", "-p", "-i", "-u"]
        if self.network in (2, 3):
            ns.append("-n")
        e = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "HOME": "/root"}
        e.update(env)
        return ns + ["--", "/usr/bin/env", "-i", "-C", workdir, "--"] + \
            ["%s=%s" % kv for kv in e.items()] + argv

    def terminate(self, status=GS_TERMINATED):
        """SandboxTerminate, or its timeout: the sandbox ends, as on Modal.
        Its bubblewrap is reaped too: the Sandbox stays in SANDBOXES (a
        later call gets its result), so Popen never reaped it and each
        ended sandbox left a zombie bwrap for the rest of the run (38 after
        a third of modal's basic.bats and lifecycle.bats)."""
        with COND:
            if self.result is not None:
                return
            self.result = status
            for e in self.execs.values():
                e.kill()
            try:
                if self.init.poll() is None:
                    os.killpg(self.init.pid, signal.SIGKILL)
            except OSError:
                pass
            COND.notify_all()
        try:
            self.init.wait(10)
        except subprocess.TimeoutExpired:
            pass


APPS = {}        # (env, name) -> app id
IMAGES = {}      # image id -> {"tag":..., "built": bool, "joins": int}
IMAGE_BY_TAG = {}
SANDBOXES = {}   # id -> Sandbox
TASKS = {}       # task id -> Sandbox


# ---------------------------------------------------------------- faults

def faults():
    path = os.path.join(STATE, "faults.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return FAULTS


def save_faults(fs):
    global FAULTS
    path = os.path.join(STATE, "faults.json")
    if os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            json.dump(fs, f)
        os.replace(path + ".tmp", path)
    else:
        FAULTS = fs


def take(name, method=None):
    """Consumes one count of fault `name` (for `method` if it names one)."""
    with LOCK:
        fs = faults()
        f = fs.get(name)
        if not f:
            return None
        if method and f.get("method") not in (None, method):
            return None
        if "count" in f:
            if f["count"] <= 0:
                return None
            f["count"] -= 1
            save_faults(fs)
        return f


def retry_policy_details(secs):
    policy = pb.f_float(1, secs)
    anyv = pb.f_str(1, "type.modal.com/modal.client.RPCRetryPolicy") + pb.f_bytes(2, policy)
    return pb.f_varint(1, 8) + pb.f_str(2, "slow down") + pb.f_bytes(3, anyv)


def md(ctx):
    return {k: v for k, v in ctx.invocation_metadata()}


def log_call(method, m):
    with open(os.path.join(STATE, "calls.log"), "a") as f:
        f.write("%s %s %s\n" % (method, m.get("x-idempotency-key", "-"),
                                m.get("x-retry-attempt", "-")))


def common_faults(method):
    if faults().get("client_too_old") and method.startswith("/" + API + "/"):
        raise Abort(grpc.StatusCode.FAILED_PRECONDITION,
                    "The client version (1.0.0) is too old. Please update to the latest package.")
    short = method.rsplit("/", 1)[-1]
    f = take("trailers_only", short)
    if f:
        raise Abort(grpc.StatusCode(code_of(f.get("code", 8))), f.get("message", "injected"))
    f = take("unavailable", short)
    if f:
        raise Abort(grpc.StatusCode.UNAVAILABLE, "injected unavailable")
    f = take("throttle", short)
    if f:
        raise Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "throttled",
                    retry_policy_details(f.get("retry_after", 0.2)))


def code_of(n):
    for c in grpc.StatusCode:
        if c.value[0] == n:
            return c.value
    return grpc.StatusCode.UNKNOWN.value


def check_api_auth(ctx, m):
    if not m.get("x-modal-client-type") or not m.get("x-modal-client-version"):
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "missing client type/version")
    if m.get("x-modal-token-id") != TOKEN_ID or m.get("x-modal-token-secret") != TOKEN_SECRET:
        raise Abort(grpc.StatusCode.UNAUTHENTICATED, "Token ID is malformed or invalid")


def router_sandbox(ctx, m, task_id):
    sb = TASKS.get(task_id)
    if not sb or sb.result is not None:
        raise Abort(grpc.StatusCode.NOT_FOUND, "task %s not found" % task_id)
    if take("expire_jwt"):
        sb.jwt = rid("jwt-", 32)
    if m.get("authorization") != "Bearer " + sb.jwt:
        raise Abort(grpc.StatusCode.UNAUTHENTICATED, "invalid or expired router token")
    return sb


# ---------------------------------------------------------------- control plane

def AppGetOrCreate(req, ctx):
    name, env, how = req.str(1), req.str(2), req.int(3)
    with LOCK:
        if (env, name) not in APPS:
            if how == 0:
                raise Abort(grpc.StatusCode.NOT_FOUND, "App '%s' not found" % name)
            APPS[(env, name)] = rid("ap-")
        return pb.f_str(1, APPS[(env, name)])


def EnvironmentGetOrCreate(req, ctx):
    settings = pb.f_str(1, "2024.10")
    meta = pb.f_bytes(2, settings)
    return pb.f_str(1, "en-fake") + pb.f_bytes(2, meta)


def ImageGetOrCreate(req, ctx):
    img = req.msg(2)
    cmds = img.strs(6) if img else []
    if not cmds or not cmds[0].startswith("FROM "):
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "expected dockerfile_commands [FROM tag]")
    if not req.str(4):
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "missing app_id")
    tag = cmds[0][5:]
    with LOCK:
        iid = IMAGE_BY_TAG.get(tag)
        if not iid:
            iid = rid("im-")
            IMAGE_BY_TAG[tag] = iid
            IMAGES[iid] = {"tag": tag, "built": False, "joins": 0}
        im = IMAGES[iid]
        out = pb.f_str(1, iid)
        if im["built"]:
            out += pb.f_bytes(2, image_result(im))
        return out


def image_result(im):
    if im["tag"].startswith("bad"):
        return pb.f_varint(1, GS_FAILURE) + pb.f_str(2, "manifest for %s not found" % im["tag"])
    return pb.f_varint(1, GS_SUCCESS)


def ImageJoinStreaming(req, ctx):
    iid = req.str(1)
    with LOCK:
        im = IMAGES.get(iid)
        if not im:
            raise Abort(grpc.StatusCode.NOT_FOUND, "image not found")
        im["joins"] += 1
        first = im["joins"] == 1
    logs = pb.f_bytes(2, pb.f_str(1, "Building image %s\n" % im["tag"]))
    yield logs + pb.f_str(3, "1-%d" % im["joins"])
    if first and req.str(3) == "":
        return  # end without a result: the client must resume
    im["built"] = True
    yield pb.f_bytes(1, image_result(im)) + pb.f_str(3, "2-0") + pb.f_varint(4, 1)


def SandboxCreate(req, ctx):
    app_id = req.str(1)
    d = req.msg(2)
    if app_id not in APPS.values():
        raise Abort(grpc.StatusCode.NOT_FOUND, "app not found")
    if d is None:
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "missing definition")
    iid = d.str(3)
    if iid not in IMAGES or not IMAGES[iid]["built"]:
        raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "Could not find image with ID %s" % iid)
    if d.has(8) and not d.str(8).startswith("/"):
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "workdir must be absolute")
    if not d.has(22) or not d.has(20):
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "network_access and open_ports are required")
    tags = {t.str(1): t.str(2) for t in req.msgs(4)}
    with LOCK:
        name = d.str(30) if d.has(30) else ""
        for sb in SANDBOXES.values():
            if name and sb.app_id == app_id and sb.name == name and sb.result is None:
                raise Abort(grpc.StatusCode.ALREADY_EXISTS, "a sandbox named %s exists" % name)
        sb = Sandbox(app_id, d, tags)
        SANDBOXES[sb.id] = sb
        TASKS[sb.task_id] = sb
        with open(os.path.join(sb.root, "definition.json"), "w") as f:
            json.dump({"workdir": sb.workdir, "timeout": sb.timeout, "idle": sb.idle,
                       "network": sb.network, "domains": sb.domains, "tags": tags,
                       "name": sb.name, "resources": resources(d)}, f)
    return pb.f_str(1, sb.id)


def resources(d):
    r = d.msg(5)
    if not r:
        return {}
    g = r.msg(4)
    return {"memory_mb": r.int(2), "milli_cpu": r.int(3),
            "gpu": g.str(4) if g else "", "gpu_count": g.int(2) if g else 0,
            "ephemeral_disk_mb": r.int(6)}


def get_sb(sid):
    sb = SANDBOXES.get(sid)
    if not sb:
        raise Abort(grpc.StatusCode.NOT_FOUND, "sandbox %s not found" % sid)
    return sb


def SandboxGetFromName(req, ctx):
    name, app = req.str(1), req.str(3)
    with LOCK:
        app_id = APPS.get((req.str(2), app))
        for sb in SANDBOXES.values():
            if sb.name == name and sb.app_id == app_id and sb.result is None:
                return pb.f_str(1, sb.id)
    raise Abort(grpc.StatusCode.NOT_FOUND, "Sandbox with name '%s' not found" % name)


def SandboxGetTaskId(req, ctx):
    with LOCK:
        sb = get_sb(req.str(1))
        if sb.result is not None:
            return pb.f_bytes(2, pb.f_varint(1, sb.result) + pb.f_str(2, "Sandbox already finished"))
        sb.polls += 1
        if sb.polls <= TASK_POLLS:
            return b""
        return pb.f_str(1, sb.task_id)


def TaskGetCommandRouterAccess(req, ctx):
    with LOCK:
        sb = TASKS.get(req.str(1))
        if not sb or sb.result is not None:
            raise Abort(grpc.StatusCode.NOT_FOUND, "task not found")
        return pb.f_str(1, sb.jwt) + pb.f_str(2, URL)


def SandboxTerminate(req, ctx):
    sb = get_sb(req.str(1))
    sb.terminate()
    return pb.f_bytes(1, pb.f_varint(1, sb.result))


def SandboxWait(req, ctx):
    sb = get_sb(req.str(1))
    end = time.time() + min(req.float(2), 50)
    with COND:
        while sb.result is None and time.time() < end and ctx.is_active():
            COND.wait(min(0.5, max(end - time.time(), 0.01)))
        if sb.result is None:
            return b""
        return pb.f_bytes(1, pb.f_varint(1, sb.result))


def SandboxList(req, ctx):
    before = req.double(2)
    want = {t.str(1): t.str(2) for t in req.msgs(5)}
    with LOCK:
        sbs = [s for s in SANDBOXES.values()
               if s.result is None and (not before or s.created < before)
               and all(s.tags.get(k) == v for k, v in want.items())]
    sbs.sort(key=lambda s: -s.created)
    out = b""
    for s in sbs[:2]:  # small pages, so clients must page
        tags = b"".join(pb.f_bytes(6, pb.f_str(1, k) + pb.f_str(2, v)) for k, v in s.tags.items())
        out += pb.f_bytes(1, pb.f_str(1, s.id) + pb.f_double(3, s.created) + tags + pb.f_str(5, s.app_id))
    return out


# ---------------------------------------------------------------- router

def TaskExecStart(req, ctx, m):
    sb = router_sandbox(ctx, m, req.str(1))
    exec_id = req.str(2)
    argv = req.strs(3)
    if req.int(4) != 1 or req.int(5) != 1:
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "sbfs always pipes stdout and stderr")
    if not argv:
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "empty command")
    with LOCK:
        if exec_id in sb.execs:
            return b""  # idempotent by exec id
        workdir = req.str(7) if req.has(7) else sb.workdir
        timeout = req.int(6) if req.has(6) else None
        pty = pty_info(req.msg(9))
        with open(os.path.join(sb.root, "execs.jsonl"), "a") as f:
            f.write(json.dumps({"exec_id": exec_id, "argv": argv, "stdout_config": req.int(4),
                                "stderr_config": req.int(5), "pty_info": pty}) + "\n")
        sb.execs[exec_id] = Exec(sb, exec_id, argv, req.map(12), workdir, timeout, pty)
    f = faults().get("terminate_on_exec")
    if f and f.get("match") in argv and take("terminate_on_exec"):
        t = threading.Timer(f.get("after", 1.0), sb.terminate)
        t.daemon = True
        t.start()
    return b""


def get_exec(sb, exec_id):
    e = sb.execs.get(exec_id)
    if not e:
        raise Abort(grpc.StatusCode.NOT_FOUND, "exec %s not found" % exec_id)
    return e


def TaskExecStdioRead(req, ctx, m):
    sb = router_sandbox(ctx, m, req.str(1))
    e = get_exec(sb, req.str(2))
    off = req.int(3)
    fd = req.int(4)
    if fd not in (0, 1):
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "bad file descriptor")
    drop = take("drop_stream")
    sent = 0
    while True:
        with COND:
            while (len(e.out[fd]) <= off and not e.eof[fd] and sb.result is None
                   and ctx.is_active()):
                COND.wait(0.5)
            if sb.result is not None:
                raise Abort(grpc.StatusCode.NOT_FOUND, "task finished")
            if not ctx.is_active():
                return
            chunk = bytes(e.out[fd][off:off + 65536])
            at_eof = e.eof[fd] and off + len(chunk) >= len(e.out[fd])
        if chunk:
            if drop and sent:
                # drop mid-stream after at least one chunk: resume by offset
                raise Abort(grpc.StatusCode.UNAVAILABLE, "injected stream drop")
            if drop:
                chunk = chunk[:max(1, len(chunk) // 2)]
            off += len(chunk)
            sent += 1
            yield pb.f_bytes(1, chunk)
            continue
        if at_eof:
            return


def TaskExecWait(req, ctx, m):
    sb = router_sandbox(ctx, m, req.str(1))
    e = get_exec(sb, req.str(2))
    end = time.time() + max(min((ctx.time_remaining() or 55) - 1, 55), 0.1)
    with COND:
        while not e.done() and sb.result is None and time.time() < end and ctx.is_active():
            COND.wait(0.5)
        if sb.result is not None:
            raise Abort(grpc.StatusCode.NOT_FOUND, "task finished")
        if e.signal is not None:
            return pb.f_varint_always(2, e.signal)
        if e.code is not None:
            return pb.f_varint_always(1, e.code)
        return b""


def TaskExecStdinWrite(req, ctx, m):
    sb = router_sandbox(ctx, m, req.str(1))
    e = get_exec(sb, req.str(2))
    off, data, eof = req.int(3), req.bytes(4), bool(req.int(5))
    with LOCK:
        if e.stdin_closed:
            if eof and not data:
                return b""  # duplicate EOF is ignored
            raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "stdin closed")
        if off != e.stdin_off:
            raise Abort(grpc.StatusCode.FAILED_PRECONDITION,
                        "offset %d, expected %d" % (off, e.stdin_off))
        if e.done() and data:
            raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "process exited")
    try:
        if e.pty is not None:
            # typed at the terminal; its input has no end of its own to
            # close (the typed EOF character is the line discipline's)
            e.type_in(data)
        else:
            if data:
                e.proc.stdin.write(data)
                e.proc.stdin.flush()
            if eof:
                e.proc.stdin.close()
    except (BrokenPipeError, ValueError, OSError):
        with LOCK:
            e.stdin_closed = True
        raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "process exited")
    with LOCK:
        e.stdin_off += len(data)
        e.stdin_closed = e.stdin_closed or eof
    return b""


def TaskExecPoll(req, ctx, m):
    sb = router_sandbox(ctx, m, req.str(1))
    e = get_exec(sb, req.str(2))
    if e.signal is not None:
        return pb.f_varint_always(2, e.signal)
    if e.code is not None:
        return pb.f_varint_always(1, e.code)
    return b""


# ---------------------------------------------------------------- wiring

def wrap(method, fn, router, stream):
    full = "/%s/%s" % (ROUTER if router else API, method)

    def run(raw, ctx):
        m = md(ctx)
        log_call(method, m)
        common_faults(full)
        req = pb.Msg(raw)
        if router:
            return fn(req, ctx, m)
        check_api_auth(ctx, m)
        return fn(req, ctx)

    def abort(ctx, a):
        if a.details is not None:
            ctx.set_trailing_metadata((("grpc-status-details-bin", a.details),))
        ctx.abort(a.code, a.message)

    if stream:
        def handler(raw, ctx):
            try:
                yield from run(raw, ctx)
            except Abort as a:
                abort(ctx, a)
        return grpc.unary_stream_rpc_method_handler(handler)

    def handler(raw, ctx):
        try:
            return run(raw, ctx)
        except Abort as a:
            abort(ctx, a)
    return grpc.unary_unary_rpc_method_handler(handler)


def make_tls(state):
    """A CA and a server certificate it signed for localhost (and
    127.0.0.1), as a Modal proxy or test cluster of one's own would have:
    STATE/tls/ca.pem is what a client must be told to trust."""
    d = os.path.join(state, "tls")
    os.makedirs(d, exist_ok=True)
    ca, cakey = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    key, csr, crt = os.path.join(d, "srv.key"), os.path.join(d, "srv.csr"), os.path.join(d, "srv.pem")
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n")
    q = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "check": True}
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    subprocess.run(["openssl", "req", "-x509"] + ec + ["-days", "2",
                    "-subj", "/CN=fake Modal test CA", "-keyout", cakey, "-out", ca,
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign"], **q)
    subprocess.run(["openssl", "req"] + ec + ["-subj", "/CN=localhost",
                    "-keyout", key, "-out", csr], **q)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey,
                    "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", crt], **q)
    with open(key, "rb") as k, open(crt, "rb") as c:
        return grpc.ssl_server_credentials([(k.read(), c.read())])


def main():
    global URL
    # A vendor's commands start with every signal at its default; a
    # background start of this fake from a shell ignored SIGINT and SIGQUIT,
    # and its children would inherit that.
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    os.makedirs(os.path.join(STATE, "sandboxes"), exist_ok=True)
    api = {n: wrap(n, f, False, n == "ImageJoinStreaming") for n, f in [
        ("AppGetOrCreate", AppGetOrCreate), ("EnvironmentGetOrCreate", EnvironmentGetOrCreate),
        ("ImageGetOrCreate", ImageGetOrCreate), ("ImageJoinStreaming", ImageJoinStreaming),
        ("SandboxCreate", SandboxCreate), ("SandboxGetTaskId", SandboxGetTaskId),
        ("TaskGetCommandRouterAccess", TaskGetCommandRouterAccess),
        ("SandboxTerminate", SandboxTerminate), ("SandboxWait", SandboxWait),
        ("SandboxList", SandboxList), ("SandboxGetFromName", SandboxGetFromName)]}
    router = {n: wrap(n, f, True, n == "TaskExecStdioRead") for n, f in [
        ("TaskExecStart", TaskExecStart), ("TaskExecStdioRead", TaskExecStdioRead),
        ("TaskExecWait", TaskExecWait), ("TaskExecStdinWrite", TaskExecStdinWrite),
        ("TaskExecPoll", TaskExecPoll)]}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=256),
                         options=[("grpc.max_receive_message_length", 100 << 20),
                                  ("grpc.max_send_message_length", 100 << 20)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(API, api),
                                     grpc.method_handlers_generic_handler(ROUTER, router)))
    addr = "127.0.0.1:%s" % os.environ.get("FAKE_MODAL_PORT", "0")
    if TLS:
        port = server.add_secure_port(addr, make_tls(STATE))
        URL = "https://localhost:%d" % port
    else:
        port = server.add_insecure_port(addr)
        URL = "http://127.0.0.1:%d" % port
    server.start()
    with open(os.path.join(STATE, "url"), "w") as f:
        f.write(URL + "\n")
    print(URL, flush=True)

    def stop(*_):
        for sb in list(SANDBOXES.values()):
            sb.terminate()
        server.stop(0)
        os._exit(0)  # the worker threads are not daemons: don't wait for them
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
