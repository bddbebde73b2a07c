#!/usr/bin/env bats
# Mount, unmount, signals, crashes, refusals: the sandbox lives exactly as
# long as the mount, and a failure leaves nothing behind.

load helpers

WS=/workspace

setup() {
	sbfs_setup
}

teardown() {
	[[ ! -s $T/orphan.id ]] || kill_orphan_tree "$(cat "$T/orphan.id")"
	sbfs_teardown
}

# orphan_pids ID: the processes with workspace ID bound at /workspace.
orphan_pids() {
	grep -lsE -- " [^ ]*/$1(//deleted)? /workspace " /proc/[0-9]*/mountinfo | cut -d/ -f3 || true
}

# kill_orphan_tree ID: what a failed sweep test left running.
kill_orphan_tree() {
	local p
	for p in $(orphan_pids "$1"); do kill -KILL "$p" 2>/dev/null || true; done
}

# start_orphan_tree ID: what a lost parent-death signal leaves of a local
# sandbox: bwrap's pid 1 under another parent (here: the reaper, once the
# subshell that started it is gone), with workspace $T/root/ID bound at
# /workspace, and bwrap's command line as local_bwrap.c gives it.
start_orphan_tree() {
	local ws=$T/root/$1 d a=(--unshare-user-try --unshare-pid --ro-bind /usr /usr)
	mkdir -p "$ws"
	for d in /bin /sbin /lib /lib32 /lib64; do
		if [[ -L $d ]]; then a+=(--symlink "$(readlink "$d")" "$d"); elif [[ -d $d ]]; then a+=(--ro-bind "$d" "$d"); fi
	done
	a+=(--proc /proc --dev /dev --bind "$ws" /workspace --new-session)
	printf '%s\0' "${a[@]}" >"$T/orphan.args"
	echo "$1" >"$T/orphan.id"
	(setsid "$(command -v bwrap)" --args 4 -- /bin/sh -c 'while :; do sleep 3600; done' \
		4<"$T/orphan.args" </dev/null >/dev/null 2>&1 &)
	poll 10 orphan_runs "$1" || fail "the orphan tree did not start"
}

orphan_runs() { [[ -n $(orphan_pids "$1") ]]; }

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

kept_sandbox_gone() { ! kept_sandbox_exists "$1"; }

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

@test "sbfs umount: returns once the daemon exited and the sandbox is destroyed, with its status" {
	mount_sbfs
	echo x >"$MNT/f"
	has_sandbox_procs
	pid=$SBFS_PID
	run sbfs umount "$MNT"
	assert_status 0
	# no poll: umount itself waited for all of it
	not_pid_alive "$pid" || fail "the daemon still runs after sbfs umount returned"
	not_mounted "$MNT" || fail "still mounted after sbfs umount"
	sandbox_gone_check "$SBFS_REC" || fail "the sandbox still exists after sbfs umount returned"
	workspaces_left_check
}

@test "sbfs umount from inside the mount, and with no argument there" {
	mount_sbfs
	pid=$SBFS_PID
	run bash -c 'cd "$1" && sbfs umount' _ "$MNT"
	assert_status 0
	not_pid_alive "$pid" || fail "the daemon still runs after sbfs umount returned"
	not_mounted "$MNT" || fail "still mounted after sbfs umount"
}

@test "sbfs umount of a busy mount: exit 1 with the way out, the mount keeps working" {
	mount_sbfs
	(cd "$MNT" && exec sleep 300) &
	holder=$!
	poll 10 test -e "/proc/$holder/cwd" || true
	run sbfs umount "$MNT"
	kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null || true
	assert_status 1
	[[ $output == *"fuser -vm"* && $output == *"sbfs umount -l"* ]] || fail "no way out named: $output"
	echo still >"$MNT/g" || fail "the mount stopped working after a refused umount"
	assert_eq "$(sb cat "$WS/g")" still
	run sbfs umount "$MNT"
	assert_status 0
	not_mounted "$MNT" || fail "still mounted after the second sbfs umount"
}

