#!/usr/bin/python3
"""Stand-in for Modal's injected `modal-sandbox-fs-tools` helper, written
from the protocol notes (3.1): argv[1] is one JSON command; success is exit
0; failure is exit 1 with {"version":1,"error_kind":K,"message":M} on
stderr. Implements the subset sbfs uses (WriteFile, ListFiles) plus Stat,
MakeDirectory and Remove."""
import errno
import json
import os
import stat
import sys

KINDS = {
    errno.ENOENT: "NotFound",
    errno.EISDIR: "IsDirectory",
    errno.ENOTDIR: "NotDirectory",
    errno.EACCES: "PermissionDenied",
    errno.EPERM: "PermissionDenied",
    errno.EEXIST: "PathAlreadyExists",
    errno.ENOTEMPTY: "DirectoryNotEmpty",
}


def fail(kind, message):
    sys.stderr.write(json.dumps({"version": 1, "error_kind": kind, "message": message}))
    sys.exit(1)


def entry(path, name):
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        typ = "directory"
    elif stat.S_ISLNK(st.st_mode):
        typ = "symlink"
    else:
        typ = "file"
    e = {
        "name": name,
        "path": path,
        "type": typ,
        "size": st.st_size,
        "mode": st.st_mode,
        "permissions": "%04o" % (st.st_mode & 0o7777),
        "owner": str(st.st_uid),
        "group": str(st.st_gid),
        "modified_time": st.st_mtime,
        "symlink_target": os.readlink(path) if typ == "symlink" else None,
    }
    return e


def main():
    cmd = json.loads(sys.argv[1])
    (op, args), = cmd.items()
    path = args["path"]
    if not path.startswith("/"):
        fail("InvalidPath", "path must be absolute")
    try:
        if op == "WriteFile":
            parent = os.path.dirname(path)
            try:
                os.makedirs(parent, exist_ok=True)
            except FileExistsError:
                fail("AlreadyExists", "a parent of %s is not a directory" % path)
            except NotADirectoryError:
                fail("NotDirectory", "a parent of %s is not a directory" % path)
            if os.path.isdir(path):
                fail("IsDirectory", "%s is a directory" % path)
            # like the real helper (per the Python backend's notes), a
            # symlink at path is replaced, not written through
            if os.path.islink(path):
                os.unlink(path)
            data = sys.stdin.buffer
            with open(path, "wb") as f:
                while True:
                    chunk = data.read(1 << 20)
                    if not chunk:
                        break
                    f.write(chunk)
        elif op == "ListFiles":
            if not os.path.lexists(path):
                fail("NotFound", "%s does not exist" % path)
            if not os.path.isdir(path):
                fail("IsFile", "%s is not a directory" % path)
            out = [entry(os.path.join(path, n), n) for n in sorted(os.listdir(path))]
            sys.stdout.write(json.dumps(out))
        elif op == "Stat":
            sys.stdout.write(json.dumps(entry(path, os.path.basename(path))))
        elif op == "MakeDirectory":
            if args.get("parents", True):
                os.makedirs(path, exist_ok=True)
            else:
                os.mkdir(path)
        elif op == "Remove":
            if os.path.isdir(path) and not os.path.islink(path):
                if args.get("recursive"):
                    import shutil
                    shutil.rmtree(path)
                else:
                    os.rmdir(path)
            else:
                os.unlink(path)
        else:
            fail("NotSupported", "unknown command %s" % op)
    except OSError as e:
        fail(KINDS.get(e.errno, "Io"), "%s: %s" % (path, e.strerror))


main()
