#!/usr/bin/env bats
# The e2b backend against our fake E2B (tests/fakes/e2b), one fake per test
# so each can inject its own faults: every fault ends in a clear one-line
# error or is retried where that is safe, and never hangs. Runs only with
# SBFS_TEST_BACKEND=e2b (once: on the plain entry; the TLS test here starts
# its own TLS fake). Needs python3, bwrap, nsenter, openssl.

load helpers

FAKE_DIR=$SBFS_REPO/tests/fakes/e2b

setup() {
	require_backend e2b
	[[ ${E2B_FAKE_MODE:-plain} == plain ]] || skip "e2b.bats runs on the plain e2b entry (its TLS test starts its own fake)"
	sbfs_setup
	unset FAKE_E2B_CA SSL_CERT_FILE SSL_CERT_DIR E2B_DOMAIN E2B_DEBUG
}

teardown() {
	local rc=0
	sbfs_teardown || rc=$?
	if [[ -n ${FAKE:-} ]]; then
		"$FAKE_DIR/stop-fake.sh" "$FAKE" || true
		rm -rf "$FAKE"
	fi
	return $rc
}

# start_fake [tls]: a fresh fake E2B for this test, its settings exported.
# Its state is outside $T, which sbfs_teardown deletes while the fake must
# still answer.
start_fake() {
	local out line
	FAKE=$(mktemp -d "${BATS_TMPDIR:-/tmp}/sbfs-fake-e2b.XXXXXX")
	out=$("$FAKE_DIR/run-fake.sh" "$FAKE" "${1:-plain}") || fail "fake E2B did not start" || return 1
	unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN FAKE_E2B_CA
	while IFS= read -r line; do
		# shellcheck disable=SC2163
		export "$line"
	done <<<"$out"
	export FAKE_E2B_STATE=$FAKE FAKE
}

set_faults() { "$FAKE_DIR/fake_ctl.py" faults "$1"; }
ctl() { "$FAKE_DIR/fake_ctl.py" "$@"; }
# requests PLANE METHOD PATH_REGEX [STATUS [USER]]: how many the fake answered
requests() {
	awk -v p="$1" -v m="$2" -v r="^$3\$" -v s="${4:-}" -v u="${5:-}" \
		'$1 == p && $2 == m && $3 ~ r && (s == "" || $4 == s) && (u == "" || $5 == u) { n++ }
		END { print n + 0 }' \
		"$FAKE/requests.log"
}
created() { ctl created "$SBFS_SANDBOX"; }
status_field() { status_json | jq -r "$1"; }

# try_mount [EXTRA_OPTS]: a mount expected to fail; output in $output
try_mount() {
	mkdir -p "$T/mnt"
	run timeout 90 sbfs -o "$(sbfs_opts mnt "${1:-}")" "$T/mnt"
}

@test "e2b: create asks for what the spec says; write, exec, list; kill on unmount" {
	start_fake
	mount_sbfs -o "env=GREETING=hi,tag=team=ml"
	run created
	assert_output_has '"templateID": "base"'
	assert_output_has '"secure": true'
	assert_output_has '"timeout": 300'
	assert_output_has '"allow_internet_access": false'
	assert_output_has '"sbfs": "1"'
	assert_output_has "\"sbfs-name\": \"$SBFS_SANDBOX\""
	assert_output_has '"team": "ml"'
	assert_output_has '"GREETING": "hi"'
	echo hello >"$MNT/a.txt"
	run sb cat a.txt
	assert_status 0
	assert_eq "$output" hello
	run sb sh -c 'echo "$GREETING"'
	assert_eq "$output" hi
	run ls -l "$MNT"
	assert_output_has a.txt
	(($(requests envd POST /filesystem.Filesystem/ListDir 200) >= 1)) || fail "no ListDir call"
	(($(requests envd POST /files 200) >= 1)) || fail "no upload through envd's /files"
	local id
	id=$(ctl id "$SBFS_SANDBOX")
	ctl running "$id" || fail "sandbox $id is not running"
	unmount_sbfs
	poll 10 eval '! ctl running "$id"' || fail "sandbox $id still runs after unmount"
	(($(requests api DELETE "/sandboxes/$id" 204) == 1)) || fail "no kill call"
}