@test "sbfs umount of a kept sandbox names it; it can be attached again" {
	mount_sbfs -o keep
	id=$SBFS_SANDBOX
	run sbfs umount "$MNT"
	rc=$status out=$output
	[[ $out == *"kept"*"attach=$id"* ]] || { destroy_kept "$id"; fail "umount did not name the kept sandbox $id: $out"; }
	kept_sandbox_exists "$id" || fail "the kept sandbox $id is gone"
	destroy_kept "$id"
	assert_eq "$rc" 0 "sbfs umount status"
}

@test "sbfs umount: usage errors exit 2; a directory that is not a mount exits 1" {
	run sbfs umount -x "$T"
	assert_status 2
	run sbfs umount "$T" "$T"
	assert_status 2
	run sbfs umount "$T"
	assert_status 1
	[[ $output == *"$T"* ]] || fail "the error does not name the directory: $output"
}

@test "mount -t fuse.sbfs and fstab: mount.fuse3's SOURCE MOUNTPOINT form, mount(8)'s words ignored, always nosuid,nodev" {
	require_cmd mount.fuse3 findmnt
	# fstab's words and what mount.fuse3 adds for root (dev,suid)
	mount_sbfs -H -o "defaults,noauto,_netdev,nofail,x-systemd.automount,comment=sbfs,noatime"
	echo via-helper >"$MNT/f"
	assert_eq "$(sb cat "$WS/f")" via-helper
	opts=$(findmnt -no OPTIONS "$MNT")
	[[ ,$opts, == *,nosuid,* && ,$opts, == *,nodev,* ]] || fail "not nosuid,nodev: $opts"
	[[ ,$opts, == *,noatime,* ]] || fail "noatime did not reach the kernel: $opts"
	assert_eq "$(findmnt -no FSTYPE "$MNT")" fuse.sbfs
}

@test "the systemd mount unit example: valid, and its mount and unmount do what systemd would" {
	require_cmd mount.fuse3 systemd-escape
	# docs/examples/mnt-box.mount, moved to a path of ours: a mount unit
	# is named after its Where=
	local where=$T/sd/box unit
	mkdir -p "$where"
	unit=$T/$(systemd-escape -p --suffix=mount "$where")
	sed -e "s|^Where=.*|Where=$where|" \
		-e "s|^Options=\(.*\)|Options=\1,$(sbfs_opts sd)|" \
		"$SBFS_REPO/docs/examples/mnt-box.mount" >"$unit"
	if command -v systemd-analyze >/dev/null; then
		run systemd-analyze verify --man=no "$unit"
		[[ $output != *"$(basename "$unit")"* ]] || fail "systemd-analyze verify: $output"
	fi
	local what type opts
	what=$(sed -n 's/^What=//p' "$unit")
	type=$(sed -n 's/^Type=//p' "$unit")
	opts=$(sed -n 's/^Options=//p' "$unit")
	[[ $what == "$(backend_sbfs_name)" ]] || skip "the example mounts $what"
	# what systemctl start runs
	run timeout 60 mount "$what" "$where" -t "$type" -o "$opts"
	assert_status 0
	is_mounted "$where" || fail "not mounted: $output"
	local pid
	pid=$(sbfs_daemon_pid "$where") || fail "no daemon for $where"
	echo from-unit >"$where/f"
	assert_eq "$(sbexec -m "$where" cat f)" from-unit
	# what systemctl stop runs: returns once write-back is drained
	run timeout 120 umount "$where"
	assert_status 0
	poll 60 not_pid_alive "$pid" || fail "the daemon outlived umount"
	not_mounted "$where"
}

@test "-o ro: reads work, writes fail with EROFS" {
	mount_sbfs -o ro
	sb sh -c 'echo from-sandbox >f'
	assert_eq "$(cat "$MNT/f")" from-sandbox
	run bash -c 'echo x >"$1/g"' _ "$MNT"
	[[ $status -ne 0 && $output == *"Read-only file system"* ]] || fail "a write on a ro mount: $output"
	run mkdir "$MNT/d"
	[[ $status -ne 0 && $output == *"Read-only file system"* ]] || fail "mkdir on a ro mount: $output"
}

