#!/usr/bin/python3
"""The fake envd's hands inside a fake E2B sandbox: runs as the sandbox's
first process (so every path is resolved in the sandbox's own view, and a
symlink cannot reach the host), and answers one JSON request per line on
stdin with one JSON line on stdout. A write is followed by exactly `size`
raw bytes. Entry shapes and errors follow the protocol notes (1.6)."""
import grp
import json
import os
import pwd
import stat
import sys
import time

IN = sys.stdin.buffer
OUT = sys.stdout.buffer


def go_mode_string(m):
    """Go's FileMode.String() for a Unix st_mode."""
    s = ""
    if stat.S_ISDIR(m):
        s += "d"
    if stat.S_ISLNK(m):
        s += "L"
    if stat.S_ISBLK(m) or stat.S_ISCHR(m):
        s += "D"
    if stat.S_ISFIFO(m):
        s += "p"
    if stat.S_ISSOCK(m):
        s += "S"
    if m & stat.S_ISUID:
        s += "u"
    if m & stat.S_ISGID:
        s += "g"
    if stat.S_ISCHR(m):
        s += "c"
    if m & stat.S_ISVTX:
        s += "t"
    if not s:
        s = "-"
    for i, c in enumerate("rwxrwxrwx"):
        s += c if m & (0o400 >> i) else "-"
    return s


def name_of(table, i):
    try:
        return table(i)[0]
    except KeyError:
        return str(i)


def rfc3339(t_ns):
    """From whole nanoseconds, as envd formats a Go time: a float of
    seconds since 1970 keeps about a quarter of a microsecond, so a time
    just before a second could round up into the next."""
    sec, ns = divmod(t_ns, 1000000000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    return base + (".%09d" % ns).rstrip("0").rstrip(".") + "Z"


def u(s):
    """What Go's JSON encoder makes of a name that is not UTF-8."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def entry(path):
    st = os.lstat(path)
    e = {"name": u(os.path.basename(path.rstrip("/")) or "/"), "path": u(path),
         "size": str(st.st_size), "permissions": go_mode_string(st.st_mode),
         "owner": name_of(pwd.getpwuid, st.st_uid),
         "group": name_of(grp.getgrgid, st.st_gid),
         "modifiedTime": rfc3339(st.st_mtime_ns)}
    target = st
    if stat.S_ISLNK(st.st_mode):
        # type and mode describe the target; the target is the resolved path
        try:
            target = os.stat(path)
            e["symlinkTarget"] = u(os.path.realpath(path))
        except OSError:
            target = None
            e["symlinkTarget"] = u(path)
    if target is not None:
        if stat.S_ISDIR(target.st_mode):
            e["type"] = "FILE_TYPE_DIRECTORY"
        elif stat.S_ISREG(target.st_mode):
            e["type"] = "FILE_TYPE_FILE"
        if target.st_mode & 0o777:
            e["mode"] = target.st_mode & 0o777
    return e


class Err(Exception):
    def __init__(self, code, message):
        self.code, self.message = code, message


def oserr(e, what):
    msg = "%s: %s" % (what, e.strerror.lower() if e.strerror else str(e))
    if e.errno == 2:
        return Err("not_found", msg)
    if e.errno in (1, 13):
        return Err("permission_denied", msg)
    return Err("internal", msg)


def op_stat(r):
    try:
        return {"entry": entry(r["path"])}
    except OSError as e:
        if e.errno == 2:
            raise Err("not_found", "path '%s' does not exist" % r["path"])
        raise oserr(e, "error getting file info")


def op_list(r):
    p = r["path"]
    depth = max(int(r.get("depth", 1) or 1), 1)
    try:
        real = os.path.realpath(p)
        st = os.stat(real)
    except OSError as e:
        if e.errno == 2:
            raise Err("not_found", "path '%s' does not exist" % p)
        raise oserr(e, "error resolving path")
    if not stat.S_ISDIR(st.st_mode):
        raise Err("invalid_argument", "path '%s' is not a directory" % p)
    out = []

    def walk(d, shown, level):
        try:
            names = sorted(os.listdir(d))
        except OSError as e:
            raise oserr(e, "error reading directory")
        for n in names:
            try:
                e = entry(os.path.join(d, n))
            except OSError:
                continue
            e["path"] = u(os.path.join(shown, n))
            out.append(e)
            if level < depth and e.get("type") == "FILE_TYPE_DIRECTORY" and "symlinkTarget" not in e:
                walk(os.path.join(d, n), os.path.join(shown, n), level + 1)
    walk(real, p, 1)
    return {"entries": out}


def op_mkdir(r):
    p = r["path"]
    if os.path.lexists(p):
        if os.path.isdir(p):
            raise Err("already_exists", "directory '%s' already exists" % p)
        raise Err("invalid_argument", "path '%s' already exists and is not a directory" % p)
    try:
        os.makedirs(p, 0o755)
    except OSError as e:
        raise oserr(e, "error making directory")
    return {"entry": entry(p)}


def op_remove(r):
    p = r["path"]
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return {}
    try:
        if stat.S_ISDIR(st.st_mode):
            import shutil
            shutil.rmtree(p)
        else:
            os.unlink(p)
    except OSError as e:
        raise oserr(e, "error removing file or directory")
    return {}


def op_move(r):
    s, d = r["source"], r["destination"]
    if not os.path.lexists(s):
        raise Err("not_found", "source file '%s' does not exist" % s)
    try:
        os.makedirs(os.path.dirname(d) or "/", 0o755, exist_ok=True)
        os.rename(s, d)
    except OSError as e:
        raise oserr(e, "error renaming '%s' to '%s'" % (s, d))
    return {"entry": entry(d)}


def op_isdir(r):
    return {"isdir": os.path.isdir(r["path"])}


def op_write(r):
    p, size = r["path"], r["size"]
    left = size
    err = None
    f = None
    try:
        if os.path.isdir(p):
            err = Err("is_dir", "path is a directory: %s" % p)
        else:
            os.makedirs(os.path.dirname(p) or "/", 0o755, exist_ok=True)
            f = open(p, "wb")  # follows a symlink at the target, as envd does
    except OSError as e:
        err = oserr(e, "error opening file")
    while left > 0:
        chunk = IN.read(min(left, 1 << 20))
        if not chunk:
            sys.exit(0)
        left -= len(chunk)
        if f and not err:
            try:
                f.write(chunk)
            except OSError as e:
                err = Err("no_space" if e.errno == 28 else "internal", str(e))
    if f:
        try:
            f.close()
        except OSError as e:
            err = err or Err("internal", str(e))
    if err:
        raise err
    return [{"path": p, "name": os.path.basename(p), "type": "file"}]


OPS = {"stat": op_stat, "list": op_list, "mkdir": op_mkdir, "remove": op_remove,
       "move": op_move, "write": op_write, "isdir": op_isdir}


def main():
    os.umask(0o022)
    OUT.write(b'{"ready":true}\n')
    OUT.flush()
    while True:
        line = IN.readline()
        if not line:
            return
        r = json.loads(line)
        try:
            res = {"ok": OPS[r["op"]](r)}
        except Err as e:
            res = {"error": {"code": e.code, "message": e.message}}
        except Exception as e:  # a bug here must not kill the sandbox
            res = {"error": {"code": "internal", "message": repr(e)}}
        OUT.write(json.dumps(res).encode() + b"\n")
        OUT.flush()


main()
