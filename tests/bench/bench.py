#!/usr/bin/env python3
"""sbfs benchmark suite (issue 5, item 3). Run it through tests/bench/run;
see tests/bench/README.md. Installs nothing; skips a peer that is missing.

Configurations: the local disk directly, sbfs default mode and sbfs
write-back mode (-o writeback) at 0 ms and at --latency-ms injected
latency (-o inject_latency_ms=N), sshfs against a private sshd on loopback
(directly at 0 ms, through delay_relay.py at N ms RTT).
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SBFS = os.environ.get("SBFS", os.path.join(ROOT, "build", "daemon", "sbfs"))
SBFS_OPTS = []  # --sbfs-opts: another backend (its credentials in the environment)
SBEXEC = os.environ.get("SBEXEC", os.path.join(ROOT, "build", "shim", "sbexec"))
FUSERMOUNT = shutil.which("fusermount3") or "fusermount3"

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- cleanup

class Cleanup:
    def __init__(self):
        self.mounts = []   # mount points to unmount
        self.pids = []     # processes to kill (by pid), last first
        self.cmds = []     # argvs to run then (an engine to stop)
        self.dirs = []

    def run(self):
        for m in reversed(self.mounts):
            unmount(m)
        self.mounts.clear()
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        self.pids.clear()
        for argv in reversed(self.cmds):
            subprocess.run(argv, capture_output=True)
        self.cmds.clear()
        for d in reversed(self.dirs):
            shutil.rmtree(d, ignore_errors=True)
        self.dirs.clear()


CLEAN = Cleanup()


def clean_on_signals():
    """SIGINT, SIGTERM, SIGHUP: clean up, then exit as killed."""
    def on_signal(sig, _frm):
        log(f"bench: signal {sig}: cleaning up")
        CLEAN.run()
        sys.exit(128 + sig)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)


def emit(text, out):
    """The report on stdout and, when asked, in the file out."""
    print()
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)


def unmount(m, timeout=120):
    if not os.path.ismount(m):
        return
    r = subprocess.run(["timeout", str(timeout), FUSERMOUNT, "-u", m],
                       capture_output=True, text=True)
    if r.returncode != 0 and os.path.ismount(m):
        log(f"  unmount {m} failed ({r.stderr.strip()}); lazy unmount")
        subprocess.run(["timeout", "30", FUSERMOUNT, "-u", "-z", m],
                       capture_output=True)


def wait_pid_gone(pid, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------- helpers

def sh(script, cwd, timeout, env=None):
    """Run a bash snippet under timeout(1); returns (seconds, rc, stderr)."""
    e = dict(os.environ)
    e.update(GIT_ENV)
    if env:
        e.update(env)
    t0 = time.monotonic()
    r = subprocess.run(["timeout", "-k", "5", str(timeout), "bash", "-c",
                        "set -e\n" + script], cwd=cwd, env=e,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, errors="replace")
    return time.monotonic() - t0, r.returncode, r.stderr.strip()


def sbfs_status(mnt):
    r = subprocess.run(["timeout", "30", SBFS, "status", "--json", mnt],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def calls_delta(before, after, field="calls"):
    """Per-kind increase of a status counter object: .calls (backend
    calls) or .requests (what the kernel asked the daemon)."""
    if not before or not after or field not in after:
        return None
    b, a = before.get(field, {}), after.get(field, {})
    return {k: a.get(k, 0) - b.get(k, 0) for k in a
            if k != "total" and a.get(k, 0) - b.get(k, 0)}


def journal_delta(before, after):
    """Write-back journal entries made and folder fsyncs that made them
    durable during a step, as 'F fsyncs / E entries', or None."""
    try:
        b, a = before["writeback"], after["writeback"]
        e = a["journal_entries"] - b["journal_entries"]
        f = a["journal_fsyncs"] - b["journal_fsyncs"]
    except (KeyError, TypeError):
        return None
    return f"{f} fsyncs / {e} entries" if e else None


def fmt_calls(d, n=3):
    if d is None:
        return "?"
    tot = sum(d.values())
    if not tot:
        return "0"
    top = sorted(d.items(), key=lambda kv: -kv[1])[:n]
    return f"{tot} (" + ", ".join(f"{k} {v}" for k, v in top) + ")"


def fmt_s(v):
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    return f"{v:.2f}" if v < 100 else f"{v:.0f}"


# ---------------------------------------------------------------- workloads

PWRITERS = 8  # the parallel creates: closes that arrive together

# The random reads: offsets from a fixed seed, one read after another (as
# a database's lookups), so each one a cache cannot answer is a round trip.
RANDOM_READS = 200
RANDOM_READER = """import os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
blocks = os.fstat(fd).st_size // 4096
rng = random.Random(1)
for _ in range(int(sys.argv[2])):
    assert len(os.pread(fd, 4096, rng.randrange(blocks) * 4096)) == 4096