@test "-o uid=,gid=: the sandbox's user shows as that id" {
	mount_sbfs -o uid=4242,gid=4343
	echo x >"$MNT/f"
	assert_eq "$(stat -c %u:%g "$MNT/f")" 4242:4343
	assert_eq "$(stat -c %u:%g "$MNT")" 4242:4343
}

@test "a non-empty mountpoint is refused unless -o nonempty; its files come back at unmount" {
	mkdir -p "$T/full"
	echo mine >"$T/full/keep"
	run sbfs -o "$(sbfs_opts full)" "$T/full"
	assert_status 1
	[[ $output == *"not empty"*"-o nonempty"* ]] || fail "no reason and way out: $output"
	not_mounted "$T/full" || fail "mounted although refused"
	mount_sbfs -n full -o nonempty
	[[ ! -e $MNT/keep ]] || fail "the mount shows the directory's own file"
	unmount_sbfs
	assert_eq "$(cat "$T/full/keep")" mine
}

@test "a mountpoint inside an sbfs mount is refused" {
	mount_sbfs
	mkdir "$MNT/inner"
	run sbfs -o "$(sbfs_opts inner)" "$MNT/inner"
	assert_status 1
	[[ $output == *"inside the sbfs mount"* ]] || fail "no reason: $output"
}

@test "a mistyped command is a usage error (exit 2), not a missing mountpoint; --version names backends and libraries" {
	run sbfs lsit
	assert_status 2
	[[ $output == *"'lsit' is neither a command"* ]] || fail "$output"
	run sbfs --version
	assert_status 0
	[[ $output == *"backends:"*"local"* && $output == *libfuse* && $output == *libcurl* && $output == *jansson* ]] ||
		fail "version lacks backends or libraries: $output"
	run sbfs -o fsname=x "$T"
	assert_status 2
	run sbfs -o ro=1 "$T"
	assert_status 2
	run sbfs docker:id local:id "$T"
	assert_status 2
}

@test "sbfs list shows each mount with its backend, sandbox and state" {
	mount_sbfs
	mount_sbfs -n second
	# stdout alone: a backend this machine cannot reach adds a note on stderr
	output=$(sbfs list 2>"$T/list.err") || fail "sbfs list failed: $(cat "$T/list.err")"
	for m in "$T/mnt" "$T/second"; do
		grep -F -- "$m" <<<"$output" | grep -q running || fail "$m is not listed as running: $output"
	done
	output=$(sbfs list --json 2>"$T/list.err") || fail "sbfs list --json failed: $(cat "$T/list.err")"
	assert_eq "$(jq -r --arg m "$T/second" '.[] | select(.mount == $m) | .sandbox' <<<"$output")" "$SBFS_SANDBOX"
	assert_eq "$(jq -r --arg m "$T/second" '.[] | select(.mount == $m) | .backend' <<<"$output")" "$(backend_sbfs_name)"
}

# kept_listed ID: what `sbfs list --json` says of sandbox ID, one
# compact object per line (nothing when it is not listed).
kept_listed() {
	local out
	out=$(timeout 60 sbfs list --json -o "$(backend_sweep_opts)" 2>"$T/list.err") ||
		{ fail "sbfs list failed: $(cat "$T/list.err")"; return 1; }
	jq -c --arg id "$1" '.[] | select(.sandbox == $id)' <<<"$out"
}

@test "sbfs list shows a kept sandbox without a mount until sbfs destroy removes it" {
	mount_sbfs -o keep
	local id=$SBFS_SANDBOX rc=0 entry text
	unmount_sbfs
	entry=$(kept_listed "$id") || rc=$?
	text=$(timeout 60 sbfs list -o "$(backend_sweep_opts)" 2>&1) || rc=$?
	run sbfs destroy -o "$(backend_sweep_opts)" "$id"
	[[ $status -eq 0 ]] || destroy_kept "$id"
	assert_eq "$rc" 0 "sbfs list"
	assert_eq "$(jq -c '[.backend, .state, .mount, (.started > 0)]' <<<"$entry")" \
		"[\"$(backend_sbfs_name)\",\"kept\",null,true]" "the listing of $id"
	grep -E "^$(backend_sbfs_name) +$id +kept +[0-9]+[smhd] +- +-$" <<<"$text" >/dev/null ||
		fail "no text line for the kept $id: $text"
	assert_status 0
	poll 30 kept_sandbox_gone "$id" || fail "sandbox $id still exists after sbfs destroy"
	assert_eq "$(kept_listed "$id")" "" "the listing of $id after sbfs destroy"
}

