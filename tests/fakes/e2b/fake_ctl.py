#!/usr/bin/python3
"""Reaches the fake E2B (or a real one) from outside sbfs, for tests, over
its control plane with E2B_API_KEY and E2B_API_URL or E2B_DOMAIN (TLS: the
CA in FAKE_E2B_CA):
  fake_ctl.py kill NAME|ID        kill the sandbox (as its timeout or the dashboard would)
  fake_ctl.py running NAME|ID     exit 0 while the sandbox runs, 1 if not
  fake_ctl.py pause NAME|ID  pause it (as E2B's pause on timeout would)
  fake_ctl.py id NAME        the E2B id of sbfs's sandbox NAME (sbfs-...)
  fake_ctl.py list           ids of the running sandboxes with metadata sbfs=1
  fake_ctl.py faults JSON    (fake only, FAKE_E2B_STATE) set the fault plan
  fake_ctl.py created ID     (fake only) the create request's body
"""
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request


def base():
    if os.environ.get("E2B_API_URL"):
        return os.environ["E2B_API_URL"].rstrip("/")
    return "https://api." + os.environ.get("E2B_DOMAIN", "e2b.app")


def call(method, path):
    ctx = None
    if os.environ.get("FAKE_E2B_CA"):
        ctx = ssl.create_default_context(cafile=os.environ["FAKE_E2B_CA"])
    url = base() + path
    host = urllib.parse.urlsplit(url).hostname
    headers = {"X-API-Key": os.environ.get("E2B_API_KEY", "")}
    if host.endswith(".localhost"):
        # the resolver may not know *.localhost: go to loopback, keep the name
        u = urllib.parse.urlsplit(url)
        headers["Host"] = u.netloc
        import http.client
        c = http.client.HTTPSConnection("127.0.0.1", u.port, context=ctx, timeout=30) \
            if u.scheme == "https" else http.client.HTTPConnection("127.0.0.1", u.port, timeout=30)
        c.request(method, u.path + ("?" + u.query if u.query else ""), headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    req = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def resolve(name):
    """sbfs's name (metadata sbfs-name) -> the E2B id; an id as it is."""
    if not name.startswith("sbfs-"):
        return name
    q = urllib.parse.quote
    inner = "%s=%s" % (q(q("sbfs-name", safe=""), safe=""), q(q(name, safe=""), safe=""))
    st, body = call("GET", "/v2/sandboxes?metadata=" + q(inner, safe=""))
    if st != 200:
        sys.exit("fake_ctl: list: HTTP %d" % st)
    ids = [s["sandboxID"] for s in json.loads(body)]
    return ids[0] if ids else "none-" + name


def main():
    cmd = sys.argv[1]
    if len(sys.argv) > 2 and cmd in ("kill", "running", "created", "id", "pause"):
        sys.argv[2] = resolve(sys.argv[2])
    if cmd == "kill":
        st, body = call("DELETE", "/sandboxes/" + urllib.parse.quote(sys.argv[2]))
        if st not in (204, 404):
            sys.exit("fake_ctl: kill: HTTP %d %s" % (st, body[:200]))
    elif cmd == "running":
        st, body = call("GET", "/sandboxes/" + urllib.parse.quote(sys.argv[2]))
        sys.exit(0 if st == 200 and json.loads(body).get("state") == "running" else 1)
    elif cmd == "list":
        inner = "%s=%s" % (urllib.parse.quote(urllib.parse.quote("sbfs")), urllib.parse.quote(urllib.parse.quote("1")))
        st, body = call("GET", "/v2/sandboxes?metadata=" + urllib.parse.quote(inner, safe=""))
        if st != 200:
            sys.exit("fake_ctl: list: HTTP %d" % st)
        for s in json.loads(body):
            print(s["sandboxID"])
    elif cmd == "pause":
        st, body = call("POST", "/sandboxes/" + urllib.parse.quote(sys.argv[2]) + "/pause")
        if st != 204:
            sys.exit("fake_ctl: pause: HTTP %d %s" % (st, body[:200]))
    elif cmd == "id":
        print(sys.argv[2])
    elif cmd == "faults":
        path = os.path.join(os.environ["FAKE_E2B_STATE"], "faults.json")
        json.loads(sys.argv[2])
        with open(path + ".tmp", "w") as f:
            f.write(sys.argv[2])
        os.replace(path + ".tmp", path)
    elif cmd == "created":
        with open(os.path.join(os.environ["FAKE_E2B_STATE"], "sandboxes", sys.argv[2] + ".json")) as f:
            print(f.read())
    else:
        sys.exit("unknown command " + cmd)


main()