"""

# The limit of each workload: the round trips its semantics demand, one
# after another, at the least (each times the latency, plus the local
# disk's time for the same work). Write-back and a watched cache make
# everything else avoidable:
#   creates, cp, tar -x, git add/commit: 1: every file in one batch,
#   landed by sync;
#   git status, grep, ls warm: 0: nothing changed since the mount listed
#   and read it (git's index lock is made and removed before it need
#   reach the sandbox);
#   ls cold, ls -f cold: 1 listing of a directory the mount never saw;
#   dd write: 1 (fsync); dd read, first byte: 1, the data streamed;
#   random reads: 1 each, as the reader asks one after another;
#   saves: 1 per save (its fsync must land it); rm -rf: 1 batch.
#   the outbound tree (made in the sandbox, read cold on the host): 1 per
#   directory level, each level's listings (and small files) asked
#   together; the big file out: 1, the data streamed. The bytes at the
#   link's rate are not counted: on `local` the link is the host's memory.
OUT_TREE_KEYS = ("outfind", "outdu", "outgrep", "outcat", "outtar", "outcp")


def limit_trips(key, p):
    if key == "rand4k":
        return RANDOM_READS
    if key in OUT_TREE_KEYS:
        return p["out_levels"]
    if key == "saves":
        return p["saves"]
    return 0 if key in ("gitst", "grep", "lswarm") else 1


def workloads(p):
    """(key, label, script, oob_setup): scripts run with cwd = the target
    directory; oob_setup (run out of band, untimed, before the step) makes
    data the mount has never seen: through sbexec on sbfs, in the backing
    directory for sshfs and the local disk."""
    n, nls, mib, saves = p["creates"], p["ls_files"], p["mib"], p["saves"]
    blob = "x" * 4095
    return [
        ("create", f"{n} × 4 KiB creates (shell loop)",
         f'd=$(printf "%s\\n" "{blob}")\nmkdir creates\ncd creates\n'
         f'for i in $(seq {n}); do printf "%s" "$d" > f$i; done', None),
        ("pcreate", f"{n} × 4 KiB creates, {PWRITERS} shell loops at once",
         f'd=$(printf "%s\\n" "{blob}")\nmkdir pcreates\ncd pcreates\npids=\n'
         f'for w in $(seq {PWRITERS}); do\n'
         f'  (for i in $(seq {n // PWRITERS}); do printf "%s" "$d" > w$w-$i; done) &\n'
         f'  pids="$pids $!"\ndone\nfor p in $pids; do wait $p; done', None),
        ("cp", f"cp -r tree ({p['tree_files']} files, "
               f"{p['tree_bytes'] / 1e6:.1f} MB)", f'cp -r "$SRC" tree', None),
        # tar sets each file's times after closing it, and (as root)
        # its owner; a user's tar sets only the times.
        ("untar", f"tar -x of the tree, times kept ({p['tree_files']} files)",
         'mkdir untar && tar --no-same-owner -xf "$SRCTAR" -C untar', None),
        ("git", "git init && add -A && commit",
         "cd tree && git init -q && git add -A && git commit -q -m bench", None),
        ("gitst", "git status", "cd tree && git status --porcelain", None),
        ("grep", "grep -r over the tree (incl. .git)",
         "grep -r -n BENCHTOKEN tree >/dev/null || [ $? -eq 1 ]", None),
        ("lscold", f"ls -l {nls} files, cold", "ls -l lsdir",
         f"mkdir lsdir && cd lsdir && for i in $(seq {nls}); do : > f$i; done"),
        ("lswarm", f"ls -l {nls} files, warm", "ls -l lsdir", None),
        ("ddw", f"dd write {mib} MiB (bs=4M, fsync)",
         f"dd if=/dev/zero of=big.w bs=4M count={mib // 4} conv=fsync status=none",
         None),
        ("ddr", f"dd read {mib} MiB (cold, bs=4M)",
         "dd if=big.r of=/dev/null bs=4M status=none",
         f"rm -f big.w && dd if=/dev/zero of=big.r bs=4M count={mib // 4} status=none"),
        ("ddrhost", f"dd read {mib} MiB (cold, host caches dropped too)",
         "dd if=bigh.r of=/dev/null bs=4M status=none",
         f"rm -f big.r && dd if=/dev/zero of=bigh.r bs=4M count={mib // 4} status=none"),
        ("ttfb", f"first byte of a cold {mib} MiB file",
         "head -c 1 first.bin >/dev/null",
         f"dd if=/dev/zero of=first.bin bs=4M count={mib // 4} status=none"),
        ("rand4k", f"{RANDOM_READS} random 4 KiB reads of a cold {mib} MiB file",
         f"python3 -c {shquote(RANDOM_READER)} rand.bin {RANDOM_READS}",
         f"dd if=/dev/zero of=rand.bin bs=4M count={mib // 4} status=none"),
    ] + [
        (f"list{n_}", f"ls -f of {n_:,} names, cold", f"ls -f list{n_} >/dev/null",
         f"mkdir list{n_} && cd list{n_} && i=0; "
         f'while [ $i -lt {n_} ]; do : > f$i; i=$((i+1)); done')
        for n_ in p["list_sizes"]
    ] + [
        ("saves", f"{saves} editor saves (tmp, fsync, mv)",
         'rm -f big.r bigh.r first.bin rand.bin\n'
         f'for i in $(seq {saves}); do printf "%s %s\\n" "$i" "$EDIT" > .edit.txt.tmp; '
         'sync .edit.txt.tmp; mv -f .edit.txt.tmp edit.txt; done', None),
        ("rm", "rm -rf tree + creates", "rm -rf tree creates edit.txt",
         "rm -rf lsdir pcreates untar " + " ".join(f"list{n_}" for n_ in p["list_sizes"])),
    ] + outbound(p)


def outbound(p):
    """What the sandbox made, read cold on the host: each workload gets a
    tree of its own, made out of band (by sbexec on sbfs) just before it,
    so the mount has never seen it; the trees before it go."""
    tree = (f"{p['out_files']:,} files, {p['out_made']} dirs, "
            f"{p['out_bytes'] / 1e6:.0f} MB")
    gen = (f"python3 -c {shquote(GEN_TREE)} out_$K --files {p['out_files']} "
           f"--dirs {p['out_dirs']} >/dev/null")
    steps = [
        # (no "|" in a label: it ends a Markdown table's cell)
        ("outfind", f"find (counted by wc -l) of a tree made in the sandbox ({tree}), cold",
         "find out_outfind | wc -l >/dev/null"),
        ("outdu", "du -s of such a tree, cold", "du -s out_outdu >/dev/null"),
        ("outgrep", "grep -r of such a tree, cold",
         "grep -r BENCHTOKEN out_outgrep >/dev/null"),
        ("outcat", "cat of every file of such a tree, cold",
         "find out_outcat -type f -exec cat {} + >/dev/null"),
        # through a pipe: GNU tar reads nothing when the archive is /dev/null
        ("outtar", "tar -cf - of such a tree, cold", "tar -cf - out_outtar | cat >/dev/null"),
        ("outcp", "cp -r of such a tree out to the local disk, cold",
         'cp -r out_outcp "$OUTDST/tree"'),
    ]
    made = [(k, label, script, "rm -rf out_*\n" + gen.replace("$K", k))
            for k, label, script in steps]
    return made + [
        ("outbig", f"cp of a {p['out_mib']} MiB file made in the sandbox out to the local disk, cold",
         'cp out.big "$OUTDST/big"',
         f"rm -rf out_* && dd if=/dev/zero of=out.big bs=4M count={p['out_mib'] // 4} status=none"),
    ]


with open(os.path.join(HERE, "gen_tree.py")) as _f:
    GEN_TREE = _f.read()

# ---------------------------------------------------------------- targets

class Target:
    name = "?"
    sbfs = False

    def setup(self):
        """Returns None when ready, else an 'n/a ...' reason."""
        return None

    def teardown(self):
        pass

    def barrier(self):
        """Shell lines appended to every timed script: write-back mode is
        timed until its uploads have landed, not only until close()."""
        return ""

    def oob(self, script, timeout):
        return sh(script, self.path, timeout)


class LocalDisk(Target):
    def __init__(self, base):
        self.name = "local disk"
        self.path = os.path.join(base, "localdisk")

    def setup(self):
        os.makedirs(self.path)


class Sbfs(Target):
    sbfs = True

    def __init__(self, base, latency, writeback, idx):
        self.latency, self.writeback = latency, writeback
        self.name = f"sbfs{' wb' if writeback else ''} {latency} ms"
        self.path = os.path.join(base, f"mnt-sbfs{idx}")
        self.pid = None

    def setup(self):
        os.makedirs(self.path, exist_ok=True)
        opts = SBFS_OPTS + [f"inject_latency_ms={self.latency}"]
        if self.writeback:
            opts.append("writeback")
        r = subprocess.run(["timeout", "120", SBFS, "-o", ",".join(opts), self.path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            msg = (r.stderr.strip().splitlines() or ["?"])[-1]
            if self.writeback and "writeback" in msg:
                return f"n/a (not implemented: {msg})"
            return f"n/a (mount failed: {msg})"
        CLEAN.mounts.append(self.path)
        st = sbfs_status(self.path)
        self.pid = st and st.get("pid")
        return None

    def barrier(self):
        if not self.writeback:
            return ""
        return f'\n"{SBFS}" sync "{self.path}"'

    def teardown(self):
        unmount(self.path)
        if self.path in CLEAN.mounts:
            CLEAN.mounts.remove(self.path)
        if self.pid and not wait_pid_gone(self.pid, 60):
            log(f"  sbfs daemon {self.pid} still alive after unmount; SIGTERM")
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def oob(self, script, timeout):
        return sh(f'timeout {timeout} "{SBEXEC}" -m "{self.path}" -- '
                  f"sh -c {shquote(script)}", self.path, timeout + 10)


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"


class Sshd:
    """A private sshd on a loopback high port with throwaway keys."""

    def __init__(self, base, port):
        self.dir = os.path.join(base, "sshd")
        self.port = port
        self.relays = {}

    def start(self):
        S = self.dir
        os.makedirs(S, mode=0o700)
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privsep dir
        for k in ("host", "client"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "",
                            "-f", f"{S}/{k}_ed25519"], check=True, timeout=30)
        shutil.copy(f"{S}/client_ed25519.pub", f"{S}/authorized_keys")
        os.chmod(f"{S}/authorized_keys", 0o600)
        with open(f"{S}/sshd_config", "w") as f:
            f.write(f"""ListenAddress 127.0.0.1
