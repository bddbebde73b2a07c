#!/usr/bin/env bats
# The modal backend against the fake Modal (tests/fakes/modal), one fake per
# test so each can inject its own faults: every fault ends in a clear
# one-line error or is retried as the SDKs do, and never hangs.
# Runs only with SBFS_TEST_BACKEND=modal (once: on the plain entry; the TLS
# test here starts its own TLS fake); needs python3-grpcio, bwrap, openssl.

load helpers

FAKE_DIR=$SBFS_REPO/tests/fakes/modal

setup() {
	require_backend modal
	[[ ${MODAL_FAKE_MODE:-plain} == plain ]] || skip "modal.bats runs on the plain modal entry (its TLS test starts its own fake)"
	sbfs_setup
	export MODAL_TOKEN_ID=ak-fake MODAL_TOKEN_SECRET=as-fake MODAL_ENVIRONMENT=
	unset MODAL_PROFILE MODAL_IMAGE_BUILDER_VERSION FAKE_MODAL_CA SSL_CERT_FILE SSL_CERT_DIR
	export MODAL_CONFIG_PATH=$T/no-modal.toml
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

# start_fake [FAULTS_JSON [tls]]: a fresh fake Modal for this test. Its
# state is outside $T, which sbfs_teardown deletes while the fake must still
# answer.
start_fake() {
	FAKE=$(mktemp -d "${BATS_TMPDIR:-/tmp}/sbfs-fake-modal.XXXXXX")
	[[ -n ${1:-} ]] && printf '%s' "$1" >"$FAKE/faults.json"
	MODAL_SERVER_URL=$("$FAKE_DIR/run-fake.sh" "$FAKE" "${2:-plain}") || fail "fake Modal did not start" || return 1
	export MODAL_SERVER_URL FAKE
}

set_faults() { printf '%s' "$1" >"$FAKE/faults.json"; }

# calls METHOD: how many times the fake saw METHOD
fake_calls() { grep -c "^$1 " "$FAKE/calls.log" || true; }

# definition: the fake's record of the current mount's sandbox
definition() {
	local f
	f=$(grep -l "\"name\": \"$SBFS_SANDBOX\"" "$FAKE"/sandboxes/*/definition.json | head -n1)
	[[ -n $f ]] || fail "no sandbox record for $SBFS_SANDBOX" || return 1
	cat "$f"
}

# execs: the fake's record of the current mount's TaskExecStarts, a JSON
# object a line
execs() {
	local f
	f=$(grep -l "\"name\": \"$SBFS_SANDBOX\"" "$FAKE"/sandboxes/*/definition.json | head -n1)
	[[ -n $f ]] || fail "no sandbox record for $SBFS_SANDBOX" || return 1
	cat "${f%/definition.json}/execs.jsonl"
}

# on_terminal ROWS COLS CMD...: runs CMD on a terminal of that size (for
# at most 60 s); prints what it showed
on_terminal() {
	python3 - "$@" <<'PY'
import fcntl, os, pty, signal, struct, sys, termios
rows, cols, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
signal.alarm(60)
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.execvp(argv[0], argv)
out = b""
while True:
    try:
        d = os.read(fd, 4096)
    except OSError:
        break
    if not d:
        break
    out += d
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
PY
}

# try_mount [EXTRA_OPTS]: run a mount expected to fail; output in $output
try_mount() {
	mkdir -p "$T/mnt"
	run timeout 90 sbfs -o "$(sbfs_opts mnt "${1:-}")" "$T/mnt"
}

@test "modal: mount, exec, write and list against the fake; destroy on unmount" {
	start_fake
	mount_sbfs
	run definition
	assert_output_has '"network": 2' # BLOCKED by default
	assert_output_has '"timeout": 3600'
	assert_output_has '"workdir": "/workspace"'
	assert_output_has '"sbfs": "1"'
	echo hello >"$MNT/a.txt"
	run sb cat a.txt
	assert_status 0
	assert_eq "$output" hello
	run ls -l "$MNT"
	assert_output_has a.txt
	local id=$SBFS_SANDBOX
	modal_sandbox_exists "$id" || fail "sandbox $id is not running"
	unmount_sbfs
	poll 10 modal_sandbox_gone "$id" || fail "sandbox $id still runs after unmount"
}

@test "modal: over TLS with the server's CA as ca_file=, SSL_CERT_FILE or SSL_CERT_DIR; never without" {
	start_fake "" tls
	local ca=$FAKE/tls/ca.pem
	[[ $MODAL_SERVER_URL == https://localhost:* && -s $ca ]] || fail "TLS fake gave '$MODAL_SERVER_URL' and no CA"
	try_mount
	[[ $status -ne 0 ]] || fail "a mount trusted an unknown CA"
	assert_output_has "certificate is not trusted"
	assert_output_has "-o ca_file=, SSL_CERT_FILE or SSL_CERT_DIR"
	[[ $(grep -c . <<<"$output") == 1 ]] || fail "more than one line: $output"
	mount_sbfs -o "ca_file=$ca"
	echo tls >"$MNT/t"
	assert_eq "$(sb cat t)" tls # the router, over TLS too
	unmount_sbfs
	SSL_CERT_FILE=$ca mount_sbfs -n file
	assert_eq "$(sb ls)" ""
	unmount_sbfs
	# a directory is looked up by subject hash: without the hash links the
	# same CA is not found, with them it is
	mkdir "$T/certs"
	cp "$ca" "$T/certs/fake-modal-ca.pem"
	SSL_CERT_DIR=$T/certs try_mount
	[[ $status -ne 0 ]] || fail "an unhashed SSL_CERT_DIR was trusted"
	assert_output_has "certificate is not trusted"
	openssl rehash "$T/certs" || c_rehash "$T/certs" >/dev/null
	SSL_CERT_DIR=$T/certs mount_sbfs -n dir
	echo dir >"$MNT/d"
	assert_eq "$(sb cat d)" dir
	unmount_sbfs
	try_mount "ca_file=$T/nope.pem"
	assert_output_has "-o ca_file= names '$T/nope.pem', which cannot be read"
	SSL_CERT_DIR=$T/nocerts try_mount "ca_file=$ca"
	assert_output_has "SSL_CERT_DIR names '$T/nocerts', which is not a readable directory"
	[[ $(grep -c . <<<"$output") == 1 ]] || fail "more than one line: $output"
}

@test "modal: no credentials is one line naming both fixes" {
	start_fake
	unset MODAL_TOKEN_ID MODAL_TOKEN_SECRET
	try_mount
	[[ $status -ne 0 ]] || fail "mount succeeded without credentials"
	assert_output_has "no Modal credentials: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET or run \`modal token new\`"
	nothing_left_behind "$T/mnt"
}

@test "modal: credentials from the active profile of the config file" {
	start_fake
	unset MODAL_TOKEN_ID MODAL_TOKEN_SECRET
	printf '[default]\ntoken_id = "ak-wrong"\ntoken_secret = "as-wrong"\n[ci]\ntoken_id = "ak-fake"\ntoken_secret = "as-fake"\nactive = true\n' >"$T/modal.toml"
	export MODAL_CONFIG_PATH=$T/modal.toml
	mount_sbfs
	run sb echo ok
	assert_eq "$output" ok
}

@test "modal: rejected credentials say how to fix them" {
	start_fake
	export MODAL_TOKEN_SECRET=as-wrong
	try_mount
	[[ $status -ne 0 ]] || fail "mount succeeded with a bad token"
	assert_output_has "Modal rejected the credentials"
	assert_output_has "modal token new"
	assert_eq "$(fake_calls AppGetOrCreate)" 1 "UNAUTHENTICATED must not be retried"
	nothing_left_behind "$T/mnt"
}

@test "modal: a client-too-old rejection says to upgrade" {
	start_fake '{"client_too_old": true}'
	try_mount
	[[ $status -ne 0 ]] || fail "mount succeeded"
	assert_output_has "too old"
	assert_output_has "upgrade sbfs"
	nothing_left_behind "$T/mnt"
}

@test "modal: a trailers-only error is reported, not retried" {
	start_fake '{"trailers_only": {"method": "SandboxCreate", "code": 8, "message": "sandbox quota exceeded"}}'
	try_mount
	[[ $status -ne 0 ]] || fail "mount succeeded"
	assert_output_has "RESOURCE_EXHAUSTED: sandbox quota exceeded"
	assert_eq "$(fake_calls SandboxCreate)" 1
	nothing_left_behind "$T/mnt"
}

@test "modal: UNAVAILABLE twice is retried with one idempotency key" {
	start_fake '{"unavailable": {"method": "AppGetOrCreate", "count": 2}}'
	mount_sbfs
	run grep '^AppGetOrCreate ' "$FAKE/calls.log"
	assert_eq "$(wc -l <<<"$output")" 3
	assert_eq "$(awk '{print $2}' <<<"$output" | sort -u | wc -l)" 1 "one idempotency key"
	assert_eq "$(awk '{print $3}' <<<"$output" | tr '\n' ' ')" "0 1 2 "
}

@test "modal: UNAVAILABLE beyond the retries fails the mount clearly" {
	start_fake '{"unavailable": {"method": "SandboxCreate", "count": 100}}'
	SECONDS=0
	try_mount
	[[ $status -ne 0 ]] || fail "mount succeeded"
	assert_output_has "Modal sandbox create failed: UNAVAILABLE"
	assert_eq "$(fake_calls SandboxCreate)" 4 "3 retries"
	((SECONDS < 30)) || fail "took ${SECONDS}s"
	nothing_left_behind "$T/mnt"
}

@test "modal: a server throttle hint is waited out" {
	start_fake '{"throttle": {"method": "AppGetOrCreate", "count": 2, "retry_after": 0.3}}'
	mount_sbfs
	assert_eq "$(fake_calls AppGetOrCreate)" 3
}

@test "modal: dropped output streams resume at their offset" {
	start_fake
	mount_sbfs
	set_faults '{"drop_stream": {"count": 4}}'
	run sb sh -c 'seq 1 30000; seq 1 20000 >&2'
	assert_status 0
	assert_eq "$(sb sh -c 'seq 1 30000' | md5sum)" "$(seq 1 30000 | md5sum)"
	assert_eq "$(sb sh -c 'seq 1 20000 >&2' 2>&1 >/dev/null | md5sum)" "$(seq 1 20000 | md5sum)"
}

@test "modal: an expired router token is refreshed" {
	start_fake
	mount_sbfs
	set_faults '{"expire_jwt": {"count": 1}}'
	run sb echo after-refresh
	assert_status 0
	assert_eq "$output" after-refresh
	[[ $(fake_calls TaskGetCommandRouterAccess) -ge 2 ]] || fail "no router access refresh"
}

@test "modal: a sandbox terminated mid-command ends sbexec with 125, and the mount with EIO" {
	start_fake
	mount_sbfs
	set_faults '{"terminate_on_exec": {"match": "sleep", "after": 1.0, "count": 1}}'
	SECONDS=0
	run sb sleep 60
	assert_status 125
	assert_output_has "gone"
	((SECONDS < 20)) || fail "sbexec took ${SECONDS}s"
	run ls "$MNT"
	[[ $status -ne 0 ]] || fail "ls on a dead sandbox succeeded"
	unmount_sbfs
}

@test "modal: a command timeout gives 124 and keeps the sandbox" {
	start_fake
	mount_sbfs
	run sb --timeout 1 sleep 30
	assert_status 124
	run sb echo still-here
	assert_eq "$output" still-here
}

@test "modal: a guest SIGKILL is a signal, not a timeout" {
	start_fake
	mount_sbfs
	run sb --timeout 30 sh -c 'kill -9 $$'
	assert_status 137
	run sb echo alive
	assert_eq "$output" alive
}

@test "modal: an image that fails to build is a clear error" {
	start_fake
	try_mount image=bad:tag
	[[ $status -ne 0 ]] || fail "mount succeeded"
	assert_output_has "Modal image build of 'bad:tag' failed"
	nothing_left_behind "$T/mnt"
}

@test "modal: network spec: allowlist needs egress_enforcement=sni" {
	start_fake
	try_mount allow_egress_to=pypi.org
	[[ $status -ne 0 ]] || fail "mount succeeded"
	assert_output_has "egress_enforcement=sni"
	try_mount "network,allow_egress_to=pypi.org,egress_enforcement=sni"
	[[ $status -ne 0 ]] || fail "mount succeeded"
	assert_output_has "contradictory"
	local bad
	for bad in https://pypi.org pypi.org:443 10.0.0.1 localhost '*.*.example.com' 'a..b'; do
		try_mount "allow_egress_to=$bad,egress_enforcement=sni"
		[[ $status -ne 0 ]] || fail "allow_egress_to=$bad was accepted"
		assert_output_has "not a bare hostname"
	done
	mount_sbfs -o "allow_egress_to=pypi.org:*.pythonhosted.org,egress_enforcement=sni"
	run definition
	assert_output_has '"network": 3'
	assert_output_has '"domains": ["pypi.org", "*.pythonhosted.org"]'
}

@test "modal: spec fields reach SandboxCreate" {
	start_fake
	mount_sbfs -o "network,cpu=1.5,memory=2048,sandbox_timeout=600,idle_timeout=120,gpu=a10g:2,tag=team=ml"
	run definition
	assert_output_has '"network": 1'
	assert_output_has '"timeout": 600'
	assert_output_has '"idle": 120'
	assert_output_has '"milli_cpu": 1500'
	assert_output_has '"memory_mb": 2048'
	assert_output_has '"gpu": "A10G"'
	assert_output_has '"gpu_count": 2'
	assert_output_has '"team": "ml"'
}

@test "modal: sweep terminates the sandbox of a killed daemon, and only that" {
	start_fake
	mount_sbfs -n live
	local live=$SBFS_SANDBOX
	mount_sbfs -n dead
	local dead=$SBFS_SANDBOX
	kill -KILL "$SBFS_PID"
	poll 10 not_pid_alive "$SBFS_PID"
	run sbfs sweep -o backend=modal
	assert_status 0
	assert_output_has "terminated"
	poll 10 modal_sandbox_gone "$dead" || fail "orphan $dead still runs"
	modal_sandbox_exists "$live" || fail "sweep terminated the live mount's sandbox"
	fusermount3 -u -z "$T/dead" 2>/dev/null || true
}

@test "modal: sbexec -t asks for Modal's pty with the terminal's size and name (TaskExecStart pty_info)" {
	start_fake
	mount_sbfs
	cd "$MNT"
	run on_terminal 33 111 sbexec -t sh -c 'stty size; echo "term=$TERM"'
	assert_output_has "33 111"
	assert_output_has "term=xterm-256color"
	run on_terminal 20 70 sbexec -t -e TERM=vt100 sh -c 'echo "term=$TERM"'
	assert_output_has "term=vt100"
	run sb echo no-terminal
	assert_eq "$output" no-terminal
	run execs
	assert_status 0
	local want='{"enabled":true,"winsz_rows":33,"winsz_cols":111,"env_term":"xterm-256color","env_colorterm":"","env_term_program":"","pty_type":2,"no_terminate_on_idle_stdin":true}'
	assert_eq "$(jq -c 'select(.argv[2] // "" | contains("stty")) | [.stdout_config, .stderr_config, .pty_info]' <<<"$output")" "[1,1,$want]"
	assert_eq "$(jq -c 'select(.argv[2] // "" | contains("term=")) | .pty_info | [.winsz_rows, .winsz_cols, .env_term]' <<<"$output" | tail -n1)" '[20,70,"vt100"]'
	assert_eq "$(jq -c 'select(.argv == ["echo", "no-terminal"]) | .pty_info' <<<"$output")" null
}