@test "sbfs list and status never wait on a stopped daemon: its mount is unreachable within 10 s" {
	# attr_timeout=0: any path walk to the mount root (realpath) would be
	# a request the stopped daemon never answers
	mount_sbfs -o attr_timeout=0
	local pid
	pid=$(sbfs_daemon_pid "$MNT")
	kill -STOP "$pid"
	timeout 60 sbfs list --json >"$T/list.out" 2>"$T/list.err" &
	local list=$!
	timeout 60 sbfs status "$MNT" >"$T/status.out" 2>&1 &
	local status=$!
	local list_rc=0 status_rc=0
	wait "$list" || list_rc=$?
	wait "$status" || status_rc=$?
	kill -CONT "$pid"
	assert_eq "$list_rc" 0 "sbfs list exit status ($(cat "$T/list.out" "$T/list.err"))"
	assert_eq "$(jq -r --arg m "$MNT" '.[] | select(.mount == $m) | .state' "$T/list.out")" unreachable
	jq -r --arg m "$MNT" '.[] | select(.mount == $m) | .reason' "$T/list.out" | grep -q "did not answer within 10 s" ||
		fail "no reason in the listing: $(cat "$T/list.out")"
	assert_eq "$status_rc" 1 "sbfs status exit status ($(cat "$T/status.out"))"
	run cat "$T/status.out"
	assert_eq "${#lines[@]}" 1 "lines sbfs status printed: $output"
	[[ $output == "sbfs: the sbfs daemon for $MNT did not answer within 10 s"* ]] || fail "status said: $output"
	# the daemon, running again, answers and unmounts as usual
	assert_eq "$(status_json | jq -r .state)" running
	unmount_sbfs
}

@test "sbfs destroy ID: a kept sandbox goes; a mounted one is refused; a gone one is an error" {
	mount_sbfs -o keep
	id=$SBFS_SANDBOX
	run sbfs destroy -o "$(backend_sweep_opts)" "$id"
	assert_status 1
	[[ $output == *"mounted at $MNT"*"sbfs umount"* ]] || fail "a mounted sandbox was not refused: $output"
	unmount_sbfs
	kept_sandbox_exists "$id" || fail "the kept sandbox $id is gone before destroy"
	run sbfs destroy -o "$(backend_sweep_opts)" "$id"
	[[ $status -eq 0 ]] || destroy_kept "$id"
	assert_status 0
	poll 30 kept_sandbox_gone "$id" || fail "sandbox $id still exists after sbfs destroy: $output"
	run sbfs destroy -o "$(backend_sweep_opts)" "$id"
	assert_status 1
	[[ $output == *"$id"* ]] || fail "the error does not name the sandbox: $output"
	run sbfs destroy
	assert_status 2
}

@test "config file: its defaults apply, its backend's section too, and -o overrides them" {
	export SBFS_CONFIG=$T/config
	cat >"$SBFS_CONFIG" <<-EOF
		# every mount
		writeback
		max_nodes = 4321
		[$(backend_sbfs_name)]
		max_nodes = 12345
		[no-such-backend]
		max_nodes = 999
	EOF
	mount_sbfs
	assert_eq "$(status_json | jq -c '[.writeback != null, .max_nodes]')" "[true,12345]"
	unmount_sbfs
	mount_sbfs -n again -o max_nodes=23456
	assert_eq "$(status_json | jq -r .max_nodes)" 23456
	unmount_sbfs
	printf 'max_nodes = lots\n' >"$SBFS_CONFIG"
	run sbfs -o "$(sbfs_opts third)" "$T/mnt"
	assert_status 2
	[[ $output == *"$SBFS_CONFIG line 1: "*"max_nodes"* ]] || fail "no file and line named: $output"
	not_mounted "$T/mnt" || fail "mounted despite a bad config file"
}