@test "e2b: a workdir the sandbox's user may not make is made by envd's root, for that user" {
	start_fake
	FAKE_E2B_STATE=$FAKE ctl faults '{"mkdir_denied": {"path": "/workspace"}}'
	mount_sbfs
	assert_eq "$(requests envd POST /filesystem.Filesystem/MakeDir 403)" 1
	assert_eq "$(requests envd POST /process.Process/Start 200 root)" 1
	echo ok >"$MNT/f"
	assert_eq "$(sb cat f)" ok
	mount_sbfs -n other -o workdir=/elsewhere
	assert_eq "$(requests envd POST /process.Process/Start 200 root)" 1
}

@test "e2b: binary files are byte-exact both ways" {
	start_fake
	mount_sbfs
	head -c 3000000 /dev/urandom >"$T/bin"
	printf '\0\r\n\xff\xfe' >>"$T/bin"
	cp "$T/bin" "$MNT/bin"
	assert_eq "$(sb sha256sum bin | cut -d' ' -f1)" "$(sha256sum <"$T/bin" | cut -d' ' -f1)"
	sb sh -c 'head -c 1000000 /dev/urandom >made; printf "\0\377" >>made'
	cmp <(sb cat made) "$MNT/made" || fail "a sandbox-made binary differs on the mount"
}

@test "e2b: over TLS with the cluster's CA as ca_file=, SSL_CERT_FILE or SSL_CERT_DIR; never without" {
	start_fake tls
	[[ -n $E2B_DOMAIN && -s $FAKE_E2B_CA ]] || fail "TLS fake gave no domain/CA"
	local ca=$FAKE_E2B_CA
	unset FAKE_E2B_CA # backend_mount_opts: no ca_file= of its own
	try_mount
	[[ $status -ne 0 ]] || fail "a mount trusted an unknown CA"
	assert_output_has "E2B sandbox create"
	assert_output_has "certificate"
	[[ $(grep -c . <<<"$output") == 1 ]] || fail "more than one line: $output"
	mount_sbfs -o "ca_file=$ca"
	echo tls >"$MNT/t"
	assert_eq "$(sb cat t)" tls
	unmount_sbfs
	SSL_CERT_FILE=$ca mount_sbfs -n again
	assert_eq "$(sb ls)" ""
	try_mount "ca_file=$T/nope.pem"
	assert_output_has "cannot be read"
	unmount_sbfs
	# a directory is looked up by subject hash: the same CA unhashed is
	# not found, hashed it is, for the API and envd (file calls and exec)
	mkdir "$T/certs"
	cp "$ca" "$T/certs/fake-e2b-ca.pem"
	SSL_CERT_DIR=$T/certs try_mount
	[[ $status -ne 0 ]] || fail "an unhashed SSL_CERT_DIR was trusted"
	assert_output_has "certificate"
	openssl rehash "$T/certs" || c_rehash "$T/certs" >/dev/null
	SSL_CERT_DIR=$T/certs mount_sbfs -n dir
	echo dir >"$MNT/d"
	assert_eq "$(sb cat d)" dir
	SSL_CERT_DIR=$T/nocerts try_mount
	assert_output_has "SSL_CERT_DIR names '$T/nocerts', which is not a readable directory"
	[[ $(grep -c . <<<"$output") == 1 ]] || fail "more than one line: $output"
}

@test "e2b: a missing or rejected key is one line saying what to set" {
	start_fake
	local key=$E2B_API_KEY
	unset E2B_API_KEY
	try_mount
	[[ $status -ne 0 ]] || fail "mount succeeded"
	assert_output_has "E2B_API_KEY is not set"
	[[ $(grep -c . <<<"$output") == 1 ]] || fail "more than one line: $output"
	E2B_API_KEY=e2b_wrong try_mount
	[[ $status -ne 0 ]] || fail "mount succeeded"
	assert_output_has "E2B rejected the API key"
	assert_output_has "set E2B_API_KEY"
	[[ $(grep -c . <<<"$output") == 1 ]] || fail "more than one line: $output"
	[[ $output != *"$key"* && $output != *e2b_wrong* ]] || fail "the key is in the message"
	nothing_left_behind "$T/mnt"
}

@test "e2b: 429 on create is waited out (Retry-After), and on envd too" {
	start_fake
	set_faults '{"rate_limit": {"count": 2, "path": "/sandboxes", "method": "POST", "retry_after": 0.3},
		"envd_rate_limit": {"count": 1, "proc": "filesystem.Filesystem/MakeDir", "retry_after": 0.2}}'
	mount_sbfs
	assert_eq "$(requests api POST /sandboxes 429)" 2
	assert_eq "$(requests api POST /sandboxes 201)" 1
	(($(requests envd POST /filesystem.Filesystem/MakeDir 429) == 1)) || fail "no envd 429 seen"
	echo ok >"$MNT/f"
	assert_eq "$(sb cat f)" ok
}