Port {self.port}
HostKey {S}/host_ed25519
PidFile {S}/sshd.pid
AuthorizedKeysFile {S}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
""")
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        subprocess.run([sshd, "-t", "-f", f"{S}/sshd_config"], check=True, timeout=30)
        subprocess.run([sshd, "-f", f"{S}/sshd_config", "-E", f"{S}/sshd.log"],
                       check=True, timeout=30)
        for _ in range(100):
            if os.path.exists(f"{S}/sshd.pid"):
                break
            time.sleep(0.05)
        CLEAN.pids.append(int(open(f"{S}/sshd.pid").read()))

    def relay(self, rtt, duration):
        """Port that adds rtt ms (0: sshd itself)."""
        if rtt == 0:
            return self.port
        if rtt not in self.relays:
            lp = self.port + 1 + len(self.relays)
            p = subprocess.Popen([sys.executable, os.path.join(HERE, "delay_relay.py"),
                                  "--listen", str(lp), "--to", str(self.port),
                                  "--rtt-ms", str(rtt), "--duration", str(duration),
                                  "--max-conns", "8"],
                                 stderr=open(os.path.join(self.dir, f"relay{rtt}.log"), "w"))
            CLEAN.pids.append(p.pid)
            time.sleep(0.5)
            self.relays[rtt] = lp
        return self.relays[rtt]


class Sshfs(Target):
    def __init__(self, base, sshd, rtt, idx, duration):
        self.name = f"sshfs {rtt} ms"
        self.sshd, self.rtt, self.duration = sshd, rtt, duration
        self.path = os.path.join(base, f"mnt-sshfs{idx}")
        self.src = os.path.join(base, f"sshfs-src{idx}")

    def setup(self):
        os.makedirs(self.path)
        os.makedirs(self.src)
        port = self.sshd.relay(self.rtt, self.duration)
        S = self.sshd.dir
        r = subprocess.run(
            ["timeout", "60", "sshfs", f"root@127.0.0.1:{self.src}", self.path,
             "-o", f"port={port},IdentityFile={S}/client_ed25519,IdentitiesOnly=yes,"
                   "StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,"
                   "LogLevel=ERROR,BatchMode=yes"],
            capture_output=True, text=True)
        if r.returncode != 0:
            return f"n/a (sshfs mount failed: {r.stderr.strip()[-200:]})"
        CLEAN.mounts.append(self.path)
        return None

    def teardown(self):
        unmount(self.path)
        if self.path in CLEAN.mounts:
            CLEAN.mounts.remove(self.path)

    def oob(self, script, timeout):
        return sh(script, self.src, timeout)


class Rclone(Target):
    """rclone mount over SFTP to the same private sshd, with its full VFS
    cache (writes return at once, uploads follow in the background):
    the peer closest to sbfs's write-back. Each step is timed until its
    uploads have settled (rclone's remote control, vfs/stats), and then
    every file the mount shows is looked for on the remote."""

    def __init__(self, base, sshd, rtt, idx, duration):
        self.name = f"rclone {rtt} ms"
        self.sshd, self.rtt, self.duration = sshd, rtt, duration
        self.path = os.path.join(base, f"mnt-rclone{idx}")
        self.src = os.path.join(base, f"rclone-src{idx}")
        self.cache = os.path.join(base, f"rclone-cache{idx}")
        self.rc = f"127.0.0.1:{RCLONE_RC_PORT + idx}"
        self.proc = None

    def setup(self):
        for d in (self.path, self.src, self.cache):
            os.makedirs(d)
        port = self.sshd.relay(self.rtt, self.duration)
        S = self.sshd.dir
        self.proc = subprocess.Popen(
            ["rclone", "mount", f":sftp:{self.src}", self.path,
             "--sftp-host", "127.0.0.1", "--sftp-port", str(port),
             "--sftp-user", "root", "--sftp-key-file", f"{S}/client_ed25519",
             "--vfs-cache-mode", "full", "--cache-dir", self.cache,
             "--rc", "--rc-addr", self.rc, "--rc-no-auth",
             "--log-file", os.path.join(self.cache, "rclone.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        CLEAN.pids.append(self.proc.pid)
        for _ in range(300):
            if os.path.ismount(self.path):
                CLEAN.mounts.append(self.path)
                return None
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        return f"n/a (rclone mount failed: see {self.cache}/rclone.log)"

    def barrier(self):
        # Until nothing is queued or uploading: what sbfs wb's `sbfs sync`
        # waits for.
        return (f'\nwhile :; do s=$(rclone rc --url http://{self.rc}/ vfs/stats) || exit 1; '
                'echo "$s" | python3 -c "import json,sys; d=json.load(sys.stdin)[\'diskCache\']; '
                'sys.exit(d[\'uploadsInProgress\'] + d[\'uploadsQueued\'] > 0)" && break; '
                'sleep 0.05; done')

    def check(self):
        """Files the mount shows that the remote lacks (or holds at
        another size), after the step's uploads settled."""
        shown, missing = 0, 0
        for root, _dirs, files in os.walk(self.path):
            for f in files:
                p = os.path.join(root, f)
                rel = os.path.relpath(p, self.path)
                try:
                    size = os.lstat(p).st_size
                except OSError:
                    continue
                shown += 1
                try:
                    if os.lstat(os.path.join(self.src, rel)).st_size != size:
                        missing += 1
                except OSError:
                    missing += 1
        return shown, missing

    def teardown(self):
        unmount(self.path)
        if self.path in CLEAN.mounts:
            CLEAN.mounts.remove(self.path)
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def oob(self, script, timeout):
        """Then makes rclone forget its directory cache (kept 5 minutes
        by default), so the step sees the data made out of band."""
        t, rc, err = sh(script, self.src, timeout)
        if rc == 0:
            r = subprocess.run(["rclone", "rc", "--url", f"http://{self.rc}/", "vfs/forget"],
                               capture_output=True, timeout=60)
            if r.returncode != 0:
                rc, err = r.returncode, ("rclone rc vfs/forget: "
                                         + r.stderr.decode(errors="replace")[:200])
        return t, rc, err


RCLONE_RC_PORT = 22700
# The steps after which the rclone peer is checked for files it lost.
WRITE_STEPS = ("create", "pcreate", "cp", "untar", "git", "ddw", "saves")


# ---------------------------------------------------------------- runs

# Read with the host's page cache emptied after the setup wrote the file,
# so every configuration reads it from the disk (the others read what the
# setup left in the host's memory).
HOST_COLD = ("ddrhost",)


def drop_host_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        log(f"  cannot drop the host's caches ({e}): that row reads warm")


def run_target(t, p, timeout, results, calls, requests, journal, lost):
    log(f"== {t.name}")
    why = t.setup()
    if why:
        log(f"  {why}")
        for w in workloads(p):
            results[(t.name, w[0])] = why.split(" (")[0] + (
                " (not implemented)" if "not implemented" in why else "")
        return why
    outdst = os.path.join(p["base"], "outdst")
    env = {"SRC": p["src"], "SRCTAR": p["srctar"], "EDIT": "y" * 8000, "OUTDST": outdst}
    try:
        for key, label, script, oob in workloads(p):
            if p.get("workloads") and key not in p["workloads"]:
                continue
            if oob:
                _, rc, err = t.oob(oob, timeout)
                if rc != 0:
                    log(f"  {key}: setup failed rc={rc}: {err[-300:]}")
            if key in HOST_COLD:
                drop_host_caches()
            shutil.rmtree(outdst, ignore_errors=True)
            os.makedirs(outdst)
            before = sbfs_status(t.path) if t.sbfs else None
            secs, rc, err = sh(script + t.barrier(), t.path, timeout, env)
            after = sbfs_status(t.path) if t.sbfs else None
            if rc == 124 or rc == 137:
                results[(t.name, key)] = f">{timeout} (timeout)"
            elif rc != 0:
                results[(t.name, key)] = f"failed rc={rc}"
                log(f"  {key}: rc={rc}: {err[-300:]}")
            else:
                results[(t.name, key)] = secs
            if isinstance(t, Rclone) and rc == 0 and key in WRITE_STEPS:
                shown, missing = t.check()
                lost[(t.name, key)] = f"{missing} of {shown}"
            if t.sbfs:
                calls[(t.name, key)] = calls_delta(before, after)
                requests[(t.name, key)] = calls_delta(before, after, "requests")
                jd = journal_delta(before, after)
                if jd:
                    journal[(t.name, key)] = jd
            log(f"  {label}: {fmt_s(results[(t.name, key)])} s"
                + (f"  missing on the remote {lost[(t.name, key)]}" if (t.name, key) in lost else "")
                + (f"  calls {fmt_calls(calls[(t.name, key)], 99)}"
                   f"  requests {fmt_calls(requests[(t.name, key)], 99)}" if t.sbfs else "")
                + (f"  journal {journal[(t.name, key)]}" if (t.name, key) in journal else ""))
    finally:
        t.teardown()
        shutil.rmtree(outdst, ignore_errors=True)
    return None


def vm_hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])  # kB
    except OSError:
        return None
    return None