@test "the daemon's log: timestamped lines, -o log_level, a line at mount and at destroy" {
	mount_sbfs
	line=$(grep -m1 "mounted at" "$T/mnt.log") || fail "no line saying the sandbox was mounted"
	[[ $line =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z\ sbfs: ]] || fail "no timestamp: $line"
	unmount_sbfs
	grep -q "sandbox $SBFS_SANDBOX destroyed" "$T/mnt.log" || fail "no line saying the sandbox was destroyed"
	mount_sbfs -n quiet -o log_level=error
	! grep -q "mounted at" "$T/quiet.log" || fail "an info line with log_level=error"
	unmount_sbfs
}

# start_syslog_sink: a socket of this test's own stands in for /dev/log
# (SBFS_SYSLOG_SOCKET, the daemon's test hook); what it receives, one
# datagram a line, goes to $T/syslog.out. It ends when its socket is
# removed.
start_syslog_sink() {
	python3 "$BATS_TEST_DIRNAME/syslog_sink.py" "$SBFS_SYSLOG_SOCKET" "$T/syslog.out" \
		</dev/null >/dev/null 2>&1 3>&- &
	poll 30 test -S "$SBFS_SYSLOG_SOCKET" || fail "the syslog stand-in did not start"
}

# syslog_has PRI TEXT: a datagram from the current mount's daemon at
# priority PRI (LOG_DAEMON's: 27 error, 28 warning, 30 info, 31 debug),
# with syslog(3)'s header ("Dec  2 14:05:09 sbfs[PID]: "), whose text is
# TEXT (a glob), the mountpoint first.
syslog_has() {
	local line re="^<$1>[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} sbfs\[$SBFS_PID\]: (.*)$"
	[[ -f $T/syslog.out ]] || return 1
	while IFS= read -r line; do
		[[ $line =~ $re ]] && [[ ${BASH_REMATCH[1]} == $MNT:\ $2 ]] && return 0
	done <"$T/syslog.out"
	return 1
}

