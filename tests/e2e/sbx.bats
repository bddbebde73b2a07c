#!/usr/bin/env bats
# The sbx backend against our fake sbx CLI (tests/fakes/sbx), one fake
# state per test so each can set its own policy and faults: the argv it
# gives the CLI (env never in it), the network-policy rule, the CLI's
# errors read into one clear line, its daemon notice kept out of the
# command's stderr, sweep by our records, and a VM that stops or dies.
# Runs only with SBFS_TEST_BACKEND=sbx. Needs bwrap, nsenter and jq.

load helpers

FAKE_DIR=$SBFS_REPO/tests/fakes/sbx

setup() {
	require_backend sbx
	sbfs_setup
	# outside $T: sbfs_teardown deletes $T while the fake must still answer
	SBX_FAKE_STATE=$(mktemp -d "${BATS_TMPDIR:-/tmp}/sbfs-fake-sbx.XXXXXX")
	export SBX_FAKE_STATE XDG_STATE_HOME=$T/state
	sbx policy init deny-all
}

teardown() {
	local rc=0 d
	sbfs_teardown || rc=$?
	if [[ -n ${SBX_FAKE_STATE:-} && -d $SBX_FAKE_STATE ]]; then
		for d in "$SBX_FAKE_STATE"/boxes/*/; do
			[[ -d $d ]] && sbx rm -f "$(basename "$d")" >/dev/null 2>&1
		done
		rm -rf "$SBX_FAKE_STATE"
	fi
	return $rc
}

ctl() { "$FAKE_DIR/fake_ctl" "$@"; }
calls() { ctl calls; }
# calls_of VERB: the logged argv lines of that sbx verb
calls_of() { calls | awk -v v="$1" '$2 == v'; }
status_field() { status_json | jq -r "$1"; }

# try_mount OPTS: a mount of sbx with exactly these options (no default
# policy declaration), expected to fail; output in $output
try_mount() {
	mkdir -p "$T/m"
	run timeout 90 sbfs -o "backend=sbx,log=$T/m.log${1:+,$1}" "$T/m"
}

# one_line_error: a failed mount said why in one line starting with sbfs:
one_line_error() {
	[ "$status" -ne 0 ] || fail "the mount did not fail: $output"
	[[ $output == sbfs:* ]] || fail "error does not start with 'sbfs:': $output"
	[ "$(wc -l <<<"$output")" -eq 1 ] || fail "error is not one line: $output"
}

@test "sbx: create's argv, a private empty workspace directory, env never in argv, all gone at unmount" {
	mount_sbfs -o "env=SBX_SECRET=s3cr3t-value,memory=3072,cpu=2"
	run calls_of create
	assert_output_has "create --name $SBFS_SANDBOX -q --memory 3072m --cpus 2 shell /"
	local ws
	ws=$(calls_of create | awk '{ print $NF }')
	[[ $ws == */sbfs-sbx-*/ws ]] || fail "workspace argument: $ws"
	[[ -d $ws ]] || fail "the workspace directory $ws does not exist"
	assert_eq "$(stat -c %a "$ws")" 700 "workspace directory mode"
	assert_eq "$(stat -c %a "${ws%/ws}")" 700 "private directory mode"
	assert_eq "$(find "$ws" -mindepth 1 | wc -l)" 0 "entries in the workspace directory"
	[[ $(stat -f -c %T "$ws") != fuse* ]] || fail "the workspace directory is on FUSE"
	run sb sh -c 'printf %s "$SBX_SECRET"; printf " %s" "$PER_CMD"'
	assert_eq "$output" "s3cr3t-value " "mount-time env in the guest"
	run sb -e PER_CMD=also-secret sh -c 'printf %s "$PER_CMD"'
	assert_eq "$output" also-secret
	# secrets travel in the env file, never on an argv (visible in ps)
	run calls
	[[ $output != *s3cr3t-value* && $output != *also-secret* ]] || fail "an env value is on the CLI's argv: $output"
	calls_of exec | grep -q -- '--env-file' || fail "no exec used --env-file"
	# a write goes over the exec's stdin (-i), never as base64 in argv
	head -c 300000 /dev/urandom >"$T/blob"
	cp "$T/blob" "$MNT/blob"
	assert_eq "$(sb sha256sum /workspace/blob | cut -d' ' -f1)" "$(sha256sum <"$T/blob" | cut -d' ' -f1)"
	run calls_of exec
	(($(wc -c <<<"$output") < 200000)) || fail "a write put the file's bytes on the CLI's argv"
	calls_of exec | grep -q -- ' -i ' || fail "no exec fed stdin with -i"
	[[ -e $XDG_STATE_HOME/sbfs/sbx/$SBFS_SANDBOX ]] || fail "no record of the sandbox for sweep"
	local id=$SBFS_SANDBOX envdir
	envdir=$(calls_of exec | grep -o -- '--env-file [^ ]*' | head -n1 | cut -d' ' -f2)
	envdir=${envdir%/*}
	[[ $envdir == "${ws%/ws}/env" && -d $envdir ]] || fail "env file directory: $envdir"
	[[ $(stat -c %a "$envdir") == 700 ]] || fail "env file directory mode $(stat -c %a "$envdir")"
	unmount_sbfs
	calls_of rm | grep -q -- "rm -f $id" || fail "unmount did not run sbx rm -f $id"
	ctl exists "$id" && fail "sandbox $id still exists after unmount"
	[[ ! -e ${ws%/ws} ]] || fail "private directory ${ws%/ws} left behind"
	[[ ! -e $XDG_STATE_HOME/sbfs/sbx/$id ]] || fail "record of $id left behind"
	[[ ! -e $envdir ]] || fail "the env file directory $envdir is left: $(ls -A "$envdir")"
}

@test "sbx: the network rule: block only under a declared deny-all, allowlists narrow it, -o network opens" {
	# the default (block_network) needs deny-all declared
	try_mount ""
	one_line_error
	assert_output_has "host_network_policy=deny-all"
	assert_output_has "-o network"
	try_mount "host_network_policy=allow-all"
	one_line_error
	assert_output_has "host_network_policy is allow-all"
	try_mount "host_network_policy=sometimes"
	one_line_error
	assert_output_has "host_network_policy= takes deny-all, allow-all or unknown"
	# an allowlist only narrows deny-all
	try_mount "host_network_policy=unknown,allow_egress_to=api.example.com"
	one_line_error
	assert_output_has "only narrows a deny-all"
	try_mount "host_network_policy=deny-all,allow_egress_to=a.example.com,network"
	one_line_error
	[[ -z $(calls_of create) ]] || fail "a refused mount created a sandbox: $(calls_of create)"
	nothing_left_behind "$T/m"

	mount_sbfs -n allow -o "allow_egress_to=api.example.com:*.example.org"
	run calls_of policy
	assert_output_has "$(printf '%q ' policy allow network "$SBFS_SANDBOX" 'api.example.com,*.example.org')"
	run sb sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
	assert_eq "$output" lo "interfaces under an allowlist (the fake blocks all)"

	# -o network under deny-all: this sandbox is opened
	mount_sbfs -n open -o network
	run calls_of policy
	assert_output_has "$(printf '%q ' policy allow network "$SBFS_SANDBOX" '**')"
	run sb sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | sort'
	assert_eq "$output" "$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort)" "interfaces with -o network"
	# -o network with the policy unknown: open egress accepted as it is
	mkdir -p "$T/u"
	run timeout 60 sbfs -o "backend=sbx,log=$T/u.log,network" "$T/u"
	assert_status 0
	fusermount3 -u "$T/u"
}

@test "sbx: the CLI missing, signed out, no KVM, no policy: one line each saying what to do" {
	try_mount "host_network_policy=deny-all,sbx_path=/nonexistent/sbx"
	one_line_error
	assert_output_has "sbx_path=/nonexistent/sbx is not an executable"
	run timeout 60 env PATH=/usr/bin:/bin "$SBFS_BUILD/daemon/sbfs" -o "backend=sbx,host_network_policy=deny-all" "$T/m"
	one_line_error
	assert_output_has "not in PATH: install Docker Sandboxes"
	ctl fault signed-out
	try_mount "host_network_policy=deny-all"
	one_line_error
	assert_output_has "run \`sbx login\`"
	sbx login >/dev/null
	ctl fault no-kvm
	try_mount "host_network_policy=deny-all"
	one_line_error
	assert_output_has "KVM"
	ctl clear no-kvm
	sbx policy reset
	try_mount "host_network_policy=deny-all"
	one_line_error
	assert_output_has "sbx policy init deny-all"
	nothing_left_behind "$T/m"
	[[ -z $(ls "$XDG_STATE_HOME/sbfs/sbx" 2>/dev/null) ]] || fail "records left: $(ls "$XDG_STATE_HOME/sbfs/sbx")"
}

@test "sbx: a hung create ends at create_timeout, and what it may have made is removed" {
	ctl fault hang-create
	local t0=$SECONDS
	try_mount "host_network_policy=deny-all,create_timeout=2"
	one_line_error
	assert_output_has "create_timeout"
	((SECONDS - t0 < 30)) || fail "the hung create took $((SECONDS - t0)) s to give up"
	calls_of rm | grep -q -- 'rm -f sbfs-' || fail "no rm -f after the failed create"
	pgrep -f "sleep 100000" >/dev/null && {
		ps -o pid,args -C sleep >&2
		fail "the hung CLI is still running"
	}
	nothing_left_behind "$T/m"
	[[ -z $(ls "$XDG_STATE_HOME/sbfs/sbx" 2>/dev/null) ]] || fail "records left behind"
	try_mount "host_network_policy=deny-all,create_timeout=0"
	one_line_error
	assert_output_has "create_timeout= takes seconds"
}

@test "sbx: the daemon's notice never reaches the command's stderr; the exit status is the command's" {
	mount_sbfs
	ctl daemon-down
	sb sh -c 'printf "e1\n" >&2; printf "no newline" >&2; printf out; exit 7' >"$T/out" 2>"$T/err" && rc=0 || rc=$?
	assert_eq "$rc" 7 "exit status"
	assert_eq "$(cat "$T/out")" out
	assert_eq "$(cat "$T/err")" $'e1\nno newline' "stderr"
	[[ -e $SBX_FAKE_STATE/daemon-up ]] || fail "the fake did not restart its daemon: the check proved nothing"
	# and on a file call
	ctl daemon-down
	echo data >"$MNT/f"
	assert_eq "$(cat "$MNT/f")" data
	# a process one exec started outlives it, as in a VM
	sb sh -c 'sleep 300 >/dev/null 2>&1 & echo $! >/tmp/bg.pid'
	run sb sh -c 'kill -0 "$(cat /tmp/bg.pid)"'
	assert_status 0
}

@test "sbx: sbexec -t is sbx exec -i -t on a terminal: the command has one, its exit status and the CLI's errors come back" {
	mount_sbfs
	ctl daemon-down
	run sh -c 'echo typed | timeout 60 sbexec -m "$1" -t sh -c "read x; test -t 0 && test -t 2 && echo tty-\$x; exit 9" 2>"$2"' sh "$MNT" "$T/err"
	assert_status 9
	assert_output_has "tty-typed"
	[[ $output != *"Starting sandboxd"* ]] || fail "the CLI's notice reached the command's output: $output"
	[[ ! -s $T/err ]] || fail "stderr was not empty: $(cat "$T/err")"
	[[ -e $SBX_FAKE_STATE/daemon-up ]] || fail "the fake did not restart its daemon: the check proved nothing"
	calls_of exec | grep -q -- "exec -i -t -w " || fail "no exec -i -t: $(calls_of exec | cut -c1-200)"
	# argv is a program, as in every exec: not a builtin of the wrapper
	run timeout 60 sbexec -m "$MNT" -t exit 3 </dev/null
	assert_status 127
	# as docker's: with stdin attached, the CLI wants a terminal on it
	run sbx exec -i -t "$SBFS_SANDBOX" true </dev/null
	assert_status 1
	assert_output_has "the input device is not a TTY"
	# the CLI failing before the command: its own words, one line
	ctl fault exec-fail "failed to exec in sandbox: connection reset by peer" 1
	run timeout 60 sbexec -m "$MNT" -t true </dev/null
	assert_status 125
	assert_output_has "connection reset by peer"
	[ "$(wc -l <<<"$output")" -eq 1 ] || fail "reason is not one line: $output"
}

@test "sbx: under -t, sbexec's SIGTERM reaches the command's trap, and a cancel kills what it started" {
	mount_sbfs
	local nap=59.${RANDOM}1 pid
	# (not under timeout(1): it would pass the signal on twice, to
	# sbexec and to its group)
	sbexec -m "$MNT" -t sh -c 'trap "echo trapped-TERM; exit 5" TERM
		touch /workspace/started; while :; do sleep "$1"; done' sh "$nap" </dev/null >"$T/out" 2>&1 &
	pid=$!
	poll 30 test -e "$MNT/started" || fail "the command never started: $(cat "$T/out")"
	kill -TERM "$pid"
	poll 30 not_pid_alive "$pid" || { kill -KILL "$pid"; fail "sbexec still running after SIGTERM"; }
	wait "$pid" && rc=0 || rc=$?
	assert_eq "$rc" 5 "exit status after SIGTERM: $(cat "$T/out")"
	[[ $(cat "$T/out") == *trapped-TERM* ]] || fail "the trap did not run: $(cat "$T/out")"
	poll 10 bash -c '! pgrep -f "sleep ${1/./[.]}" >/dev/null' sh "$nap" ||
		fail "the command's sleep outlived it"
	# deaf to the first Ctrl-C and to its terminal's hangup: the second
	# kills it, and what it started, in the VM
	rm -f "$MNT/started"
	nap=59.${RANDOM}2
	sbexec -m "$MNT" -t sh -c 'trap "" INT HUP; touch /workspace/started
		sleep "$1" & wait' sh "$nap" </dev/null >"$T/out" 2>&1 &
	pid=$!
	poll 30 test -e "$MNT/started" || fail "the command never started: $(cat "$T/out")"
	kill -INT "$pid"
	nap 0.5
	kill -INT "$pid"
	poll 30 not_pid_alive "$pid" || { kill -KILL "$pid"; fail "sbexec still running after two Ctrl-C"; }
	wait "$pid" && rc=0 || rc=$?
	assert_eq "$rc" 130 "exit status after two Ctrl-C: $(cat "$T/out")"
	poll 10 bash -c '! pgrep -f "sleep ${1/./[.]}" >/dev/null' sh "$nap" ||
		fail "what the command started outlived the cancel"
}

@test "sbx: exec failures: a CLI error before the command is one line, a daemon timeout is retried" {
	mount_sbfs
	ctl fault exec-fail "failed to exec in sandbox: connection reset by peer" 1
	run timeout 60 sbexec -m "$MNT" true
	assert_status 125
	assert_output_has "connection reset by peer"
	[ "$(wc -l <<<"$output")" -eq 1 ] || fail "reason is not one line: $output"
	run sb echo fine
	assert_eq "$output" fine
	assert_eq "$(status_field .state)" running
	# nothing ran: a file call is tried again
	ctl fault daemon-timeout "" 1
	mkdir "$MNT/after-timeout"
	(($(status_field .retries) >= 1)) || fail "no retry counted"
	sb test -d /workspace/after-timeout
	# signed out while mounted: terminal, said once
	ctl fault signed-out
	run mkdir "$MNT/signed-out"
	[ "$status" -ne 0 ]
	poll 10 bash -c '[[ $(sbfs status --json "$1" | jq -r .state) == dead ]]' sh "$MNT" || fail "not dead after sign-out"
	[[ $(status_field .reason) == *"sbx login"* ]] || fail "reason: $(status_field .reason)"
	sbx login >/dev/null
}

@test "sbx: a stopped VM is started again by the next exec; a removed one is dead with a reason" {
	mount_sbfs
	echo kept >"$MNT/f"
	ctl stop "$SBFS_SANDBOX"
	ctl running "$SBFS_SANDBOX" && fail "the VM did not stop"
	run sb cat /workspace/f
	assert_eq "$output" kept "a file after the VM restarted"
	ctl running "$SBFS_SANDBOX" || fail "exec did not start the VM"
	ctl kill "$SBFS_SANDBOX"
	run timeout 30 sbexec -m "$MNT" true
	assert_status 125
	assert_eq "$(status_field .state)" dead
	[[ $(status_field .reason) == *"is gone"* ]] || fail "reason: $(status_field .reason)"
}

@test "sbx: sweep removes what a killed daemon left, keeps kept and in-use ones, reads every ls shape" {
	mount_sbfs -n live
	local live=$SBFS_SANDBOX
	mount_sbfs -n kept -o keep
	local kept=$SBFS_SANDBOX
	unmount_sbfs
	mount_sbfs -n orphan
	local orphan=$SBFS_SANDBOX ws
	ws=$(calls_of create | awk -v n="$orphan" '$4 == n { print $NF }')
	[[ -d $ws ]] || fail "no workspace dir for $orphan"
	kill -KILL "$SBFS_PID"
	poll 10 not_pid_alive "$SBFS_PID"
	fusermount3 -u -z "$MNT" 2>/dev/null || true
	ctl exists "$orphan" || fail "the orphan is already gone: the sweep would prove nothing"
	# a list in a shape sweep cannot read: an error, nothing removed
	ctl fault ls-format garbage
	run timeout 60 sbfs sweep -o backend=sbx
	[ "$status" -ne 0 ]
	assert_output_has "nothing was removed"
	ctl exists "$orphan" || fail "sweep removed something from a list it could not read"
	for shape in id-state array sandboxes; do
		ctl fault ls-format "$shape"
		run timeout 60 sbfs sweep -o backend=sbx
		assert_status 0
		assert_output_has "$live: in use by sbfs pid"
		assert_output_has "$kept: kept with -o keep"
		if [[ $shape == id-state ]]; then
			assert_output_has "$orphan: removed"
			ctl exists "$orphan" && fail "sweep ($shape) did not remove the orphan"
		fi
	done
	[[ ! -e ${ws%/ws} ]] || fail "the orphan's private directory ${ws%/ws} is left"
	[[ ! -e $XDG_STATE_HOME/sbfs/sbx/$orphan ]] || fail "the orphan's record is left"
	ctl exists "$kept" || fail "the kept sandbox is gone"
	# removed with sbx itself after its daemon died: sweep forgets it
	mount_sbfs -n removed
	local removed=$SBFS_SANDBOX rws
	rws=$(calls_of create | awk -v n="$removed" '$4 == n { print $NF }')
	kill -KILL "$SBFS_PID"
	poll 10 not_pid_alive "$SBFS_PID"
	fusermount3 -u -z "$MNT" 2>/dev/null || true
	sbx rm -f "$removed"
	[[ -d $rws && -e $XDG_STATE_HOME/sbfs/sbx/$removed ]] || fail "nothing left for sweep to forget"
	run timeout 60 sbfs sweep -o backend=sbx
	assert_status 0
	assert_output_has "$removed: forgotten"
	[[ ! -e ${rws%/ws} && ! -e $XDG_STATE_HOME/sbfs/sbx/$removed ]] || fail "sweep left the record or private directory of $removed"
	run sbfs destroy -o backend=sbx "$kept"
	assert_status 0
	ctl exists "$kept" && fail "sbfs destroy left $kept"
	[[ ! -e $XDG_STATE_HOME/sbfs/sbx/$kept ]] || fail "the destroyed sandbox's record is left"
	ctl clear ls-format
}
