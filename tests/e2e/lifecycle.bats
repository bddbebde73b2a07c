#!/usr/bin/env bats
# Mount, unmount, signals, crashes, refusals: the sandbox lives exactly as
# long as the mount, and a failure leaves nothing behind.

load helpers

WS=/workspace

setup() {
	sbfs_setup
}

teardown() {
	sbfs_teardown
}

# has_sandbox_procs: the local sandbox runs as descendants of the daemon;
# without any, the "gone" checks below would prove nothing.
has_sandbox_procs() {
	backend_has_sandbox "$SBFS_REC"
}

# eio_on_new_dir: mkdir on the mount fails with EIO.
eio_on_new_dir() {
	local out
	out=$(mkdir "$MNT/probe-$RANDOM$RANDOM" 2>&1) && return 1
	[[ $out == *"Input/output error"* ]]
}

# destroy_kept ID: remove a sandbox that -o keep left running.
# ID: the sandbox id (a mount record holds it)
destroy_kept() {
	local rec
	for rec in "$T"/.mounts/*; do
		[[ $(cat "$rec/sandbox" 2>/dev/null) == "$1" ]] && backend_sandbox_destroy "$rec" && return 0
	done
	return 0
}

# kept_sandbox_exists ID: the sandbox -o keep left is still there (local:
# its workspace directory with the file the test wrote).
kept_sandbox_exists() {
	backend_sandbox_exists "$1"
}

# sweep_spares ID: `sbfs sweep` runs and leaves the kept sandbox ID.
sweep_spares() {
	run timeout 120 sbfs sweep -o "$(backend_sweep_opts)"
	assert_status 0
	# line by line: other tests' orphans may be removed in the same sweep
	local line
	while IFS= read -r line; do
		[[ $line == *"$1"*removed* || $line == *removed*"$1"* || $line == *"$1: terminated"* ]] &&
			{ fail "sweep removed the kept sandbox $1: $output"; return 1; }
	done <<<"$output"
	kept_sandbox_exists "$1" || fail "the kept sandbox $1 is gone after sweep: $output"
}

@test "fusermount3 -u: daemon exits, sandbox processes and workspace are gone" {
	mount_sbfs
	[ -e "$T/mnt.log" ] || fail "log=FILE was not created"
	echo x >"$MNT/f"
	sb true
	has_sandbox_procs
	unmount_sbfs
	not_mounted "$MNT"
	assert_sandbox_gone
}

@test "umount: same as fusermount3 -u" {
	[[ $EUID == 0 ]] || skip "umount of a FUSE mount needs root"
	mount_sbfs
	has_sandbox_procs
	umount "$MNT"
	poll 30 not_pid_alive "$SBFS_PID" || fail "daemon did not exit after umount"
	assert_sandbox_gone
}

@test "SIGTERM: unmounts, destroys the sandbox, exits 0" {
	mount_sbfs -f
	echo x >"$MNT/f"
	has_sandbox_procs
	kill -TERM "$SBFS_FG_PID"
	poll 30 not_pid_alive "$SBFS_FG_PID" || fail "daemon still running 30s after SIGTERM"
	rc=0
	wait "$SBFS_FG_PID" || rc=$?
	assert_eq "$rc" 0 "daemon exit status after SIGTERM"
	not_mounted "$MNT" || fail "still mounted after SIGTERM"
	assert_sandbox_gone
}

@test "SIGINT: unmounts, destroys the sandbox, exits 0" {
	mount_sbfs -f
	has_sandbox_procs
	kill -INT "$SBFS_FG_PID"
	poll 30 not_pid_alive "$SBFS_FG_PID" || fail "daemon still running 30s after SIGINT"
	rc=0
	wait "$SBFS_FG_PID" || rc=$?
	assert_eq "$rc" 0 "daemon exit status after SIGINT"
	not_mounted "$MNT" || fail "still mounted after SIGINT"
	assert_sandbox_gone
}

@test "-f: foreground daemon serves, exits 0 after fusermount3 -u" {
	mount_sbfs -f
	echo x >"$MNT/f"
	assert_eq "$(sb cat "$WS/f")" x
	fusermount3 -u "$MNT"
	poll 30 not_pid_alive "$SBFS_FG_PID" || fail "daemon still running after unmount"
	rc=0
	wait "$SBFS_FG_PID" || rc=$?
	assert_eq "$rc" 0
	assert_sandbox_gone
}

@test "-d: debug output, still serves, exits 0 after unmount" {
	mount_sbfs -d
	ls "$MNT" >/dev/null
	fusermount3 -u "$MNT"
	poll 30 not_pid_alive "$SBFS_FG_PID" || fail "daemon still running after unmount"
	rc=0
	wait "$SBFS_FG_PID" || rc=$?
	assert_eq "$rc" 0
	[ -s "$T/mnt.fg.out" ] || fail "-d printed nothing"
}

@test "kill -9 of the daemon leaves no sandbox process; the stale mount can be cleaned" {
	mount_sbfs
	cd "$MNT"
	# a duration of its own: the same test may run beside this one on
	# another backend, whose sandbox processes pgrep sees too
	nap=299.${RANDOM}7
	sbexec sleep "$nap" >/dev/null 2>"$T/sbexec.err" &
	sbexec_pid=$!
	cd /
	poll 20 pgrep -f "sleep ${nap/./[.]}" >/dev/null || fail "the sandbox command never started"
	has_sandbox_procs
	kill -KILL "$SBFS_PID"
	poll 15 procs_gone "$SBFS_REC/procs" || {
		procs_alive "$SBFS_REC/procs" | while IFS=: read -r p _; do ps -o pid=,args= -p "$p"; done >&2
		fail "sandbox processes survived kill -9 of the daemon"
	}
	poll 20 not_pid_alive "$sbexec_pid" || {
		kill "$sbexec_pid"
		fail "sbexec hangs after its daemon died"
	}
	rc=0
	wait "$sbexec_pid" || rc=$?
	assert_eq "$rc" 125 "sbexec status when the daemon dies under it"
	fusermount3 -u -z "$MNT"
	not_mounted "$MNT"
}

@test "missing mountpoint: one-line error, nothing left behind" {
	run sbfs -o "$(sbfs_opts mnt)" "$T/does-not-exist"
	[ "$status" -ne 0 ]
	[[ $output == sbfs:* ]] || fail "error does not start with 'sbfs:': $output"
	[ "$(wc -l <<<"$output")" -eq 1 ] || fail "error is not one line: $output"
	nothing_left_behind "$T/does-not-exist"
}

@test "mountpoint that is a file: error, nothing left behind" {
	touch "$T/file"
	run sbfs -o "$(sbfs_opts mnt)" "$T/file"
	[ "$status" -ne 0 ]
	[[ $output == sbfs:* ]] || fail "error does not start with 'sbfs:': $output"
	nothing_left_behind "$T/file"
}

@test "busy mountpoint (already mounted): error; the first mount keeps working" {
	mount_sbfs
	echo first >"$MNT/f"
	before=$(backend_workspaces_count)
	run timeout 60 sbfs -o "$(sbfs_opts second)" "$MNT"
	[ "$status" -ne 0 ]
	[ "$status" -ne 124 ] || fail "second sbfs on a busy mountpoint hung"
	[[ $output == sbfs:* ]] || fail "error does not start with 'sbfs:': $output"
	assert_eq "$(cat "$MNT/f")" first
	assert_eq "$(sb cat "$WS/f")" first
	assert_eq "$(backend_workspaces_count)" "$before" "local workspaces after the refused mount"
	n=$(grep -c " $MNT " /proc/self/mountinfo)
	assert_eq "$n" 1 "mounts on $MNT"
}

@test "unknown backend: error naming it, nothing left behind" {
	mkdir "$T/m"
	run sbfs -o "log=$T/m.log,backend=no-such-backend" "$T/m"
	[ "$status" -ne 0 ]
	[[ $output == sbfs:* ]] || fail "error does not start with 'sbfs:': $output"
	assert_output_has no-such-backend
	nothing_left_behind "$T/m"
}

@test "SBFS_BACKEND picks the backend; -o backend= overrides it" {
	mkdir "$T/m"
	run env SBFS_BACKEND=no-such-backend sbfs -o "log=$T/m.log" "$T/m"
	[ "$status" -ne 0 ]
	assert_output_has no-such-backend
	nothing_left_behind "$T/m"
	SBFS_BACKEND=no-such-backend mount_sbfs
	assert_eq "$(status_json | jq -r .backend)" "$SBFS_TEST_BACKEND"
}

@test "unknown option: error, nothing left behind" {
	mkdir "$T/m"
	run sbfs -o "$(sbfs_opts m no_such_option_sbfs=1)" "$T/m"
	[ "$status" -ne 0 ]
	assert_output_has no_such_option_sbfs
	nothing_left_behind "$T/m"
}

@test "allow_egress_to cannot be enforced here: refused, nothing left behind" {
	require_backend local docker
	mkdir "$T/m"
	run sbfs -o "$(sbfs_opts m allow_egress_to=example.com)" "$T/m"
	[ "$status" -ne 0 ]
	[[ $output == sbfs:* ]] || fail "error does not start with 'sbfs:': $output"
	assert_output_has allow_egress_to
	nothing_left_behind "$T/m"
}

@test "sbfs status on a directory that is not an sbfs mount fails" {
	run sbfs status --json "$T"
	[ "$status" -ne 0 ]
}

@test "sandbox killed mid-use: EIO within seconds, sbexec 125, status dead, unmount works" {
	mount_sbfs
	echo x >"$MNT/f"
	sb sh -c 'echo z > /workspace/unread'
	has_sandbox_procs
	kill_sandbox
	poll 10 eio_on_new_dir || fail "mkdir on the mount did not fail with EIO within 10s"
	run cat "$MNT/unread"
	[ "$status" -ne 0 ]
	assert_output_has "Input/output error"
	run timeout 30 sbexec -m "$MNT" true
	assert_status 125
	[ -n "$output" ] || fail "sbexec gave no reason"
	[ "$(wc -l <<<"$output")" -eq 1 ] || fail "reason is not one line: $output"
	st_rc=0
	st=$(status_json 2>&1) || st_rc=$?
	unmount_sbfs
	not_mounted "$MNT"
	assert_sandbox_gone
	# checked last so that a status failure does not hide the rest
	assert_eq "$st_rc" 0 "sbfs status --json exit status on a dead sandbox ($st)"
	assert_eq "$(jq -r .state <<<"$st")" dead
	[ -n "$(jq -r '.reason // empty' <<<"$st")" ] || fail "status gives no reason: $st"
}

# The lifetime must outlast the mount itself, which a loaded machine can
# take seconds to finish (a 2 s lifetime sometimes ended first).
@test "sandbox_timeout=10: afterwards the sandbox is gone and operations fail with EIO" {
	mount_sbfs -o sandbox_timeout=10
	has_sandbox_procs
	poll 40 eio_on_new_dir || fail "no EIO within 40s of a 10s sandbox lifetime"
	run timeout 30 sbexec -m "$MNT" true
	assert_status 125
	poll 15 procs_gone "$SBFS_REC/procs" || fail "sandbox processes still running after its lifetime"
	st=$(status_json 2>&1) || true
	unmount_sbfs
	assert_sandbox_gone
	assert_eq "$(jq -r .state <<<"$st" 2>/dev/null)" dead "state in sbfs status ($st)"
}

@test "-o keep prints the sandbox id and keeps it; attach=ID mounts it again" {
	mount_sbfs -o keep
	id=$SBFS_SANDBOX
	[ -n "$id" ] || fail "no sandbox id in status"
	echo kept-data >"$MNT/f"
	unmount_sbfs
	[[ "$SBFS_MOUNT_OUT" == *"$id"* ]] || {
		destroy_kept "$id"
		fail "mount output does not show the kept id $id: $SBFS_MOUNT_OUT"
	}
	rc=0
	mount_sbfs -n again -o "attach=$id" || rc=$?
	if ((rc == 0)); then
		got=$(cat "$MNT/f" 2>&1) || true
		got_sb=$(sb cat "$WS/f" 2>&1) || true
		unmount_sbfs || true
	fi
	destroy_kept "$id"
	assert_eq "$rc" 0 "mount -o attach=$id"
	assert_eq "$got" kept-data "file on the re-attached mount"
	assert_eq "$got_sb" kept-data "file in the re-attached sandbox"
}

@test "sbfs sweep never removes a sandbox kept with -o keep, also after an attach= round trip" {
	mount_sbfs -o keep
	local id=$SBFS_SANDBOX
	[ -n "$id" ] || fail "no sandbox id in status"
	echo kept-data >"$MNT/f"
	unmount_sbfs
	kept_sandbox_exists "$id" || fail "-o keep did not keep sandbox $id"
	local rc=0
	sweep_spares "$id" || rc=$?
	if ((rc == 0)); then
		mount_sbfs -n again -o "attach=$id" || rc=$?
		((rc == 0)) && { unmount_sbfs || rc=$?; }
		((rc == 0)) && { sweep_spares "$id" || rc=$?; }
		((rc == 0)) && { mount_sbfs -n third -o "attach=$id" || rc=$?; }
		if ((rc == 0)); then
			got=$(cat "$MNT/f" 2>&1) || true
			unmount_sbfs || rc=$?
		fi
	fi
	destroy_kept "$id"
	assert_eq "$rc" 0 "keep, sweep, attach, sweep, attach"
	assert_eq "$got" kept-data "the kept file after two sweeps"
}