@test "a daemon without log= logs to syslog: ident sbfs, the level's priority, its mountpoint first, no timestamp of its own" {
	export SBFS_SYSLOG_SOCKET=$T/syslog.sock
	start_syslog_sink
	SBFS_TEST_NO_LOG=1 mount_sbfs -n plain
	assert_eq "$(status_json | jq -r .log)" syslog
	echo data >"$MNT/f"
	assert_eq "$(cat "$MNT/f")" data
	# a warning: a link out of the mount, refused
	sb ln -s ../../host-file "$WS/up"
	run ls -l "$MNT/up"
	[ "$status" -ne 0 ] || fail "the link out of the mount was shown: $output"
	run sbfs umount "$MNT"
	assert_status 0
	poll 10 syslog_has 30 "sandbox $SBFS_SANDBOX destroyed" ||
		fail "no destroyed line at LOG_INFO: $(cat "$T/syslog.out")"
	syslog_has 30 "sandbox $SBFS_SANDBOX (*) mounted at $MNT" ||
		fail "no mounted line at LOG_INFO: $(cat "$T/syslog.out")"
	syslog_has 28 "warning: symlink /up -> ../../host-file *" ||
		fail "no warning line at LOG_WARNING: $(cat "$T/syslog.out")"
	! grep -qE '[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z' "$T/syslog.out" ||
		fail "a log file's timestamp in a syslog line: $(cat "$T/syslog.out")"
	# no log file beside the control socket, nor anywhere else of ours
	! ls "$T"/*.log 2>/dev/null || fail "a log file was written"
	rm -f "$SBFS_SYSLOG_SOCKET"
}

@test "a daemon without log= and no syslog running serves and unmounts silently; a syslog started later gets its lines" {
	export SBFS_SYSLOG_SOCKET=$T/syslog.sock # nothing there yet
	SBFS_TEST_NO_LOG=1 mount_sbfs -n plain
	# (the mount may print what its backend says while it creates the
	# sandbox: until the mount is ready the terminal is the log)
	[[ $SBFS_MOUNT_OUT != *syslog* && $SBFS_MOUNT_OUT != *"$SBFS_SYSLOG_SOCKET"* ]] ||
		fail "the mount complained of the missing syslog: $SBFS_MOUNT_OUT"
	echo data >"$MNT/f"
	assert_eq "$(sb cat "$WS/f")" data
	assert_eq "$(cat "$MNT/f")" data
	start_syslog_sink
	run sbfs umount "$MNT"
	assert_status 0
	assert_eq "$output" "" "what sbfs umount printed"
	poll 10 syslog_has 30 "sandbox $SBFS_SANDBOX destroyed" ||
		fail "no destroyed line once syslog was there: $(cat "$T/syslog.out" 2>&1)"
	rm -f "$SBFS_SYSLOG_SOCKET"
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
	fusermount_u "$MNT"
	poll 30 not_pid_alive "$SBFS_FG_PID" || fail "daemon still running after unmount"
	rc=0
	wait "$SBFS_FG_PID" || rc=$?
	assert_eq "$rc" 0
	assert_sandbox_gone
}

@test "-d: debug output, still serves, exits 0 after unmount" {
	mount_sbfs -d
	ls "$MNT" >/dev/null
	fusermount_u "$MNT"
	poll 30 not_pid_alive "$SBFS_FG_PID" || fail "daemon still running after unmount"
	rc=0
	wait "$SBFS_FG_PID" || rc=$?
	assert_eq "$rc" 0
	[ -s "$T/mnt.fg.out" ] || fail "-d printed nothing"
}

@test "a daemon that crashes says so in its log, with a backtrace, and dies of the same signal" {
	# Under the sanitizers their own handler reports (and counts) a fault.
	[[ -z ${SBFS_SANITIZER_LOG_DIR:-} ]] || skip "the sanitizer's own report replaces this one"
	mount_sbfs
	echo data >"$MNT/f"
	kill -SEGV "$SBFS_PID"
	poll 15 not_pid_alive "$SBFS_PID" || fail "the daemon outlived SIGSEGV"
	grep -q "sbfs: error: crashed on signal 11 (SEGV); the next 'sbfs status' saves" "$T/mnt.log" ||
		fail "no crash line in the log: $(tail -n 5 "$T/mnt.log")"
	(($(grep -cE '\[0x[0-9a-f]+\]$' "$T/mnt.log") >= 3)) || fail "no backtrace in the log"
	run cat "$MNT/f"
	((status != 0)) || fail "a read of the dead mount succeeded"
	fusermount3 -u -z "$MNT"
	not_mounted "$MNT"
	backend_sandbox_destroy "$SBFS_REC" # what a crash leaves, as after kill -9
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
	# what a user reaches for next names the fix
	run sbfs status "$MNT"
	assert_status 1
	assert_output_has "is gone"
	assert_output_has "clear it with 'fusermount3 -u -z $MNT'"
	run sbfs -o "backend=$SBFS_TEST_BACKEND,$(backend_mount_opts)" "$MNT"
	assert_status 1
	assert_output_has "$MNT is a dead mount (Transport endpoint is not connected: its daemon is gone); clear it with 'fusermount3 -u -z $MNT' and mount again"
	fusermount3 -u -z "$MNT"
	not_mounted "$MNT"
}

@test "a mount that fails after its sandbox was created: the sandbox is gone when the mount says destroyed" {
	mkdir "$T/m"
	local i id
	# a few rounds: a young sandbox destroyed at once is where bwrap's
	# pid 1 outlived it (about 1 in 5 on a loaded machine)
	for i in 1 2 3; do
		run timeout 120 sbfs -o "$(sbfs_opts m "inject_faults=error:mount:1")" "$T/m"
		assert_status 1
		assert_output_has "cannot mount at $T/m: Input/output error"
		id=$(sed -n 's/.*sandbox \([^ ]*\) destroyed$/\1/p' <<<"$output")
		[[ -n $id ]] || fail "no 'sandbox ... destroyed' line: $output" || return 1
		# no poll: "destroyed" says it is gone already
		! backend_sandbox_runs "$id" || fail "round $i: sandbox $id still runs after: $output" || return 1
		nothing_left_behind "$T/m"
	done
}

@test "a user without access to /dev/fuse: one line naming it, and no sandbox is created" {
	[[ $(id -u) == 0 ]] || skip "needs root: to hide /dev/fuse in a mount namespace of its own and mount as another user"
	require_cmd setpriv unshare
	local u=$T/u opts
	mkdir -p "$u/m" "$u/root" "$u/run" "$u/state"
	chown -R 65534:65534 "$u"
	# the user must reach $u: $T and the suite's own dir are 0700
	chmod o+x "$T"
	[[ $(basename "$(dirname "$T")") != sbfs-e2e-suite.* ]] || chmod o+x "$(dirname "$T")"
	setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$u/m" ||
		skip "user 65534 cannot reach $u (a parent directory is closed to it)"
	# a root-only file over /dev/fuse, in this mount namespace only
	: >"$T/nofuse"
	chmod 0600 "$T/nofuse"
	opts="backend=$SBFS_TEST_BACKEND,$(backend_mount_opts | sed "s|local_root=$T/root|local_root=$u/root|")"
	run timeout 120 unshare -m --propagation private sh -c 'mount --bind "$1" /dev/fuse && shift && exec "$@"' \
		sh "$T/nofuse" setpriv --reuid=65534 --regid=65534 --clear-groups \
		env HOME="$u" XDG_RUNTIME_DIR="$u/run" XDG_STATE_HOME="$u/state" sbfs -o "$opts" "$u/m"
	assert_status 1
	[[ $output == "sbfs: error: no access to /dev/fuse: Permission denied ("*"you are 65534:65534): it must be readable and writable by you"* ]] ||
		fail "not the one line naming /dev/fuse: $output" || return 1
	# nothing was made: a create says so (local: a workspace), a destroy too
	[[ $output != *sandbox* && $output != *destroyed* ]] || fail "a sandbox was made: $output" || return 1
	assert_eq "$(find "$u/root" -mindepth 1 | wc -l)" 0 "workspaces made"
	nothing_left_behind "$u/m"
}

@test "sbfs sweep kills a local sandbox tree whose daemon and workspace are gone; a mounted one is spared" {
	require_backend local
	require_cmd bwrap setsid
	mount_sbfs
	echo live >"$MNT/f"
	local id
	id=sbfs-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	start_orphan_tree "$id"
	rm -rf "${T:?}/root/$id"
	run timeout 60 sbfs sweep -o "$(backend_sweep_opts)"
	assert_status 0
	assert_output_has "killed the processes of sandbox $id ("
	assert_output_has "its workspace is gone)"
	# no poll: sweep returns once they are gone
	[[ -z $(orphan_pids "$id") ]] || fail "still running after sweep: $(orphan_pids "$id")" || return 1
	[[ $output != *"$SBFS_SANDBOX"* ]] || fail "sweep named the mounted sandbox: $output" || return 1
	assert_eq "$(cat "$MNT/f")" live
	assert_eq "$(sb cat "$WS/f")" live
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
	assert_status 2 # a usage error, found before anything is made
	assert_eq "$output" "sbfs: unknown option 'no_such_option_sbfs' for backend '$(backend_sbfs_name)' (see sbfs --help)"
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

sandbox_dead() { [[ $(status_json | jq -r .state) == dead ]]; }

# Where sbfs keeps the idle clock itself (docker and sbx have none of their
# own): a command that runs longer than the idle timeout is use.
@test "idle_timeout=4: a command running 8 s keeps the sandbox; idle afterwards ends it" {
	require_backend docker docker-podman sbx
	mount_sbfs -o idle_timeout=4
	run timeout 90 sbexec -m "$MNT" sh -c 'sleep 8; echo outlived'
	assert_status 0
	assert_output_has outlived
	# asking the daemon is no use of the sandbox; a mkdir would be
	poll 60 sandbox_dead || fail "still running 60 s after a 4 s idle timeout: $(status_json)"
	st=$(status_json 2>&1) || true
	[[ $(jq -r .reason <<<"$st") == "idle timeout (4 s) ended"* ]] || fail "reason: $st"
	eio_on_new_dir || fail "no EIO after the idle timeout"
	unmount_sbfs
}

# log_ms FILE PATTERN: the time, in ms since the epoch, of FILE's first
# line matching PATTERN (a log line starts with its UTC time).
log_ms() {
	local line
	line=$(grep -m1 -- "$2" "$1") || return 1
	echo $(($(date -d "${line%% *}" +%s%N) / 1000000))
}

# A create slower than the idle timeout (CI on docker: idle ended 1.2 s
# after `mounted`): idle time counts from the mount being ready.
@test "idle_timeout=3 after a create held 5 s: the mount is idle 3 s after mounted before it ends" {
	require_backend docker docker-podman sbx
	mount_sbfs -o idle_timeout=3,inject_faults=late5000:create:1
	poll 60 sandbox_dead || fail "still running 60 s after a 3 s idle timeout: $(status_json)"
	local log=$T/mnt.log mounted ended
	mounted=$(log_ms "$log" ") mounted at ") || fail "no 'mounted' in the log: $(cat "$log")"
	ended=$(log_ms "$log" "idle timeout (3 s) ended") || fail "no idle timeout logged after mounted (it ended before?): $(status_json) $(cat "$log")"
	((ended - mounted >= 3000)) || fail "idle ended $((ended - mounted)) ms after mounted: $(cat "$log")"
	unmount_sbfs
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

@test "a sandbox destroyed under its mount: sbfs status says so (where watched, with no call to the mount), and calls fail saying why" {
	mount_sbfs
	echo x >"$MNT/f"
	sbfs sync "$MNT"
	has_sandbox_procs
	kill_sandbox
	# unwatched (sbx), nothing tells the mount until it asks the sandbox
	backend_watches_changes || ls "$MNT/new-dir" >/dev/null 2>&1 || true
	poll 30 sandbox_dead || fail "sbfs status still says $(status_json | jq -r .state) 30 s after the sandbox was destroyed"
	[ -n "$(status_json | jq -r '.reason // empty')" ] || fail "status gives no reason: $(status_json)"
	run timeout 30 sbexec -m "$MNT" true
	assert_status 125
	assert_eq "$(wc -l <<<"$output")" 1 "one line: $output"
	run cat "$MNT/f"
	assert_output_has "Input/output error"
	unmount_sbfs
}

@test "attach= of a sandbox another mount has is refused in one line naming that mount; once its daemon died it attaches" {
	mount_sbfs -o keep
	local id=$SBFS_SANDBOX first=$MNT pid=$SBFS_PID rc=0 out
	[ -n "$id" ] || fail "no sandbox id in status"
	echo acknowledged >"$first/f"
	sbfs sync "$first"
	mkdir -p "$T/second"
	out=$(timeout 60 sbfs -o "$(sbfs_opts second "attach=$id")" "$T/second" 2>&1) || rc=$?
	if ((rc == 0)); then
		fusermount_u "$T/second" || true
		destroy_kept "$id"
		fail "a second mount of sandbox $id was accepted"
	fi
	assert_eq "$rc" 1 "exit status of the second mount ($out)"
	assert_eq "$(wc -l <<<"$out")" 1 "one line: $out"
	[[ $out == *"sandbox $id is already mounted at $first "* ]] || fail "the refusal does not name the first mount: $out"
	not_mounted "$T/second"
	# the first mount and its sandbox go on as before
	assert_eq "$(cat "$first/f")" acknowledged "the first mount's file"
	assert_eq "$(sb cat "$WS/f")" acknowledged "the file in the sandbox"
	assert_eq "$(status_json | jq -r .state)" running "the first mount's state"
	# a daemon that died holds nothing: its claim goes with it
	kill -KILL "$pid"
	poll 10 not_pid_alive "$pid"
	fusermount3 -u -z "$first" 2>/dev/null || umount -l "$first"
	rc=0
	mount_sbfs -n third -o "attach=$id" || rc=$?
	if ((rc == 0)); then
		out=$(cat "$MNT/f" 2>&1) || true
		unmount_sbfs || true
	fi
	destroy_kept "$id"
	assert_eq "$rc" 0 "attach=$id after the first daemon died"
	assert_eq "$out" acknowledged "the file on the third mount"
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