def find_init_pid(daemon_pid):
    """local backend: the sandbox's first process is bwrap's child of
    bwrap's child of the daemon (what bwrap --info-fd reports)."""
    def children(pid):
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []
    for c in children(daemon_pid):
        try:
            comm = open(f"/proc/{c}/comm").read().strip()
        except OSError:
            continue
        if comm == "bwrap":
            kids = children(c)
            if kids:
                return kids[0]
    return None


def raw_exec_argv(init, mapped):
    """The local backend's exec argv (backends/local/local_exec.c): in a
    mapped id range the command runs as the namespace's root, with the
    capabilities root of its own range keeps; unmapped, with our ids."""
    return ["/usr/bin/nsenter", "-t", str(init), "-U", "-m", "-p", "-n", "-i",
            "-u", "-C", "-r", "-w",
            "--setuid=0" if mapped else "--preserve-credentials", "--",
            "/usr/bin/setpriv",
            "--bounding-set=-all,+chown,+fowner,+fsetid,+dac_override" if mapped
            else "--bounding-set=-all", "--inh-caps=-all",
            "--no-new-privs", "--", "/usr/bin/env", "-i", "-C", "/workspace",
            "--", "PATH=/usr/bin:/bin", "true"]


def raw_exec_ms(init, n):
    """n runs of the backend's own argv, started from here, each in ms;
    or why it could not run."""
    why = "?"
    for mapped in (True, False):
        argv = raw_exec_argv(init, mapped)
        if subprocess.run(argv, capture_output=True, timeout=30).returncode != 0:
            why = subprocess.run(argv, capture_output=True, timeout=30).stderr.decode(
                errors="replace")[:200]
            continue
        ms = []
        for _ in range(n):
            t0 = time.monotonic()
            subprocess.run(argv, capture_output=True, timeout=30, check=True)
            ms.append((time.monotonic() - t0) * 1000)
        return ms
    return why