@test "e2b: rate limited past the retries fails the mount with one line" {
	start_fake
	set_faults '{"rate_limit": {"count": 50, "path": "/sandboxes", "method": "POST", "retry_after": 0.05}}'
	try_mount
	[[ $status -ne 0 ]] || fail "mount succeeded"
	assert_output_has "rate limited"
	[[ $(grep -c . <<<"$output") == 1 ]] || fail "more than one line: $output"
}

@test "e2b: a sandbox killed behind the mount: 502 from the proxy is EIO at once, the reason in status" {
	start_fake
	mount_sbfs
	echo x >"$MNT/f"
	ctl kill "$SBFS_SANDBOX"
	SECONDS=0
	run timeout 60 ls "$MNT/sub-that-is-not-cached"
	[[ $status -ne 0 && $status -ne 124 ]] || fail "ls: status $status after the sandbox died"
	run timeout 60 stat "$MNT/other"
	assert_output_has "Input/output error"
	run timeout 60 sbexec -m "$MNT" true
	assert_status 125
	((SECONDS < 20)) || fail "took ${SECONDS}s"
	assert_eq "$(status_field '.state')" dead
	run status_field '.reason'
	assert_output_has "is gone"
	assert_output_has "The sandbox was not found"
	unmount_sbfs
}

@test "e2b: a paused sandbox is resumed at the next call, its files kept" {
	start_fake
	mount_sbfs
	echo before >"$MNT/f"
	ctl pause "$SBFS_SANDBOX"
	run timeout 60 cat "$MNT/f"
	assert_status 0
	assert_eq "$output" before
	run sb cat f
	assert_eq "$output" before
	(($(requests api POST "/sandboxes/[a-z0-9]+/connect" 201) == 1)) || fail "no resume through connect"
	assert_eq "$(status_field '.state')" running
}

@test "e2b: an exec stream cut before its end event is picked up again by pid" {
	start_fake
	mount_sbfs
	set_faults '{"cut_stream": {"count": 1}}'
	run sb sh -c 'echo out; echo err >&2; sleep 0.5; exit 7'
	assert_status 7
	assert_output_has out
	(($(requests envd POST /process.Process/Start 200:cut) == 1)) || fail "the stream was not cut"
	(($(requests envd POST /process.Process/Connect 200) == 1)) || fail "no reattach with Process/Connect"
	run sb echo after
	assert_eq "$output" after
}

@test "e2b: a stalled envd ends the call at its deadline; the mount keeps working" {
	start_fake
	mount_sbfs -o call_timeout=4
	set_faults '{"stall_envd": {"count": 1, "seconds": 15, "proc": "filesystem.Filesystem/MakeDir"}}'
	SECONDS=0
	run timeout 60 mkdir "$MNT/d"
	assert_status 1
	assert_output_has "timed out"
	((SECONDS < 12)) || fail "mkdir took ${SECONDS}s"
	mkdir "$MNT/d2"
	sb test -d d2
	assert_eq "$(status_field '.state')" running
}

@test "e2b: exec: stdin forwarded, timeout is 124, a guest SIGKILL is 137" {
	start_fake
	mount_sbfs
	run bash -c "printf 'a\\nb\\n' | sbexec -m '$MNT' wc -l"
	assert_status 0
	assert_eq "$output" 2
	run sb --timeout 1 sleep 30
	assert_status 124
	run sb --timeout 30 sh -c 'kill -9 $$'
	assert_status 137
	run sb echo still-here
	assert_eq "$output" still-here
}

@test "e2b: without sandbox_timeout= the E2B timeout is kept ahead of now while mounted" {
	start_fake
	mount_sbfs -o keepalive_timeout=3
	sleep 6
	run sb echo alive
	assert_eq "$output" alive
	(($(requests api POST "/sandboxes/[a-z0-9]+/timeout" 204) >= 2)) || fail "no timeout extensions"
	run created
	assert_output_has '"timeout": 3'
}

