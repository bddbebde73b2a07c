#!/usr/bin/env bats
# Lose nothing (issue 18, items 1 and 2): an upload counts only if the
# sandbox was alive when it completed, and whatever never reached the
# sandbox is saved at unmount under $XDG_STATE_HOME/sbfs/unsaved/NAME/ at
# its mount-relative path, or named as lost, with exit status 1.
#
# The sandbox's death mid-upload is made deterministic with
# -o inject_faults=die:write:1: the upload does its work, then the sandbox
# is destroyed before the upload's result is taken. That window exists on
# local (a host-side copy) and docker (the engine takes an archive into a
# stopped container); on modal a write's success is the file helper's exit
# status, which the command router gives only while the sandbox runs (it
# answers NOT_FOUND for a finished task, in the fake and in Modal), so a
# death after it comes after the upload completed: those tests do not
# apply there, and the kill from outside runs on every backend.

load helpers

setup() {
	sbfs_setup
	export XDG_STATE_HOME=$T/state
}

teardown() {
	local rc=0
	sbfs_teardown || rc=$?
	[[ -z ${SPOOL:-} ]] || rm -rf "$SPOOL"
	[[ -z ${IMAGES:-} ]] || unmount_images
	return $rc
}

# The power-cut test's ext4 images: mounted under $IMAGES (outside $T, so
# the mount's teardown does not take them for mounts it left), unmounted
# once no daemon holds them.
mount_image() {
	truncate -s 64M "$IMAGES/$1.img"
	mkfs.ext4 -q -F "$IMAGES/$1.img" || return 1
	mkdir -p "$IMAGES/$1"
	# commit=600: ext4's timer commits nothing during the test, so what
	# was not synced is lost for certain (a cut within the default 5 s
	# interval of the mount, made certain)
	mount -o loop,commit=600 "$IMAGES/$1.img" "$IMAGES/$1"
}

image_released() { [[ -z $(losetup -j "$1") ]]; }