def extras(base, p, timeout, out):
    """sbexec true vs the raw exec, and the daemon's peak RSS copying a
    big file in and out, on a fresh sbfs 0 ms mount."""
    t = Sbfs(base, 0, False, "x")
    why = t.setup()
    if why:
        out.append(f"sbexec / RSS: {why}")
        return
    try:
        n = p["exec_n"]

        def sbexec_true_ms():
            """n runs of `sbexec true`, each in ms."""
            ms = []
            for _ in range(n):
                t0 = time.monotonic()
                subprocess.run(["timeout", "30", SBEXEC, "-m", t.path, "--", "true"],
                               cwd=t.path, check=False)
                ms.append((time.monotonic() - t0) * 1000)
            return ms

        st0 = sbfs_status(t.path)
        times = sbexec_true_ms()
        st1 = sbfs_status(t.path)
        d = calls_delta(st0, st1)
        line = (f"`sbexec true` × {n} (0 ms): mean {statistics.mean(times):.1f} ms, "
                f"median {statistics.median(times):.1f} ms, "
                f"backend calls per run {sum(d.values()) / n if d else '?'}")
        raw = None
        init = find_init_pid(t.pid) if st0 and st0.get("backend") == "local" else None
        if init:
            raw = raw_exec_ms(init, n)
            if isinstance(raw, str):
                line += f"; raw exec failed: {raw}"
                raw = None
        if raw:
            line += (f"; raw exec (the local backend's own nsenter+setpriv+env argv, "
                     f"run from here) mean {statistics.mean(raw):.1f} ms, median "
                     f"{statistics.median(raw):.1f} ms; sbexec overhead (median) "
                     f"{statistics.median(times) - statistics.median(raw):+.1f} ms")
        elif not init:
            line += "; raw exec not measurable in isolation for this backend"
        out.append(line)
        log("  " + line)

        # The cost of the cache an sbexec must keep coherent: N entries
        # listed (and so cached) before the runs.
        sizes = []
        made = 0
        for want in (1000, 10000):
            subprocess.run(["timeout", "120", SBEXEC, "-m", t.path, "--", "sh", "-c",
                            'mkdir -p cache && cd cache && i=$1; '
                            'while [ "$i" -lt "$2" ]; do : > "e$i"; i=$((i+1)); done',
                            "sh", str(made), str(want)],
                           cwd=t.path, check=False, capture_output=True)
            made = want
            subprocess.run(["ls", "-l", os.path.join(t.path, "cache")],
                           capture_output=True, check=False)
            runs = sbexec_true_ms()
            sizes.append(f"{want:,} entries cached: median {statistics.median(runs):.1f} ms"
                         + (f" (overhead {statistics.median(runs) - statistics.median(raw):+.1f} ms)"
                            if raw else ""))
        st2 = sbfs_status(t.path)
        line = (f"`sbexec true` × {n} (0 ms) with the cache filled: "
                + "; ".join(sizes)
                + f" (empty cache: median {statistics.median(times):.1f} ms; "
                f"mount watched: {(st2 or {}).get('watched', '?')})")
        out.append(line)
        log("  " + line)

        mib = p["rss_mib"]
        big = os.path.join(base, "rss.src")
        sh(f"dd if=/dev/urandom of={big} bs=4M count={mib // 4} status=none",
           base, timeout)
        hwm0 = vm_hwm(t.pid)
        st0 = sbfs_status(t.path)
        s_in, rc1, e1 = sh(f'cp {big} "{t.path}/rss.bin"', base, timeout)
        hwm1 = vm_hwm(t.pid)
        subprocess.run(["timeout", "30", SBFS, "refresh", t.path], capture_output=True)
        s_out, rc2, e2 = sh(f'cp "{t.path}/rss.bin" {big}.back && cmp {big} {big}.back',
                            base, timeout)
        hwm2 = vm_hwm(t.pid)
        st1 = sbfs_status(t.path)
        os.unlink(big)
        if os.path.exists(big + ".back"):
            os.unlink(big + ".back")
        line = (f"Daemon peak RSS (VmHWM) copying {mib} MiB: before {hwm0 // 1024 if hwm0 else '?'} MiB, "
                f"after cp in ({s_in:.1f} s{'' if rc1 == 0 else ' FAILED ' + e1[-100:]}) "
                f"{hwm1 // 1024 if hwm1 else '?'} MiB, after cp out + cmp "
                f"({s_out:.1f} s{'' if rc2 == 0 else ' FAILED ' + e2[-100:]}) "
                f"{hwm2 // 1024 if hwm2 else '?'} MiB; calls {fmt_calls(calls_delta(st0, st1))}")
        out.append(line)
        log("  " + line)
    finally:
        t.teardown()


