#!/usr/bin/python3
"""Reaches a (fake or real) Modal from outside sbfs, for tests: with
MODAL_SERVER_URL, MODAL_TOKEN_ID and MODAL_TOKEN_SECRET set (and for an
https:// URL whose CA is not in the system store, FAKE_MODAL_CA or
SSL_CERT_FILE naming it),
  fake_ctl.py terminate NAME|ID   terminate the sandbox (as a crash or the
                                  dashboard would)
  fake_ctl.py running NAME|ID     exit 0 while the sandbox runs, 1 if not
  fake_ctl.py list                print the running sandboxes tagged sbfs=1
  fake_ctl.py id NAME|ID          print the sandbox's id
NAME is looked up in app $SBFS_MODAL_APP (default sbfs)."""
import os
import sys

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pb  # noqa: E402

URL = os.environ["MODAL_SERVER_URL"]
MD = [("x-modal-client-type", "1"), ("x-modal-client-version", "1.0.0"),
      ("x-modal-token-id", os.environ.get("MODAL_TOKEN_ID", "")),
      ("x-modal-token-secret", os.environ.get("MODAL_TOKEN_SECRET", ""))]
TARGET = URL.split("://", 1)[1].rstrip("/")


def channel():
    if not URL.startswith("https://"):
        return grpc.insecure_channel(TARGET)
    ca = os.environ.get("FAKE_MODAL_CA") or os.environ.get("SSL_CERT_FILE")
    roots = None
    if ca:
        with open(ca, "rb") as f:
            roots = f.read()
    return grpc.secure_channel(TARGET, grpc.ssl_channel_credentials(roots))


CH = channel()


def api(method, body):
    return pb.Msg(CH.unary_unary("/modal.client.ModalClient/" + method)(body, metadata=MD, timeout=30))


def resolve(name):
    if name.startswith("sb-"):
        return name
    app = os.environ.get("SBFS_MODAL_APP", "sbfs")
    return api("SandboxGetFromName", pb.f_str(1, name) + pb.f_str(3, app)).str(1)


def main():
    cmd = sys.argv[1]
    try:
        if cmd == "terminate":
            api("SandboxTerminate", pb.f_str(1, resolve(sys.argv[2])))
        elif cmd == "running":
            r = api("SandboxWait", pb.f_str(1, resolve(sys.argv[2])) + pb.f_float(2, 0.0))
            sys.exit(1 if r.has(1) else 0)
        elif cmd == "id":
            print(resolve(sys.argv[2]))
        elif cmd == "list":
            r = api("SandboxList", pb.f_bytes(5, pb.f_str(1, "sbfs") + pb.f_str(2, "1")))
            for s in r.msgs(1):
                print(s.str(1))
        else:
            sys.exit("unknown command " + cmd)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND and cmd == "running":
            sys.exit(1)
        if e.code() == grpc.StatusCode.NOT_FOUND and cmd == "terminate":
            return
        sys.exit("fake_ctl: %s: %s" % (e.code().name, e.details()))


main()