unmount_images() {
	local d
	for d in "$IMAGES"/*/; do
		d=${d%/}
		mountpoint -q "$d" || continue
		poll 10 umount "$d" 2>/dev/null || umount -l "$d"
	done
	rm -rf "$IMAGES"
}

writeback_mode() {
	[[ ,$SBFS_TEST_OPTS,${EXTRA_OPTS:-}, == *,writeback,* ]]
}

status_field() {
	status_json | jq -r "$1"
}

state_is_dead() {
	[[ $(status_field '.state') == dead ]]
}

# unsaved_dir: where this mount's unmount save goes.
unsaved_dir() {
	echo "$XDG_STATE_HOME/sbfs/unsaved/$MOUNT_NAME"
}

# mount_fg EXTRA: a foreground mount (its exit status is wanted), with
# MOUNT_NAME set to the mount's name.
mount_fg() {
	EXTRA_OPTS=$1
	mount_sbfs -f -o "$1"
	MOUNT_NAME=$(status_field '.name')
	[[ -n $MOUNT_NAME && $MOUNT_NAME != null ]] || fail "status names no mount name"
}

# unmount_fg: unmount; DAEMON_RC is the daemon's exit status.
unmount_fg() {
	fusermount_u "$MNT" || return 1
	poll 60 not_pid_alive "$SBFS_FG_PID" || fail "daemon still running after unmount" || return 1
	DAEMON_RC=0
	wait "$SBFS_FG_PID" || DAEMON_RC=$?
}

# assert_saved REL SRC: the unmount save holds SRC's bytes at REL.
assert_saved() {
	local got=$(unsaved_dir)/$1
	[[ -f $got ]] || fail "$1 not saved at $got; saved: $(cd "$(unsaved_dir)" 2>/dev/null && find . | head -20)" || return 1
	assert_eq "$(sha256sum <"$got")" "$(sha256sum <"$2")" "bytes saved for $1"
}

# write_all_then_close FILE SRC [FILE SRC]...: creates every FILE on the
# mount and fills it from its SRC in one process, then closes them all,
# ignoring what close() says: every file exists (and is pending) before
# the first upload, which each close() starts, can fail.
write_all_then_close() {
	python3 - "$@" <<'PY'
import os, sys
a = sys.argv[1:]
fds = []
for dst, src in zip(a[0::2], a[1::2]):
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with open(src, "rb") as f:
        data = f.read()
    while data:
        data = data[os.write(fd, data):]
    fds.append(fd)
for fd in fds:
    try:
        os.close(fd)
    except OSError:
        pass
PY
}

# write_and_close_on_go FILE SRC READY GO: writes FILE from SRC, creates
# READY, waits for GO to exist, then closes FILE; exits 1 if close() fails.
write_and_close_on_go() {
	python3 - "$@" <<'PY'
import os, sys, time
dst, src, ready, go = sys.argv[1:5]
fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
with open(src, "rb") as f:
    data = f.read()
while data:
    data = data[os.write(fd, data):]
open(ready, "w").close()
deadline = time.time() + 120
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.05)
try:
    os.close(fd)
except OSError as e:
    print("close: %s" % e)
    sys.exit(1)
sys.exit(0)
PY
}

@test "the sandbox dies while an upload is in flight: the upload does not count, unmount saves the bytes at their path" {
	require_backend local docker # modal: no window between the data and its proof (see above)
	head -c $((8 * 1024 * 1024 + 123)) /dev/urandom >"$T/src"
	mount_fg "inject_faults=die:write:1"
	mkdir -p "$MNT/d/e"
	if writeback_mode; then
		cp "$T/src" "$MNT/d/e/f" || fail "close() failed in write-back mode"
		run timeout 120 sbfs sync "$MNT"
		[[ $status -ne 0 ]] || fail "sbfs sync returned 0 although the sandbox died under the upload"
		assert_eq "$(status_field '.writeback.uploaded')" 0 "uploads counted by status"
	else
		run timeout 120 cp "$T/src" "$MNT/d/e/f"
		[[ $status -ne 0 && $status -ne 124 ]] || fail "cp (close) returned $status although the sandbox died under the upload"
	fi
	poll 30 state_is_dead || fail "status does not say the sandbox is dead"
	[[ -n $(status_field '.reason') ]] || fail "no reason in status"
	assert_eq "$(status_field '.pending_uploads[0].path')" /d/e/f
	unmount_fg
	assert_eq "$DAEMON_RC" 1 "daemon exit status"
	assert_saved d/e/f "$T/src"
	grep -F "saved in $(unsaved_dir): /d/e/f" "$T/mnt.fg.out" || fail "no line naming what was saved where"
}

@test "write-back: the sandbox dies under a queued upload: sync fails, status does not count it, unmount saves it" {
	require_backend local docker # modal: no window between the data and its proof (see above)
	head -c $((4 * 1024 * 1024 + 7)) /dev/urandom >"$T/src"
	mount_fg "writeback,inject_faults=die:write:1"
	mkdir "$MNT/w"
	cp "$T/src" "$MNT/w/big" || fail "close() failed in write-back mode"
	run timeout 120 sbfs sync "$MNT"
	[[ $status -ne 0 ]] || fail "sbfs sync returned 0 although the sandbox died under the upload"
	assert_eq "$(status_field '.writeback.uploaded')" 0 "uploads counted by status"
	assert_eq "$(status_field '.pending_uploads[0].path')" /w/big
	[[ $(status_field '.pending_uploads[0].error') != null ]] || fail "the pending upload shows no error"
	unmount_fg
	assert_eq "$DAEMON_RC" 1 "daemon exit status"
	assert_saved w/big "$T/src"
}

@test "write-back: the sandbox dies under the upload a directory's chmod lands first: the chmod fails, unmount saves the file" {
	require_backend local docker # modal: no window between the data and its proof (see above)
	# One file: a second upload running beside the one the sandbox dies
	# under may land before the death, and counts (then it dies with the
	# sandbox, as everything in it does).
	head -c $((1024 * 1024 + 3)) /dev/urandom >"$T/a"
	mount_fg "writeback,inject_faults=die:write:1"
	mkdir "$MNT/d"
	cp "$T/a" "$MNT/d/a" || fail "close() failed in write-back mode"
	run chmod 0555 "$MNT/d"
	[[ $status -ne 0 ]] || fail "chmod returned 0 although the sandbox died under the upload it waited for"
	assert_eq "$(status_field '.writeback.uploaded')" 0 "uploads counted by status"
	unmount_fg
	assert_eq "$DAEMON_RC" 1 "daemon exit status"
	assert_saved d/a "$T/a"
}

@test "the sandbox killed from outside before a close: close() (or, in write-back mode, sync) fails, unmount saves the bytes" {
	head -c $((2 * 1024 * 1024)) /dev/urandom >"$T/src"
	mount_fg ""
	write_and_close_on_go "$MNT/f" "$T/src" "$T/ready" "$T/go" &
	local writer=$!
	poll 60 test -e "$T/ready" || fail "the writer did not get its data in"
	kill_sandbox
	poll 30 backend_sandbox_stopped "$SBFS_REC" || fail "the sandbox did not die"
	touch "$T/go"
	local rc=0
	wait "$writer" || rc=$?
	if writeback_mode; then
		run timeout 120 sbfs sync "$MNT"
		[[ $status -ne 0 ]] || fail "sbfs sync returned 0 although the sandbox was gone"
		assert_eq "$(status_field '.writeback.uploaded')" 0 "uploads counted by status"
	else
		[[ $rc -ne 0 ]] || fail "close() returned 0 although the sandbox was gone"
	fi
	unmount_fg
	assert_eq "$DAEMON_RC" 1 "daemon exit status"
	assert_saved f "$T/src"
}

@test "sbfs umount waits for the save, names what was saved where, and exits 1" {
	mount_fg "inject_faults=terminal:write:1"
	printf 'one\n' >"$T/one"
	write_all_then_close "$MNT/kept" "$T/one"
	run timeout 120 sbfs umount "$MNT"
	assert_status 1
	[[ $output == *"saved in $(unsaved_dir): /kept"* ]] || fail "sbfs umount does not say what was saved where: $output"
	not_pid_alive "$SBFS_FG_PID" || fail "the daemon still runs after sbfs umount returned"
	DAEMON_RC=0
	wait "$SBFS_FG_PID" || DAEMON_RC=$?
	assert_eq "$DAEMON_RC" 1 "daemon exit status"
	assert_saved kept "$T/one"
}

@test "unmount save mirrors the tree: a/b and a%b both saved at their own paths" {
	mount_fg "inject_faults=terminal:write:1"
	mkdir "$MNT/a"
	printf 'one\n' >"$T/one"
	printf 'two\n' >"$T/two"
	write_all_then_close "$MNT/a/b" "$T/one" "$MNT/a%b" "$T/two"
	run timeout 120 sbfs sync "$MNT"
	[[ $status -ne 0 ]] || fail "sbfs sync returned 0 with a dead sandbox"
	unmount_fg
	assert_eq "$DAEMON_RC" 1 "daemon exit status"
	assert_saved a/b "$T/one"
	assert_saved a%b "$T/two"
}

@test "unmount save of a long nested path (three 250-byte names) keeps it whole" {
	local n1 n2 n3
	n1=$(printf 'x%.0s' $(seq 250))
	n2=$(printf 'y%.0s' $(seq 250))
	n3=$(printf 'z%.0s' $(seq 250))
	head -c 100000 /dev/urandom >"$T/src"
	mount_fg "inject_faults=terminal:write:1"
	mkdir -p "$MNT/$n1/$n2"
	write_all_then_close "$MNT/$n1/$n2/$n3" "$T/src"
	run timeout 120 sbfs sync "$MNT"
	[[ $status -ne 0 ]] || fail "sbfs sync returned 0 with a dead sandbox"
	unmount_fg
	assert_eq "$DAEMON_RC" 1 "daemon exit status"
	assert_saved "$n1/$n2/$n3" "$T/src"
}

@test "unmount save from a spool on another file system (EXDEV) copies the data" {
	[[ -d /dev/shm ]] || skip "no /dev/shm for a spool on another file system"
	SPOOL=$(mktemp -d /dev/shm/sbfs-spool.XXXXXX)
	mkdir -p "$XDG_STATE_HOME"
	[[ $(stat -c %d "$SPOOL") != $(stat -c %d "$XDG_STATE_HOME") ]] ||
		skip "/dev/shm and $T are one file system"
	head -c 300000 /dev/urandom >"$T/src"
	mount_fg "spool_dir=$SPOOL,inject_faults=terminal:write:1"
	mkdir "$MNT/s"
	write_all_then_close "$MNT/s/f" "$T/src"
	run timeout 120 sbfs sync "$MNT"
	[[ $status -ne 0 ]] || fail "sbfs sync returned 0 with a dead sandbox"
	unmount_fg
	assert_eq "$DAEMON_RC" 1 "daemon exit status"
	assert_saved s/f "$T/src"
}

@test "a file that cannot be saved is named as lost, the others are saved, exit status 1" {
	printf 'kept\n' >"$T/kept"
	printf 'blocked\n' >"$T/blocked"
	mount_fg "inject_faults=terminal:write:1"
	# a regular file where the save needs the directory d
	mkdir -p "$(unsaved_dir)"
	echo in-the-way >"$(unsaved_dir)/d"
	mkdir "$MNT/d"
	write_all_then_close "$MNT/kept" "$T/kept" "$MNT/d/f" "$T/blocked"
	run timeout 120 sbfs sync "$MNT"
	[[ $status -ne 0 ]] || fail "sbfs sync returned 0 with a dead sandbox"
	unmount_fg
	assert_eq "$DAEMON_RC" 1 "daemon exit status"
	assert_saved kept "$T/kept"
	assert_eq "$(cat "$(unsaved_dir)/d")" in-the-way "what was in the way was overwritten"
	grep -E "saved in $(unsaved_dir): /kept$" "$T/mnt.fg.out" ||
		fail "the saved line does not list exactly /kept"
	grep -E "their data is lost: /d/f \(Not a directory\)$" "$T/mnt.fg.out" ||
		fail "no line naming /d/f as lost"
}

# Issue 41, item 1: the spool and the state folder on two file systems
# (a Debian layout with /var and /home apart, or spool_dir= on another
# disk). Each is an ext4 image shut down without a log flush right after
# the closes returned, as a power cut would: every acknowledged file must
# come back. The old code synced only the journal folder in the spool
# folder, never the pointer in the state folder, so recovery found nothing
# and said nothing.
@test "write-back: a power cut right after close() returned, spool and state on two file systems: recovery saves every file" {
	require_backend local
	((EUID == 0)) || skip "needs root to mount ext4 images on loop devices"
	require_cmd mkfs.ext4 losetup mountpoint
	losetup -f >/dev/null 2>&1 || skip "no free loop device (losetup -f)"
	IMAGES=$(mktemp -d "${SBFS_TEST_TMPDIR:-/tmp}/sbfs-powercut.XXXXXX")
	mount_image state || skip "cannot mount an ext4 image on a loop device"
	mount_image spool || skip "cannot mount an ext4 image on a loop device"
	mkdir "$IMAGES/state/home" "$IMAGES/spool/tmp"
	sync -f "$IMAGES/state" "$IMAGES/spool" # what was there before the mount
	export XDG_STATE_HOME=$IMAGES/state/home
	# every upload fails: the files stay queued, in the journal only
	mount_sbfs -o "writeback,spool_dir=$IMAGES/spool/tmp,inject_faults=error:write:every1"
	local i n=5
	for i in $(seq $n); do
		printf 'acknowledged %s\n' "$i" >"$MNT/f$i" || fail "close of f$i failed"
	done
	"$SBFS_BUILD/tests/tools/fs_shutdown" "$IMAGES/spool"
	"$SBFS_BUILD/tests/tools/fs_shutdown" "$IMAGES/state"
	kill -KILL "$SBFS_PID"
	poll 10 not_pid_alive "$SBFS_PID"
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
	# The sandbox's mount namespace holds the images too: until it is
	# gone, a mount of an image finds its old, shut-down file system.
	poll 10 procs_gone "$SBFS_REC/procs" || fail "the sandbox outlived its daemon: $(procs_alive "$SBFS_REC/procs")"
	# the machine comes back: both file systems replay their journals
	local d
	for d in state spool; do
		poll 10 umount "$IMAGES/$d" || fail "cannot unmount the $d image"
		poll 10 image_released "$IMAGES/$d.img" || fail "the $d image is still on a loop device: $(losetup -j "$IMAGES/$d.img")"
		mount -o loop "$IMAGES/$d.img" "$IMAGES/$d" || fail "cannot mount the $d image again"
	done
	run sbfs status "$T/nowhere"
	assert_output_has "$n file(s) not uploaded"
	local saved
	saved=$(ls -d "$XDG_STATE_HOME"/sbfs/unsaved/*)
	for i in $(seq $n); do
		assert_eq "$(cat "$saved/f$i")" "acknowledged $i" "f$i after the power cut"
	done
	tally "files acknowledged before a power cut, all saved" $n
	backend_sweep
}