# ---------------------------------------------------------------- report

def report(p, configs, results, calls, requests, journal, lost, notes, extra_lines,
           started):
    lat = p["latency"]
    wl = workloads(p)
    L = []
    uname = os.uname()
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    L.append(f"sbfs benchmark ({'quick' if p['quick'] else 'full'}), "
             f"{time.strftime('%Y-%m-%d %H:%M %Z', time.localtime(started))}, "
             f"{uname.nodename}: {uname.sysname} {uname.release}, {os.cpu_count()} CPUs "
             f"({cpu}), backend local (bubblewrap); {p['build']}; run took "
             f"{(time.monotonic() - p['t0']) / 60:.1f} min.")
    L.append("")
    L.append("Seconds per workload (one run each; lower is better). "
             "ratio = sshfs time / sbfs time at the same latency (> 1: sbfs faster). "
             "limit = the local disk's time + the round trips the workload's semantics "
             "demand × the latency (tests/bench/README.md); sbfs/limit: 1.0× is the best "
             "any remote file system can do.")
    L.append("")
    cols = [c for c in configs]
    head = ["workload"] + cols + [f"sshfs/sbfs {l} ms" for l in (0, lat)] + \
        [f"sshfs/sbfs wb {l} ms" for l in (0, lat)]
    with_rclone = f"rclone {lat} ms" in cols
    if with_rclone:
        head.append(f"rclone/sbfs wb {lat} ms")
    # The limit needs the local disk's time of the same work.
    with_limit = "local disk" in cols
    if with_limit:
        head += [f"limit {lat} ms", f"sbfs/limit {lat} ms", f"sbfs wb/limit {lat} ms"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|---|" + "---:|" * (len(head) - 1))

    def ratio(a, b):
        va, vb = results.get(a), results.get(b)
        if isinstance(va, float) and isinstance(vb, float) and vb > 0:
            return f"{va / vb:.1f}×"
        if isinstance(va, str) and va.startswith(">") and isinstance(vb, float):
            return f">{float(va[1:].split()[0]) / vb:.0f}×"
        return "—"

    for key, label, _, _ in wl:
        row = [label] + [fmt_s(results.get((c, key))) for c in cols]
        for l in (0, lat):
            row.append(ratio((f"sshfs {l} ms", key), (f"sbfs {l} ms", key)))
        for l in (0, lat):
            row.append(ratio((f"sshfs {l} ms", key), (f"sbfs wb {l} ms", key)))
        if with_rclone:
            row.append(ratio((f"rclone {lat} ms", key), (f"sbfs wb {lat} ms", key)))
        if with_limit:
            disk = results.get(("local disk", key))
            limit = (disk + limit_trips(key, p) * lat / 1000
                     if isinstance(disk, float) else None)
            row.append(fmt_s(limit))
            for c in (f"sbfs {lat} ms", f"sbfs wb {lat} ms"):
                v = results.get((c, key))
                row.append(f"{v / limit:.1f}×" if limit and isinstance(v, float) else "—")
        L.append("| " + " | ".join(row) + " |")
    L.append("")
    def table(title, tcols, cell, rows=None):
        """A workload × configuration table; cell(key, col) is its text,
        rows(key) which workloads have a row (default: all)."""
        L.append(title)
        L.append("")
        L.append("| workload | " + " | ".join(tcols) + " |")
        L.append("|---|" + "---|" * len(tcols))
        for key, label, _, _ in wl:
            if rows is None or rows(key):
                L.append("| " + label + " | " + " | ".join(cell(key, c) for c in tcols) + " |")
        L.append("")

    sb = [c for c in cols if c.startswith("sbfs")]
    table("sbfs backend calls per workload (total of `sbfs status --json` .calls "
          "deltas; the three largest kinds):", sb,
          lambda key, c: fmt_calls(calls[(c, key)]) if (c, key) in calls else "—")
    table("sbfs daemon requests per workload (what the kernel could not answer from "
          "its caches: total of `sbfs status --json` .requests deltas; the three "
          "largest kinds):", sb,
          lambda key, c: fmt_calls(requests[(c, key)]) if (c, key) in requests else "—")
    rc = [c for c in cols if c.startswith("rclone")]
    if rc:
        table("rclone: files the mount showed that the remote lacked (or held at "
              "another size) once rclone's uploads had settled after each step:", rc,
              lambda key, c: lost.get((c, key), "—"), lambda key: key in WRITE_STEPS)
    wbc = [c for c in sb if any((c, key) in journal for key, _, _, _ in wl)]
    if wbc:
        table("Write-back journal per workload (folder fsyncs that made its entries "
              "durable before each close returned; fewer fsyncs than entries: closes "
              "that arrived together shared one):", wbc,
              lambda key, c: journal.get((c, key), "—"),
              lambda key: any((c, key) in journal for c in wbc))
    for line in extra_lines:
        L.append(f"- {line}")
    for line in notes:
        L.append(f"- {line}")
    return "\n".join(L) + "\n"


def build_info():
    def git(*args):
        r = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else "?"
    mtime = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.stat(SBFS).st_mtime))
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return (f"commit {git('rev-parse', '--short', 'HEAD')}"
            f"{' + uncommitted changes' if dirty not in ('', '?') else ''}, "
            f"sbfs binary built {mtime}")