@test "e2b: spec: resources and idle timeout refused; allowlist needs egress_enforcement=sni" {
	start_fake
	try_mount cpu=2
	[[ $status -ne 0 ]] || fail "cpu= accepted"
	assert_output_has "by its template"
	try_mount idle_timeout=60
	assert_output_has "no idle timeout"
	try_mount allow_egress_to=pypi.org
	[[ $status -ne 0 ]] || fail "allowlist accepted without egress_enforcement"
	assert_output_has "egress_enforcement=sni"
	try_mount "allow_egress_to=https://pypi.org,egress_enforcement=sni"
	assert_output_has "is not a hostname"
	try_mount template=nosuch
	assert_output_has "no template 'nosuch'"
	mount_sbfs -o "allow_egress_to=pypi.org:*.pythonhosted.org,egress_enforcement=sni"
	run created
	assert_output_has '"allowOut": ["pypi.org", "*.pythonhosted.org"]'
	assert_output_has '"denyOut": ["0.0.0.0/0"]'
	unmount_sbfs
	mount_sbfs -n open -o network
	run created
	assert_output_has '"allow_internet_access": true'
}

@test "e2b: sweep kills the sandbox of a killed daemon, and only that" {
	start_fake
	mount_sbfs -n live
	local live=$SBFS_SANDBOX
	mount_sbfs -n dead
	local dead=$SBFS_SANDBOX
	kill -KILL "$SBFS_PID"
	poll 10 not_pid_alive "$SBFS_PID"
	run sbfs sweep -o backend=e2b
	assert_status 0
	assert_output_has "killed (daemon pid"
	poll 10 eval '! ctl running "$dead"' || fail "orphan $dead still runs"
	ctl running "$live" || fail "sweep killed the live mount's sandbox"
	fusermount3 -u -z "$T/dead" 2>/dev/null || true
}

# calls PROC JQ_FILTER: the requests the fake logged for PROC, through jq
calls() { jq -c --arg p "$1" "select(.proc == \$p) | .req | $2" "$FAKE/calls.log"; }