def main():
    global SBFS, SBEXEC
    ap = argparse.ArgumentParser(prog="tests/bench/run", description=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="smaller counts (about 5 minutes)")
    ap.add_argument("--latency-ms", type=int, default=50)
    ap.add_argument("--out", help="also write the Markdown table here")
    ap.add_argument("--skip-sshfs", action="store_true")
    ap.add_argument("--skip-extras", action="store_true",
                    help="skip the sbexec latency and peak RSS measurements")
    ap.add_argument("--only", help="comma-separated configurations, e.g. "
                    "'local disk,sbfs 0 ms,sshfs 50 ms'")
    ap.add_argument("--workloads", help="comma-separated workload keys to run "
                    "(create,pcreate,cp,untar,git,gitst,grep,lscold,lswarm,ddw,ddr,ddrhost,ttfb,"
                    "rand4k,list100,list10000,list100000,saves,rm,"
                    "outfind,outdu,outgrep,outcat,outtar,outcp,outbig); "
                    "later ones may need earlier ones (git needs cp)")
    ap.add_argument("--timeout", type=int, default=0,
                    help="per-workload timeout in seconds (default 600, quick 240)")
    ap.add_argument("--workdir", default=os.environ.get("TMPDIR", "/var/tmp"),
                    help="where the temp directory goes (default $TMPDIR or /var/tmp)")
    ap.add_argument("--ssh-port", type=int, default=22622)
    ap.add_argument("--sbfs-opts", default="",
                    help="extra -o options of every sbfs mount, e.g. backend=e2b "
                    "(default: the local backend)")
    a = ap.parse_args()
    SBFS_OPTS[:] = [o for o in a.sbfs_opts.split(",") if o]

    started = time.time()
    q = a.quick
    p = {"quick": q, "latency": a.latency_ms, "t0": time.monotonic(),
         "creates": 200 if q else 1000, "ls_files": 1000, "mib": 64 if q else 256,
         "saves": 10 if q else 50, "tree_n": 60 if q else 282,
         "rss_mib": 256 if q else 1024, "exec_n": 30 if q else 100,
         "list_sizes": (100, 10000) if q else (100, 10000, 100000),
         "out_files": 600 if q else 3000, "out_dirs": 46 if q else 230,
         "out_mib": 64 if q else 200,
         "workloads": [w.strip() for w in a.workloads.split(",")] if a.workloads else None}
    timeout = a.timeout or (240 if q else 600)
    unknown = set(p["workloads"] or ()) - {w[0] for w in workloads(dict(
        p, src="", tree_files=0, tree_bytes=0, out_made=0, out_bytes=0, out_levels=0))}
    if unknown:
        sys.exit(f"bench: unknown workload(s): {', '.join(sorted(unknown))}")

    for tool in (SBFS, SBEXEC):
        if not os.access(tool, os.X_OK):
            sys.exit(f"bench: {tool} missing: build first (ninja -C build)")
    base = tempfile.mkdtemp(prefix="sbfs-bench-", dir=a.workdir)
    CLEAN.dirs.append(base)
    p["base"] = base
    # Snapshot the binaries: a rebuild during the run must not change them.
    os.makedirs(os.path.join(base, "bin"))
    p["build"] = build_info()
    for name in ("SBFS", "SBEXEC"):
        dst = os.path.join(base, "bin", os.path.basename(globals()[name]))
        shutil.copy2(globals()[name], dst)
        globals()[name] = dst

    clean_on_signals()

    notes = []
    try:
        p["src"] = os.path.join(base, "src")
        out = subprocess.run([sys.executable, os.path.join(HERE, "gen_tree.py"),
                              p["src"], "--files", str(p["tree_n"])],
                             capture_output=True, text=True, check=True).stdout
        m = re.match(r"(\d+) files, (\d+) bytes", out)
        p["tree_files"], p["tree_bytes"] = int(m.group(1)), int(m.group(2))
        # The outbound tree's shape, from the same arguments here (the
        # same bytes as the sandbox will make): for the labels and limits.
        out = subprocess.run([sys.executable, os.path.join(HERE, "gen_tree.py"),
                              os.path.join(base, "outprobe"), "--files", str(p["out_files"]),
                              "--dirs", str(p["out_dirs"])],
                             capture_output=True, text=True, check=True).stdout
        m = re.match(r"(\d+) files, (\d+) bytes, \d+ dirs, (\d+) made, (\d+) levels", out)
        p["out_bytes"], p["out_made"], p["out_levels"] = (int(m.group(2)), int(m.group(3)),
                                                           int(m.group(4)))
        shutil.rmtree(os.path.join(base, "outprobe"))
        p["srctar"] = os.path.join(base, "src.tar")
        subprocess.run(["tar", "-cf", p["srctar"], "-C", p["src"], "."], check=True)

        lat = a.latency_ms
        configs = ["local disk", "sbfs 0 ms", "sbfs wb 0 ms", "sshfs 0 ms", "rclone 0 ms",
                   f"sbfs {lat} ms", f"sbfs wb {lat} ms", f"sshfs {lat} ms",
                   f"rclone {lat} ms"]
        have_git = shutil.which("git") is not None
        if not have_git:
            notes.append("git not installed: git workloads fail (apt-get install git)")
        sshd = None
        ssh_missing = [t for t in ("sshfs", "ssh", "ssh-keygen")
                       if not shutil.which(t)]
        if not (shutil.which("sshd") or os.path.exists("/usr/sbin/sshd")):
            ssh_missing.append("sshd")
        if a.skip_sshfs:
            notes.append("sshfs peer skipped (--skip-sshfs)")
        elif ssh_missing:
            msg = (f"sshfs peer skipped: {', '.join(ssh_missing)} not installed "
                   "(Debian: apt-get install sshfs openssh-server openssh-client)")
            log(f"bench: {msg}")
            notes.append(msg)
        else:
            sshd = Sshd(base, a.ssh_port)
            sshd.start()
        if not sshd:
            configs = [c for c in configs if not c.startswith(("sshfs", "rclone"))]
        elif not shutil.which("rclone"):
            notes.append("rclone peer skipped: rclone not installed (Debian: apt-get install rclone)")
            configs = [c for c in configs if not c.startswith("rclone")]
        if a.only:
            want = [s.strip() for s in a.only.split(",")]
            configs = [c for c in configs if c in want]

        results, calls, requests, journal, lost = {}, {}, {}, {}, {}
        relay_duration = 3600
        for i, c in enumerate(configs):
            if c == "local disk":
                t = LocalDisk(base)
            elif c.startswith("sbfs"):
                t = Sbfs(base, int(c.split()[-2]), " wb " in c, i)
            elif c.startswith("rclone"):
                t = Rclone(base, sshd, int(c.split()[-2]), i, relay_duration)
            else:
                t = Sshfs(base, sshd, int(c.split()[-2]), i, relay_duration)
            why = run_target(t, p, timeout, results, calls, requests, journal, lost)
            if why and c.startswith("sbfs wb"):
                notes.append(f"{c}: {why}")
        extra_lines = []
        if not a.skip_extras:
            log("== sbexec latency, daemon peak RSS")
            extras(base, p, timeout, extra_lines)
        notes.append("ls cold: the directory is created out of band (through sbexec on "
                     "sbfs, in the exported directory for sshfs), so the mount has never "
                     "seen it; dd read: the file is written out of band the same way.")
        notes.append("sshfs 0 ms connects to sshd directly; at N ms through "
                     "tests/bench/delay_relay.py (N/2 ms each way). Default sshfs caching.")
        emit(report(p, configs, results, calls, requests, journal, lost, notes,
                    extra_lines, started), a.out)
    finally:
        CLEAN.run()


if __name__ == "__main__":
    main()