@test "e2b: the wire of -t and signals: Start with pty and its size, typed input, Update on a resize, ^D at EOF, the marker" {
	start_fake
	mount_sbfs
	# at a terminal of 30x100 that becomes 40x120 while the command runs
	run timeout 60 python3 - sbexec -m "$MNT" -t sh -c 'stty size; read x; stty size; echo err-$x >&2' <<'PY'
import fcntl, os, pty, select, struct, sys, termios, time
pid, fd = pty.fork()
if pid == 0:
    # the size is there before sbexec reads it (set by the parent, it
    # could come after, and the Start would say 0x0)
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    os.execvp(sys.argv[1], sys.argv[1:])
def size(rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
size(30, 100)
out = b""
def until(want):
    global out
    end = time.time() + 30
    while want not in out and time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
until(b"30 100")
size(40, 120)
time.sleep(0.5)
os.write(fd, b"go\r")
until(b"err-go")
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
print("exit %d" % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
PY
	[[ $output == *"30 100"*"40 120"*"err-go"*"exit 0"* ]] || fail "$output"
	run calls process.Process/Start 'select(.process.args[-1] == "stty size; read x; stty size; echo err-$x >&2")'
	assert_eq "$(jq -c .pty <<<"$output")" '{"size":{"cols":100,"rows":30}}'
	assert_eq "$(jq -c 'has("stdin")' <<<"$output")" false
	local marker
	marker=$(jq -r '.process.envs.SBFS_EXEC' <<<"$output")
	[[ $marker =~ ^[0-9a-f]{24}$ ]] || fail "no marker in the command's environment: $output"
	run calls process.Process/Update .pty
	assert_eq "$output" '{"size":{"cols":120,"rows":40}}'
	run calls process.Process/SendInput .input
	assert_output_has '{"pty":"'
	# by process: the mount's watcher (another process) takes its
	# questions on stdin
	run jq -s -c '[.[] | select(.proc == "process.Process/SendInput") | .req] |
		group_by(.process) | map(select(any(.[]; .input.pty != null))) |
		map(select(any(.[]; .input.stdin != null)))' "$FAKE/calls.log"
	assert_eq "$output" "[]" "input to a PTY that went as stdin"
	run jq -c 'select(.proc == "process.Process/Start sent" and .req.pty) | .req.data' "$FAKE/calls.log"
	assert_output_has '"pty":'
	[[ $output != *stderr* && $output != *stdout* ]] || fail "a PTY's output came as stdout or stderr: $output"

	# the end of a pipe is a typed ^D, never CloseStdin (envd refuses it for a PTY)
	: >"$FAKE/calls.log"
	run timeout 60 sh -c "printf 'line\n' | sbexec -m '$MNT' -t cat"
	assert_status 0
	assert_output_has line
	# (the PTY's input: the watcher's questions go to another process)
	run calls process.Process/SendInput 'select(.input.pty != null) | .input.pty'
	assert_eq "$(tail -n 1 <<<"$output")" '"BA=="'
	(($(requests envd POST /process.Process/CloseStdin) == 0)) || fail "CloseStdin sent for a PTY"

	# a timeout kills the command's processes by its marker, as root
	: >"$FAKE/calls.log"
	run sb -t --timeout 1 sh -c 'sleep 30 & wait'
	assert_status 124
	marker=$(calls process.Process/Start 'select(.process.args[-1] == "sleep 30 & wait") | .process.envs.SBFS_EXEC')
	run calls process.Process/Start 'select(.process.args[2] == "sbfs-kill") | .process.args[3]'
	[[ $marker == \"*\" && $output == "$marker" ]] || fail "no kill by the command's marker $marker: $output"
	(($(requests envd POST /process.Process/Start 200 root) >= 1)) || fail "the kill did not run as root"
}

@test "e2b: the fake's envd takes and refuses for a PTY process what envd does" {
	start_fake
	mount_sbfs
	run timeout 60 python3 - "$(ctl id "$SBFS_SANDBOX")" <<'PY'
import base64, http.client, json, os, struct, sys, urllib.parse
sid = sys.argv[1]
u = urllib.parse.urlsplit(os.environ["E2B_API_URL"])
def conn():
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)
c = conn()
c.request("GET", "/sandboxes/" + sid, headers={"X-API-Key": os.environ["E2B_API_KEY"]})
token = json.loads(c.getresponse().read())["envdAccessToken"]
hdr = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983", "X-Access-Token": token}
def start(req):
    """A Start stream left open: its connection and the pid."""
    c = conn()
    body = json.dumps(req).encode()
    c.request("POST", "/process.Process/Start", struct.pack(">BI", 0, len(body)) + body,
              dict(hdr, **{"Content-Type": "application/connect+json"}))
    r = c.getresponse()
    flags, n = struct.unpack(">BI", r.read(5))
    return r, json.loads(r.read(n))["event"]["start"]["pid"]
def call(proc, req):
    c = conn()
    c.request("POST", "/process.Process/" + proc, json.dumps(req),
              dict(hdr, **{"Content-Type": "application/json"}))
    r = c.getresponse()
    body = json.loads(r.read() or b"{}")
    print(proc, list(req.get("input", {})) or list(req.get("pty", {})), r.status, body.get("code", "ok"))
b64 = lambda b: base64.b64encode(b).decode()
pty, ppid = start({"process": {"cmd": "cat"}, "pty": {"size": {"cols": 80, "rows": 24}}})
call("SendInput", {"process": {"pid": ppid}, "input": {"stdin": b64(b"x\n")}})
call("CloseStdin", {"process": {"pid": ppid}})
call("Update", {"process": {"pid": ppid}, "pty": {"size": {"cols": 100, "rows": 30}}})
call("SendInput", {"process": {"pid": ppid}, "input": {"pty": b64(b"typed\n")}})
pipe, spid = start({"process": {"cmd": "cat"}, "stdin": True})
call("SendInput", {"process": {"pid": spid}, "input": {"pty": b64(b"x\n")}})
call("Update", {"process": {"pid": spid}, "pty": {"size": {"cols": 100, "rows": 30}}})
bad = conn()
body = json.dumps({"process": {"cmd": "true"}, "pty": {"size": {"cols": -1}}}).encode()
bad.request("POST", "/process.Process/Start", struct.pack(">BI", 0, len(body)) + body,
            dict(hdr, **{"Content-Type": "application/connect+json"}))
print("Start bad size", bad.getresponse().read()[5:].decode())
for pid in (ppid, spid):
    call("SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
PY
	assert_status 0
	assert_output_has "SendInput ['stdin'] 500 internal"
	assert_output_has "CloseStdin [] 500 unknown"
	assert_output_has "Update ['size'] 200 ok"
	assert_output_has "SendInput ['pty'] 200 ok"
	assert_output_has "SendInput ['pty'] 500 internal"
	assert_output_has "Update ['size'] 500 internal"
	assert_output_has '"invalid_argument"'
}
