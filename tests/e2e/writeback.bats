#!/usr/bin/env bats
# Write-back mode (-o writeback): close() returns before the upload, uploads
# are batched in the background, barriers wait for them and report failures,
# and a killed daemon's queue is saved, never dropped.

load helpers

setup() {
	sbfs_setup
	export XDG_STATE_HOME=$T/state
	mkdir -p "$T/spool"
}

teardown() { sbfs_teardown; }

wb_mount() {
	mount_sbfs -o "writeback,spool_dir=$T/spool${1:+,$1}" "${@:2}"
}

wb() { status_json | jq -er ".writeback.$1"; }

# kill_and_recover: kill -9 the daemon, drop its mount, and let the next
# `sbfs status` save what its journal holds ($output: what it said).
kill_and_recover() {
	kill -KILL "$SBFS_PID"
	poll 10 not_pid_alive "$SBFS_PID"
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
	run sbfs status "$T/nowhere"
	assert_output_has "not uploaded"
}

# pending: files queued or uploading
pending() { echo $(($(wb queued) + $(wb in_flight))); }
drained() { [[ $(pending) == 0 ]]; }

@test "writeback: close returns before the upload; sbexec sees the file" {
	wb_mount inject_latency_ms=3000
	w0=$(calls write)
	# The upload takes 3 s of injected latency (every call does: the
	# create's own lookup too); close already returned, so the file is
	# still pending when we look. Only a look that came within 2.9 s of
	# close returning proves it (a loaded machine may take longer to
	# look): up to 5 files until one such look.
	local k p t0 t1 f judged=0
	for k in 1 2 3 4 5; do
		echo hello >"$MNT/a$k.txt"
		t0=$(date +%s%N)
		p=$(status_json | jq -er '.writeback.queued + .writeback.in_flight')
		t1=$(date +%s%N)
		(((t1 - t0) / 1000000 < 2900)) || continue
		((p >= 1)) || fail "nothing queued or in flight right after close ($p, looked $(((t1 - t0) / 1000000)) ms after close returned)"
		judged=1
		break
	done
	((judged)) || fail "no look at the queue came within 2.9 s of close returning (in 5 tries): the machine is too loaded to tell"
	f=a$k.txt
	assert_eq "$(cat "$MNT/$f")" hello "read back from the local state"
	assert_eq "$(stat -c %s "$MNT/$f")" 6 "size from the local state"
	# sbexec is a barrier: the command sees the file(s).
	assert_eq "$(sb cat "$f")" hello
	assert_eq "$(pending)" 0
	(($(calls write) > w0)) || fail "no write call was made"
}

@test "writeback: sbfs sync waits for the queue; status shows it drained" {
	wb_mount inject_latency_ms=300
	mkdir "$MNT/d"
	for i in $(seq 1 30); do echo "f$i" >"$MNT/d/f$i"; done
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(pending)" 0
	assert_eq "$(wb failed)" 0
	(($(wb uploaded) >= 30)) || fail "uploaded: $(wb uploaded)"
	assert_eq "$(sb sh -c 'cat d/f1 d/f30')" "f1
f30"
}

@test "writeback: sync --progress shows what is left until it is done; status --watch shows it too" {
	wb_mount inject_latency_ms=400
	mkdir "$MNT/d"
	for i in $(seq 1 12); do head -c 100000 /dev/urandom >"$MNT/d/f$i"; done
	sbfs status --watch "$MNT" >"$T/watch.out" 2>&1 &
	local watch=$!
	run sbfs sync --progress "$MNT"
	assert_status 0
	[[ ${lines[0]} =~ ^[0-9]+\ files?\ pending,\ [0-9.]+\ (B|KiB|MiB) ]] ||
		fail "no pending line first: $output"
	assert_eq "${lines[-1]}" "nothing pending: every write is uploaded"
	assert_eq "$(pending)" 0
	nap 1
	kill "$watch"
	wait "$watch" || true
	grep -q "pending" "$T/watch.out" || fail "status --watch showed nothing: $(cat "$T/watch.out")"
	tail -n 1 "$T/watch.out" | grep -qx "nothing pending: every write is uploaded" ||
		fail "status --watch did not see the end: $(tail -n 3 "$T/watch.out")"
	run -2 sbfs sync --progress --json "$MNT"
	assert_output_has "sync takes --progress or --json, not both"
}

@test "writeback: fsync uploads that file before it returns" {
	wb_mount inject_latency_ms=200
	w0=$(calls write)
	dd if=/dev/zero of="$MNT/s.bin" bs=1k count=3 conv=fsync status=none
	(($(calls write) > w0)) || fail "fsync returned before any write call"
	assert_eq "$(sb stat -c %s s.bin)" 3072
}

@test "writeback: 1,000 small files take far fewer write calls than files" {
	wb_mount inject_latency_ms=200
	w0=$(calls write)
	mkdir "$MNT/many"
	local t0=${EPOCHREALTIME/./} ms bound
	for i in $(seq 1 1000); do printf 'content %s\n' "$i" >"$MNT/many/f$i"; done
	ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
	run sbfs sync "$MNT"
	assert_status 0
	w=$(($(calls write) - w0))
	echo "write calls for 1000 files: $w (created in $ms ms)" >&3
	# A batch starts when none is in flight (each takes the 200 ms of
	# injected latency) or 64 files wait: however fast the loop ran (a
	# loaded machine runs it slowly), one call per round trip while it
	# ran, plus one per 64 files, plus the sync's
	bound=$((ms / 200 + 1000 / 64 + 2))
	((bound < 500)) || skip "the create loop took $ms ms: too slow to tell batching from none"
	((w <= bound)) || fail "$w write calls for 1000 files created in $ms ms (at most $bound with batching)"
	assert_eq "$(sb sh -c 'ls many | wc -l')" 1000
	assert_eq "$(sb cat many/f777)" "content 777"
}

@test "writeback: a pending file renamed is uploaded under its new name only" {
	wb_mount inject_latency_ms=300
	echo old >"$MNT/target"
	sbfs sync "$MNT"
	r0=$(calls rename)
	# A busy queue keeps the next file pending while it is renamed.
	for i in $(seq 1 5); do echo "$i" >"$MNT/busy$i"; done
	echo new >"$MNT/target.tmp"
	mv "$MNT/target.tmp" "$MNT/target"
	assert_eq "$(cat "$MNT/target")" new
	[[ ! -e $MNT/target.tmp ]] || fail "the old name still shows"
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(sb cat target)" new
	run sb test -e target.tmp
	assert_status 1
	echo "rename calls: $(($(calls rename) - r0))" >&3
}


# A rename replaces the name: it never writes into what the name held.
# Uploading the pending file under the new name would write through a
# symlink there, into every other link of a file there, and keep that
# file's mode (found by fsdiff, seed 2).
@test "writeback: a pending file renamed over a symlink or a linked file replaces the name" {
	wb_mount
	echo kept >"$MNT/other"
	ln "$MNT/other" "$MNT/linked"
	chmod 600 "$MNT/linked"
	ln -s other "$MNT/sym"
	sbfs sync "$MNT"
	printf 'new one\n' >"$MNT/n1"
	chmod 751 "$MNT/n1"
	printf 'new two\n' >"$MNT/n2"
	mv "$MNT/n1" "$MNT/sym"
	mv "$MNT/n2" "$MNT/linked"
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(sb cat other)" kept
	assert_eq "$(sb sh -c 'test -L sym && echo link || stat -c "%F %a" sym')" "regular file 751"
	assert_eq "$(sb cat sym)" "new one"
	assert_eq "$(sb cat linked)" "new two"
	assert_eq "$(sb stat -c %h other)" 1
	assert_eq "$(stat -c %h "$MNT/other")" 1
}
@test "writeback: pending files unlinked before their upload never reach the sandbox" {
	wb_mount inject_latency_ms=300
	mkdir "$MNT/gone"
	for i in $(seq 1 20); do echo "$i" >"$MNT/gone/f$i"; done
	rm -rf "$MNT/gone"
	[[ ! -e $MNT/gone ]] || fail "gone still shows"
	run sbfs sync "$MNT"
	assert_status 0
	run sb test -e gone
	assert_status 1
	# and an rmdir with pending files below is refused
	mkdir "$MNT/keep"
	echo x >"$MNT/keep/x"
	run rmdir "$MNT/keep"
	[ "$status" -ne 0 ]
	assert_eq "$(sb cat keep/x)" x
}

@test "writeback: a directory renamed with pending files below carries them" {
	wb_mount inject_latency_ms=300
	mkdir "$MNT/src"
	for i in $(seq 1 10); do echo "$i" >"$MNT/src/f$i"; done
	mv "$MNT/src" "$MNT/dst"
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(sb sh -c 'ls dst | wc -l')" 10
	assert_eq "$(sb cat dst/f7)" 7
	run sb test -e src
	assert_status 1
}

@test "writeback: a failed upload is reported by the next sync and sbexec, and kept" {
	wb_mount
	mkdir "$MNT/d"
	exec 7>"$MNT/d/f"
	echo first >&7
	# The sandbox replaces the directory with a file while f is open.
	sb sh -c 'rm -rf d && echo plain > d'
	echo second >&7
	exec 7>&-
	run sbfs sync "$MNT"
	[ "$status" -ne 0 ] || fail "sync succeeded: $output"
	assert_output_has "/d/f"
	run sbexec -m "$MNT" true
	[ "$status" -ne 0 ] || fail "sbexec ran despite a failed upload"
	assert_output_has "/d/f"
	assert_eq "$(wb failed)" 1
	status_json | jq -e '.pending_uploads[] | select(.path == "/d/f") | .error' >/dev/null ||
		fail "status does not name /d/f with its error"
	run sbfs status "$MNT"
	assert_output_has "/d/f ("
	assert_output_has "last upload failed: "
	assert_output_has "1 failed"
}

@test "writeback: kill -9 with pending uploads: the next status saves and names them" {
	wb_mount inject_latency_ms=4000
	mkdir "$MNT/sub"
	sbfs sync "$MNT"
	for i in 1 2 3; do echo "data $i" >"$MNT/sub/k$i"; done
	(($(pending) >= 3)) || fail "files not pending: $(pending)"
	kill_and_recover
	lines=$(grep -c "not uploaded" <<<"$output")
	assert_eq "$lines" 1 "one line per mount"
	saved=$(ls -d "$XDG_STATE_HOME"/sbfs/unsaved/*/sub)
	for i in 1 2 3; do
		assert_eq "$(cat "$saved/k$i")" "data $i"
	done
	tally "files pending when the daemon was killed -9, all saved and named" 3
	[[ -z $(ls -A "$XDG_STATE_HOME/sbfs/journal") ]] || fail "journal pointer left behind"
	# a second look finds nothing more
	run sbfs status "$T/nowhere"
	[[ $output != *"not uploaded"* ]] || fail "reported twice: $output"
	backend_sweep
}

# loose_objects REPO: the loose objects under their final names (a folder
# of two hex digits, a file of 38), as "xx/yyy..."
loose_objects() {
	(cd "$1/.git/objects" 2>/dev/null &&
		find . -regextype posix-extended -regex '\./[0-9a-f]{2}/[0-9a-f]{38}' | sed 's|^\./||')
}
loose_objects_at_least() { (($(loose_objects "$1" | wc -l) >= $2)); }

# Issue 41, item 8: git commits in write-back mode, the daemon killed at
# many points of one (after 4, 8, ... 24 of its loose objects are in
# place). An object is written to a temporary file and linked to its name
# after its close returned, so every object seen under its name before the
# kill must be in the sandbox or saved, whole; and the sandbox's repository
# with what the recovery saved put back must pass git fsck.
@test "writeback: kill -9 at many points of a git commit: every object whose close returned comes back, git fsck passes" {
	require_backend local
	require_cmd git
	local k want repo ws saved rec obj objs missing=0 checked=0
	for k in 1 2 3 4 5 6; do
		want=$((k * 4))
		repo=repo$k
		wb_mount inject_latency_ms=150
		ws=$(backend_host_workspace)
		git -C "$MNT" init -q "$repo"
		git -C "$MNT/$repo" config user.email t@example.org
		git -C "$MNT/$repo" config user.name t
		seq 1 500 >"$MNT/$repo/base"
		git -C "$MNT/$repo" add base
		git -C "$MNT/$repo" commit -qm base
		run timeout 120 sbfs sync "$MNT"
		assert_status 0
		mkdir "$MNT/$repo/d"
		for i in $(seq 30); do echo "kill point $k file $i" >"$MNT/$repo/d/f$i"; done
		(git -C "$MNT/$repo" add -A && git -C "$MNT/$repo" commit -qm two) >/dev/null 2>&1 &
		local committer=$!
		poll 60 loose_objects_at_least "$MNT/$repo" "$want" ||
			fail "kill point $k: fewer than $want objects after 60 s"
		objs=$(loose_objects "$MNT/$repo")
		# as kill_and_recover, but whether anything was still pending
		# depends on how far the commit got: not asserted
		kill -KILL "$SBFS_PID"
		poll 10 not_pid_alive "$SBFS_PID"
		fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
		run sbfs status "$T/nowhere"
		wait "$committer" || true
		# the sandbox's repository, with what the recovery saved put back
		rec=$T/recovered$k
		cp -a "$ws/$repo" "$rec"
		saved=$(ls -d "$XDG_STATE_HOME"/sbfs/unsaved/*/"$repo" 2>/dev/null | head -n1)
		[[ -z $saved ]] || cp -a "$saved/." "$rec/"
		# git's own half-written files: it would remove them too
		find "$rec/.git" \( -name 'tmp_obj_*' -o -name '*.lock' \) -delete
		for obj in $objs; do
			checked=$((checked + 1))
			[[ -s $rec/.git/objects/$obj ]] || {
				missing=$((missing + 1))
				echo "kill point $k: object $obj lost" >&2
			}
		done
		run git -c safe.directory="$rec" -C "$rec" fsck --full --no-dangling
		[[ $status == 0 ]] || fail "kill point $k: git fsck of the recovered repository failed: $output"
	done
	assert_eq "$missing" 0 "objects whose close returned, lost"
	((checked >= 6 * 4)) || fail "only $checked objects were checked"
	tally "git commit killed -9 at 6 points: objects seen before the kill, all back and fsck-clean" "$checked"
	backend_sweep
}

# Issue 41, item 4: each closed file waiting for its upload held a
# descriptor (its spool), so a few hundred of them under a small limit
# made every upload fail with EMFILE for ever: sync exited 1, sbexec 125,
# and umount lost its report. Pending files now hold none (the journal
# holds their bytes), and the control server keeps descriptors in reserve.
@test "writeback: 320 files pending under a limit of 256 open files: sync, sbexec and umount succeed, nothing lost" {
	require_backend local
	ulimit -n 256 # soft and hard: the daemon cannot raise it
	# every call takes 2 s: the files wait while more are closed
	wb_mount inject_latency_ms=2000
	mkdir "$MNT/many" "$MNT/more"
	local i
	for i in $(seq 320); do
		echo "$i" >"$MNT/many/f$i" || fail "close of many/f$i failed"
	done
	run timeout 300 sbfs sync "$MNT"
	assert_status 0
	run timeout 120 sbexec -m "$MNT" true
	assert_status 0
	assert_eq "$(sb sh -c 'ls many | wc -l; cat many/f1 many/f320')" "320
1
320"
	# and pending at the unmount: the final flush lands them, the
	# report reaches sbfs umount
	for i in $(seq 320); do
		echo "$i" >"$MNT/more/f$i" || fail "close of more/f$i failed"
	done
	run timeout 300 sbfs umount "$MNT"
	assert_status 0
	[[ $output != *"saved in"* && $output != *"without saying"* ]] || fail "sbfs umount: $output"
	[[ ! -d $XDG_STATE_HOME/sbfs/unsaved ]] || fail "files saved instead of uploaded: $(find "$XDG_STATE_HOME/sbfs/unsaved" | head)"
	! grep -E "Too many open files" "$T/mnt.log" || fail "EMFILE in the daemon's log"
}

# The journal's pointer in the state folder is what recovery follows; one
# a crash took (issue 41: a power cut before it reached the disk) must
# not leave the journal's files orphaned and unnamed: the spool folders
# the mounts used, and the default one, are searched.
@test "writeback: kill -9 and the journal's pointer lost: the next status finds the journal in the spool folder and saves its files" {
	wb_mount inject_faults=error:write:every1
	for i in 1 2; do echo "orphan $i" >"$MNT/o$i"; done
	rm "$XDG_STATE_HOME"/sbfs/journal/*
	kill_and_recover
	assert_output_has "without the pointer"
	saved=$(ls -d "$XDG_STATE_HOME"/sbfs/unsaved/*)
	for i in 1 2; do assert_eq "$(cat "$saved/o$i")" "orphan $i"; done
	[[ -z $(ls -A "$T/spool") ]] || fail "journal folder left in the spool folder: $(ls -A "$T/spool")"
	backend_sweep
}

@test "writeback: kill -9 and the journal's pointer lost, default spool folder: the next status finds it there" {
	export TMPDIR=$T/tmp
	mkdir -p "$TMPDIR"
	mount_sbfs -o writeback,inject_faults=error:write:every1
	echo orphan >"$MNT/o"
	# neither the pointer nor the list of spool folders: only the
	# default folder (TMPDIR) says where the journal is
	rm "$XDG_STATE_HOME"/sbfs/journal/* "$XDG_STATE_HOME"/sbfs/spool-dirs
	kill_and_recover
	assert_output_has "without the pointer"
	assert_eq "$(cat "$(ls -d "$XDG_STATE_HOME"/sbfs/unsaved/*)/o")" orphan
	backend_sweep
}

# A link of a file whose upload has not landed waits for it
# (link_pending.h) and moves the file's journal entry to the new name:
# a kill -9 then saves the file under that name, in its new directory
# (a queued mkdir), as reliability.md says.
@test "writeback: kill -9 with a link waiting for its file's upload: the file is saved under the new name" {
	wb_mount inject_faults=error:write:every1
	ls "$MNT" >/dev/null # the root's listing: the names below are known absent
	mkdir "$MNT/o"
	printf 'object\n' >"$MNT/o/tmp_obj"
	ln "$MNT/o/tmp_obj" "$MNT/o/final"
	assert_eq "$(calls link)" 0 "link calls: the link waits for the upload"
	assert_eq "$(cat "$MNT/o/final")" object
	assert_eq "$(stat -c %h "$MNT/o/final")" 2 "links on the mount"
	kill_and_recover
	saved=$(ls -d "$XDG_STATE_HOME"/sbfs/unsaved/*)
	assert_eq "$(cat "$saved/o/final")" object "the saved file"
	[[ ! -e $saved/o/tmp_obj ]] || fail "saved under the old name too"
	backend_sweep
}

# The kernel links a spool (an O_TMPFILE) into the journal only once: a
# file written again after its upload landed used to be uploaded at its
# close instead, with a warning, each time.
@test "writeback: a file written again after its upload is journaled again; kill -9 saves the new bytes" {
	wb_mount inject_latency_ms=3000
	echo one >"$MNT/again"
	sbfs sync "$MNT"
	echo two >"$MNT/again"
	(($(pending) >= 1)) || fail "the second version was not left to the queue: pending $(pending)"
	! grep -q "cannot journal" "$T/mnt.log" || fail "$(grep "cannot journal" "$T/mnt.log")"
	kill_and_recover
	assert_eq "$(cat "$(ls -d "$XDG_STATE_HOME"/sbfs/unsaved/*)/again")" two "the saved file"
	backend_sweep
}

# tar -x and cp -p set each file's times after closing it. In write-back
# mode that makes no call: the upload carries them (or one utimens follows
# it where the vendor's upload cannot), and a kill -9 saves them too.
@test "writeback: times set after close (tar -x) go with the upload; kill -9 saves them" {
	wb_mount inject_latency_ms=2000
	mkdir "$T/src"
	for i in 1 2 3 4 5; do
		echo "file $i" >"$T/src/f$i"
		touch -d "2001-02-0$i 04:05:06" "$T/src/f$i"
	done
	tar -C "$T/src" -cf "$T/f.tar" f1 f2 f3 f4 f5
	# whole seconds: the shell fallback's touch sets no finer
	want=$(cd "$T/src" && stat -c '%n %Y' f*)
	mkdir "$MNT/a" "$MNT/b"
	sbfs sync "$MNT"
	before=$(calls utimens)
	tar -C "$MNT/a" --no-same-owner -xf "$T/f.tar"
	assert_eq "$(calls utimens)" "$before" "utimens calls before the drain"
	assert_eq "$(cd "$MNT/a" && stat -c '%n %Y' f*)" "$want" "times on the mount"
	sbfs sync "$MNT"
	assert_eq "$(sb sh -c 'cd /workspace/a && stat -c "%n %Y" f*')" "$want" "times in the sandbox"
	assert_eq "$(sb cat /workspace/a/f3)" "file 3"
	# the second copy is still queued when the daemon dies
	tar -C "$MNT/b" --no-same-owner -xf "$T/f.tar"
	(($(pending) >= 5)) || fail "files not pending: $(pending)"
	kill_and_recover
	saved=$(ls -d "$XDG_STATE_HOME"/sbfs/unsaved/*/b)
	assert_eq "$(cd "$saved" && stat -c '%n %Y' f*)" "$want" "times of the saved files"
	assert_eq "$(cat "$saved/f3")" "file 3"
	backend_sweep
}

@test "writeback: a directory's times and mode, set after what tar wrote into it, stay (the uploads into it land first)" {
	wb_mount inject_latency_ms=300
	mkdir -p "$T/src/d"
	echo inside >"$T/src/d/f"
	chmod 555 "$T/src/d"
	touch -d "2001-02-03 04:05:06" "$T/src/d"
	tar -C "$T/src" -cf "$T/d.tar" d
	want=$(cd "$T/src" && stat -c '%n %Y %a' d)
	tar -C "$MNT" --no-same-owner -xf "$T/d.tar"
	assert_eq "$(cd "$MNT" && stat -c '%n %Y %a' d)" "$want" "d on the mount"
	sbfs sync "$MNT"
	assert_eq "$(sb sh -c 'cd /workspace && stat -c "%n %Y %a" d')" "$want" "d in the sandbox"
	assert_eq "$(sb cat /workspace/d/f)" inside
	drop_kernel_caches
	assert_eq "$(cd "$MNT" && stat -c '%n %Y %a' d)" "$want" "d on the mount, asked again"
	chmod 755 "$MNT/d"
}

@test "writeback: unmount waits for the queue and exits 0" {
	wb_mount inject_latency_ms=300 -f
	for i in $(seq 1 20); do echo "$i" >"$MNT/u$i"; done
	# The kernel refused this unmount once with EBUSY right after the
	# closes (1 run in 4, on a loaded machine; cause not found): the
	# unmount is asked again until it is taken, the daemon's exit and
	# what it saved are judged as before.
	poll 10 fusermount3 -u "$MNT" || fail "fusermount3 -u $MNT was refused for 10 s"
	rc=0
	wait "$SBFS_FG_PID" || rc=$?
	assert_eq "$rc" 0 "daemon exit status"
	[[ ! -e $XDG_STATE_HOME/sbfs/unsaved ]] || fail "files were left unsaved"
	[[ -z $(ls -A "$T/spool") ]] || fail "journal left in the spool dir: $(ls -A "$T/spool")"
	# exit 0 means every file reached the sandbox: a file that could
	# not is saved and named, and the daemon exits 1
	if grep -q "could not upload" "$T/mnt.fg.out"; then
		fail "unmount reported unsaved files"
	fi
}

@test "writeback: after the upload the mount shows the sandbox's mtime" {
	wb_mount
	echo one >"$MNT/m.txt"
	before=$(stat -c %y "$MNT/m.txt")
	run sbfs sync "$MNT"
	assert_status 0
	sb true # a coherence point: the kernel asks again
	after=$(stat -c %y "$MNT/m.txt")
	assert_eq "$(date -d "$after" +%s)" "$(sb stat -c %Y m.txt)" \
		"mtime through the mount vs in the sandbox"
	if backend_upload_keeps_mtime; then
		# the local backend's batch gives the sandbox's copy our mtime
		assert_eq "$after" "$before" "mtime kept across the upload"
		assert_eq "$after" "$(sb stat -c %y m.txt)"
	fi
}

# ---- queued removes (fs/wb_removes.c) ----

@test "writeback: rm -rf of a tree costs far fewer remove calls than entries" {
	wb_mount
	entries=1 # the top directory
	mkdir "$MNT/t"
	for a in 1 2 3 4; do
		for b in 1 2 3; do
			mkdir -p "$MNT/t/a$a/b$b"
			entries=$((entries + 1))
			for i in $(seq 1 12); do echo "$a $b $i" >"$MNT/t/a$a/b$b/f$i"; done
			entries=$((entries + 12))
		done
		ln -s b1/f1 "$MNT/t/a$a/link"
		entries=$((entries + 2)) # a$a and the link
	done
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(sb sh -c 'find t | wc -l')" "$entries" "entries in the sandbox"
	r0=$(calls remove)
	rm -rf "$MNT/t"
	[[ ! -e $MNT/t ]] || fail "the tree still shows in the mount"
	# sbexec is a barrier: the command sees the tree gone.
	run sb test -e t
	assert_status 1
	run sbfs sync "$MNT"
	assert_status 0
	removes=$(($(calls remove) - r0))
	echo "remove calls for $entries entries: $removes" >&3
	((removes * 10 < entries)) || fail "$removes remove calls for $entries entries"
	assert_eq "$(wb removes_failed)" 0
	assert_eq "$(wb removes_queued)" 0
	(($(wb removes_done) >= entries)) || fail "removes_done: $(wb removes_done)"
}

@test "writeback: a name removed and made again before the drain keeps the new file" {
	wb_mount
	echo old >"$MNT/f"
	mkdir "$MNT/d"
	echo old >"$MNT/d/g"
	ln -s f "$MNT/l"
	run sbfs sync "$MNT"
	assert_status 0
	ls "$MNT/d" >/dev/null
	rm "$MNT/f" && echo new >"$MNT/f"
	rm -r "$MNT/d" && mkdir "$MNT/d" && echo new >"$MNT/d/g"
	rm "$MNT/l" && ln -s d/g "$MNT/l"
	assert_eq "$(cat "$MNT/f")" new
	assert_eq "$(ls "$MNT")" "d
f
l"
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(sb cat f)" new
	assert_eq "$(sb cat d/g)" new
	assert_eq "$(sb readlink l)" d/g
	assert_eq "$(wb removes_failed)" 0
}

# Calls on other names go ahead of the queued removes; the space a remove
# frees is the one thing they can need from it. Every call takes 500 ms
# here, so the mkdir reaches the full disk while fill's remove, queued
# just before it, is still on its way.
@test "writeback: a call the full disk refused succeeds once the queued remove that frees the space has landed" {
	[[ $(backend_disk_limit) == enforced ]] || skip "disk= is not enforced on this backend here"
	wb_mount disk=32M,inject_latency_ms=500
	# full to the last block: big writes, then the blocks they left
	run sb sh -c 'dd if=/dev/zero of=/workspace/fill bs=1M count=64
		dd if=/dev/zero of=/workspace/fill bs=1k count=65536 oflag=append conv=notrunc
		mkdir /workspace/x'
	assert_output_has "mkdir: cannot create directory '/workspace/x': No space left on device"
	ls "$MNT" >/dev/null
	expect_po "unlink OK
mkdir OK" unlink fill mkdir d 0755
	run sb test -d /workspace/d
	assert_status 0
	run sb test -e /workspace/fill
	assert_status 1
	assert_eq "$(wb removes_failed)" 0
}

@test "writeback: a removed name stays gone for lookups and listings before the drain" {
	# The first batch remove stalls (until the 5 s call deadline) and then
	# fails: meanwhile f2 is still in the sandbox, its remove pending.
	wb_mount inject_faults=stall:remove:1,call_timeout=5
	mkdir "$MNT/d"
	for i in 1 2 3; do echo "$i" >"$MNT/d/f$i"; done
	run sbfs sync "$MNT"
	assert_status 0
	rm "$MNT/d/f2"
	# the fs forgets what it cached: lookups and the listing ask the
	# sandbox, which still has f2
	sbfs refresh "$MNT"
	[[ ! -e $MNT/d/f2 ]] || fail "f2 shows again while its remove is pending"
	assert_eq "$(ls "$MNT/d")" "f1
f3"
	assert_eq "$(wb removes_queued)" 1
	# the stalled remove failed: reported, and f2 is kept and shows again
	run sbfs sync "$MNT"
	[ "$status" -ne 0 ] || fail "sync succeeded: $output"
	assert_output_has "remove of /d/f2 failed"
	assert_eq "$(sb cat d/f2)" 2
	assert_eq "$(cat "$MNT/d/f2")" 2
}

# late:list: the sandbox makes each listing at once and its answer comes
# 1 s later, after what the mount did meanwhile has landed. The answer
# tells the sandbox as it was and must not undo that.
@test "writeback: a listing answered after a queued remove landed does not show the name again" {
	wb_mount inject_faults=late:list:every1
	mkdir "$MNT/d"
	echo 1 >"$MNT/d/f1"
	echo 2 >"$MNT/d/f2"
	run sbfs sync "$MNT"
	assert_status 0
	sbfs refresh "$MNT"
	rm "$MNT/d/f2"
	# listed at once, with f2 still there; the remove lands 80 ms later
	assert_eq "$(ls "$MNT/d")" "f1"
	[[ ! -e $MNT/d/f2 ]] || fail "f2 shows again after its remove landed"
	assert_eq "$(sb ls d)" "f1"
}

@test "writeback: a listing answered after an upload landed does not show the old size" {
	wb_mount inject_faults=late:list:every1
	mkdir "$MNT/d"
	echo old >"$MNT/d/f"
	run sbfs sync "$MNT"
	assert_status 0
	sbfs refresh "$MNT"
	ls -l "$MNT/d" >"$T/ls.out" &
	local lister=$!
	sleep 0.3 # the listing is made, its answer on its way
	echo "the new, longer content" >"$MNT/d/f"
	poll 5 drained || fail "the upload did not land within 5 s"
	wait "$lister"
	assert_eq "$(stat -c %s "$MNT/d/f")" 24
	assert_eq "$(cat "$MNT/d/f")" "the new, longer content"
	assert_eq "$(sb cat d/f)" "the new, longer content"
}

@test "writeback: rmdir of a directory the mount never listed gives the sandbox's errno" {
	wb_mount
	sb sh -c 'mkdir -p e && echo x > e/inner'
	run rmdir "$MNT/e"
	assert_status 1
	assert_output_has "Directory not empty"
	assert_eq "$(sb cat e/inner)" x
	# and an empty one goes at once, for real
	sb mkdir e2
	rmdir "$MNT/e2"
	run sb test -e e2
	assert_status 1
}

@test "writeback: a queued rmdir the sandbox refuses is reported at sync, the file kept" {
	# A watched mount sees the write behind its back and answers
	# ENOTEMPTY at once (coherence.bats); this is the path where it
	# cannot know.
	if backend_watches_changes; then wb_mount nowatch; else wb_mount; fi
	local ws
	ws=$(backend_host_workspace)
	[[ -n $ws ]] ||
		skip "stages a write behind the mount's back in the workspace on the host, which this backend has not (a barrier would drain the queue)"
	mkdir "$MNT/d"
	echo a >"$MNT/d/a"
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(ls "$MNT/d")" a "the mount's listing of d"
	# a process in the sandbox writes into d; the mount does not know
	echo extra >"$ws/d/extra"
	rm "$MNT/d/a"
	rmdir "$MNT/d" # queued: the listing said d held only a
	run sbfs sync "$MNT"
	[ "$status" -ne 0 ] || fail "sync succeeded: $output"
	assert_output_has "remove of /d failed"
	assert_output_has "Directory not empty"
	assert_eq "$(wb removes_failed)" 1
	status_json | jq -e '.writeback.failed_removes[] | select(.path == "/d")' >/dev/null ||
		fail "status does not list the failed remove of /d"
	run sbfs status "$MNT"
	assert_output_has "failed remove: /d: Directory not empty"
	# nothing is lost, and the mount shows it again
	assert_eq "$(sb cat d/extra)" extra
	assert_eq "$(ls "$MNT/d")" extra
	run sb test -e d/a
	assert_status 1
	# reported once
	run sbfs sync "$MNT"
	assert_status 0
}

@test "writeback: a failed remove batch is reported at sync and sbexec sees the files kept" {
	# Whether the two removes share a batch depends on how fast rm and
	# rmdir follow each other: the first two remove calls fail, one
	# batch or two. y's listing stays fresh, so its rmdir can queue.
	wb_mount inject_faults=error:remove:1-2,dir_timeout=3600,attr_timeout=3600
	echo a >"$MNT/x"
	mkdir "$MNT/y"
	run sbfs sync "$MNT"
	assert_status 0
	ls "$MNT/y" >/dev/null
	rm "$MNT/x"
	rmdir "$MNT/y"
	run sbfs sync "$MNT"
	[ "$status" -ne 0 ] || fail "sync succeeded: $output"
	assert_output_has "remove of /x failed"
	assert_output_has "remove of /y failed"
	assert_eq "$(wb removes_failed)" 2
	assert_eq "$(sb cat x)" a
	sb test -d y
	assert_eq "$(cat "$MNT/x")" a "the kept file shows in the mount again"
	[[ -d $MNT/y ]] || fail "the kept directory does not show again"
}

# ---- queued calls return early only where their result is certain ----

# po ARGS...: one posixop run in the mount root (exact errno names).
po() {
	local posixop=$SBFS_BUILD/tests/tools/posixop
	[[ -x $posixop ]] || fail "no posixop helper at $posixop (build first)" || return 1
	(cd "$MNT" && "$posixop" "$@")
}

# local_po DIR ARGS...: the same calls on a local directory, for comparison.
local_po() {
	local dir=$1
	shift
	(cd "$dir" && "$SBFS_BUILD/tests/tools/posixop" "$@")
}

@test "writeback: rename of a directory over a non-empty one is ENOTEMPTY and keeps its contents" {
	# The first upload stalls until its 3 s deadline: d2/keep is still
	# only in the spool when the rename comes, so the sandbox's d2 is
	# empty and only the mount knows better. d3's file is the sandbox's.
	wb_mount inject_faults=stall:write:1,call_timeout=3
	sb sh -c 'mkdir d3 && echo inner >d3/inner'
	mkdir "$MNT/d1" "$MNT/d2"
	echo keep >"$MNT/d2/keep"
	mkdir -p "$T/loc/d1" "$T/loc/d2" "$T/loc/d3"
	echo keep >"$T/loc/d2/keep"
	echo inner >"$T/loc/d3/inner"
	want=$(local_po "$T/loc" rename d1 d2 - rename d1 d3 -)
	assert_eq "$want" "rename ENOTEMPTY
rename ENOTEMPTY" "a local directory"
	assert_eq "$(po rename d1 d2 - rename d1 d3 -)" "$want" "the mount"
	sb sh -c 'test -d d1'
	assert_eq "$(sb cat d2/keep)" keep "d2's pending file reached the sandbox"
	assert_eq "$(sb cat d3/inner)" inner
	assert_eq "$(cat "$MNT/d2/keep")" keep
	assert_eq "$(ls "$MNT/d3")" inner
}

@test "writeback: rename of a directory over an empty one succeeds, after the queued removes that emptied it" {
	wb_mount
	mkdir "$MNT/d1" "$MNT/d2" "$MNT/d3"
	echo a >"$MNT/d1/a"
	echo old >"$MNT/d3/old"
	run sbfs sync "$MNT"
	assert_status 0
	ls "$MNT/d2" "$MNT/d3" >/dev/null
	rm "$MNT/d3/old" # queued: the sandbox's d3 is empty only once it lands
	assert_eq "$(po rename d1 d2 - rename d2 d3 -)" "rename OK
rename OK"
	assert_eq "$(sb cat d3/a)" a
	run sb sh -c 'test -e d1 || test -e d2 || test -e d3/old'
	assert_status 1
	assert_eq "$(ls "$MNT")" d3
	assert_eq "$(ls "$MNT/d3")" a
	assert_eq "$(wb removes_failed)" 0
}

@test "writeback: rmdir of a directory sbexec filled behind a cached listing is ENOTEMPTY" {
	wb_mount
	mkdir "$MNT/d"
	assert_eq "$(ls "$MNT/d")" "" "the mount's listing of d"
	sb touch d/x
	assert_eq "$(po rmdir d)" "rmdir ENOTEMPTY"
	sb test -e d/x
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(wb removes_failed)" 0
	assert_eq "$(ls "$MNT/d")" x
}

@test "writeback: rmdir while a running sbexec fills the directory is ENOTEMPTY, nothing lost" {
	wb_mount
	mkdir "$MNT/d"
	assert_eq "$(ls "$MNT/d")" "" "the mount's listing of d"
	# The command fills d after the mount listed it, then waits for go
	# (made on the mount and fsync'd, so it reaches the sandbox).
	sb sh -c 'touch d/x && echo filled && until [ -e go ]; do sleep 0.05; done' \
		>"$T/exec.out" 2>&1 &
	execpid=$!
	poll 30 grep -q filled "$T/exec.out" || fail "the command did not fill d: $(cat "$T/exec.out")"
	assert_eq "$(po rmdir d)" "rmdir ENOTEMPTY"
	assert_eq "$(po open 0 go w,creat 644 fsync 0 close 0)" "open OK
fsync OK
close OK"
	wait "$execpid" || fail "the command failed: $(cat "$T/exec.out")"
	sb test -e d/x
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(wb removes_failed)" 0
	assert_eq "$(ls "$MNT/d")" x
}

@test "writeback: rmdir of a directory whose child the kernel forgot is ENOTEMPTY" {
	wb_mount
	mkdir "$MNT/d" "$MNT/x"
	assert_eq "$(ls "$MNT/d")" "" "the mount's listing of d"
	mv "$MNT/x" "$MNT/d/x"
	# the kernel forgets d/x; the mount's listing of d must not forget it
	drop_kernel_caches
	assert_eq "$(po rmdir d)" "rmdir ENOTEMPTY"
	sb test -d d/x
	assert_eq "$(ls "$MNT/d")" x
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(wb removes_failed)" 0
}

@test "writeback: rm -rf of a tree sbexec made is still batched" {
	wb_mount
	# few directories: each listing rm -rf waits for may let the idle
	# drain land what is queued so far, so they bound the batches
	sb sh -c 'for a in 1 2; do mkdir -p t/a$a && for i in $(seq 1 30); do echo $i >t/a$a/f$i; done; done'
	entries=$(sb sh -c 'find t | wc -l')
	r0=$(calls remove)
	rm -rf "$MNT/t"
	[[ ! -e $MNT/t ]] || fail "the tree still shows in the mount"
	run sbfs sync "$MNT"
	assert_status 0
	run sb test -e t
	assert_status 1
	removes=$(($(calls remove) - r0))
	echo "remove calls for $entries entries: $removes" >&3
	((removes * 10 < entries)) || fail "$removes remove calls for $entries entries"
	assert_eq "$(wb removes_failed)" 0
}

@test "writeback: queued removes the sandbox refuses are reported at sync and the mount re-lists the truth" {
	# Every remove call fails, however the drains split the rm -rf: what
	# rm -rf itself says depends on that split (an rmdir after a failed
	# batch asks the sandbox at once), what follows does not.
	wb_mount inject_faults=error:remove:every1
	mkdir -p "$MNT/d/sub"
	for i in 1 2 3; do echo "$i" >"$MNT/d/f$i"; done
	echo s >"$MNT/d/sub/s"
	run sbfs sync "$MNT"
	assert_status 0
	run rm -rf "$MNT/d"
	run sbfs sync "$MNT"
	[ "$status" -ne 0 ] || fail "sync succeeded: $output"
	assert_output_has "remove of /d/f1 failed"
	(($(wb removes_failed) >= 1)) || fail "removes_failed: $(wb removes_failed)"
	truth=$(sb sh -c 'cd d && ls -R')
	assert_eq "$truth" "$(cd "$MNT/d" && ls -R)" "the mount's tree against the sandbox's"
	assert_eq "$(cat "$MNT/d/sub/s")" s
	# reported once
	run sbfs sync "$MNT"
	assert_status 0
}

# same_inode_or_landed A B LINKS0: names A and B of one file show one
# inode on the mount. Where the sandbox's stat tells no inode (docker,
# e2b), only until the link has landed (more link calls than LINKS0) and
# A's attributes went stale (a watch report), A then being a name of its
# own, as for any link made in the sandbox.
same_inode_or_landed() {
	local ia ib
	ia=$(stat -c %i "$MNT/$1") ib=$(stat -c %i "$MNT/$2")
	[[ $ia == "$ib" ]] && return 0
	if [[ $SBFS_TEST_BACKEND == docker || $SBFS_TEST_BACKEND == e2b ]] &&
		(($(calls link) > $3)); then
		return 0
	fi
	assert_eq "$ia" "$ib" "one inode on the mount for $1 and $2"
}

# git's object write: a temporary name, a link to the final one, the
# temporary name removed, in new fan-out directories. The mkdirs queue
# (the names are known absent: the mount made their parents) and the
# links wait for the uploads; what lands is what a local disk holds.
@test "writeback: mkdirs queue and links wait for the upload: git's object writes cost a few calls, and land as on a local disk" {
	wb_mount
	mkdir "$MNT/objects" "$T/loc"
	mkdir "$T/loc/objects"
	ls "$MNT/objects" >/dev/null
	local m0 l0 r0 i
	m0=$(calls mkdir) l0=$(calls link) r0=$(calls remove)
	for i in 1 2 3 4 5 6 7 8 9; do
		for dir in "$MNT" "$T/loc"; do
			mkdir "$dir/objects/0$i"
			printf 'object %s\n' "$i" >"$dir/objects/0$i/tmp_obj"
			ln "$dir/objects/0$i/tmp_obj" "$dir/objects/0$i/final$i"
			rm "$dir/objects/0$i/tmp_obj"
		done
	done
	# One kept: both names land, one file. Linked while still open, so
	# its upload cannot have landed first: a link of a file the sandbox
	# has goes there at once, and its new name is a node of its own (the
	# objects' links landed first, so a link call after l1 is this one's).
	run sbfs sync "$MNT"
	assert_status 0
	local l1
	l1=$(calls link)
	for dir in "$MNT" "$T/loc"; do
		mkdir "$dir/kept"
		exec 7>"$dir/kept/a"
		echo both >&7
		ln "$dir/kept/a" "$dir/kept/b"
		[[ $dir == "$T/loc" ]] ||
			assert_eq "$(stat -c %i "$MNT/kept/a")" "$(stat -c %i "$MNT/kept/b")" "one inode on the mount"
		exec 7>&-
	done
	same_inode_or_landed kept/a kept/b "$l1"
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(sb sh -c 'cd objects && for d in *; do ls "$d"; cat "$d"/*; done')" \
		"$(cd "$T/loc/objects" && for d in *; do ls "$d"; cat "$d"/*; done)" "objects in the sandbox"
	assert_eq "$(sb cat kept/b)" both
	assert_eq "$(sb stat -c %h kept/a)" 2 "kept/a's links in the sandbox"
	assert_eq "$(sb stat -c %i kept/a)" "$(sb stat -c %i kept/b)" "one inode in the sandbox"
	assert_eq "$(stat -c %h "$MNT/kept/a") $(stat -c %h "$MNT/kept/b")" "2 2" "links on the mount"
	# A command changes the file through one name: the watch reports it
	# (or, unwatched, the command's end drops what the mount cached).
	# Asked again, the sandbox names one file: still one inode, where its
	# stat tells inodes (docker's and e2b's do not: two names, as for
	# any link made in the sandbox).
	sb touch kept/a
	same_inode_or_landed kept/a kept/b "$l1"
	assert_eq "$(stat -c %h "$MNT/kept/a") $(stat -c %h "$MNT/kept/b")" "2 2" "links on the mount after the touch"
	# How many depends on how the workers' batches fell between the
	# closes and the links (test_fs_core pins the exact calls down).
	figure "git-style objects: 10 mkdirs, 10 links, 9 unlinks cost $(($(calls mkdir) - m0)) mkdir, $(($(calls link) - l0)) link and $(($(calls remove) - r0)) remove calls"
	rm "$MNT/kept/b"
	assert_eq "$(stat -c %h "$MNT/kept/a")" 1 "kept/a after rm kept/b"
	assert_eq "$(sb sh -c 'ls kept')" a
}

# A queued mkdir lands before anything below it or anything that would
# see it; where the name may exist (a command ran since the listing), the
# sandbox answers at once.
@test "writeback: a name past the sandbox's PATH_MAX is ENAMETOOLONG at once, never queued (pjdfstest mkdir/03.t)" {
	wb_mount
	local name over fits i ws=/workspace
	local posixop=$SBFS_BUILD/tests/tools/posixop
	name=$(printf 'n%.0s' {1..255})
	# From a directory of the mount the kernel sees a short relative path;
	# the sandbox sees the workdir and all 15 levels in front of it.
	cd "$MNT"
	for ((i = 0; i < 14; i++)); do
		mkdir "$name"
		cd "$name"
	done
	mkdir "$name"
	echo f >f
	# /workspace, 15 levels, then a name that leaves no room for the NUL
	over=$(printf 'o%.0s' $(seq $((4096 - ${#ws} - 15 * 256 - 1))))
	fits=${over:1}
	sbfs sync "$MNT" || fail "the deep directories did not land"
	assert_eq "$("$posixop" mkdir "$name/$over" 755 open 0 "$name/$over" w,creat 644 \
		symlink t "$name/$over" rename f "$name/$over" -)" \
		$'mkdir ENAMETOOLONG\nopen ENAMETOOLONG\nsymlink ENAMETOOLONG\nrename ENAMETOOLONG'
	assert_eq "$(wb removes_queued)" 0 "removes queued"
	assert_eq "$(pending)" 0 "uploads pending"
	run sbexec -m "$MNT" true
	assert_status 0
	assert_eq "$("$posixop" mkdir "$name/$fits" 755)" "mkdir OK"
	run sbexec -m "$MNT" true
	assert_status 0
	sb test -d "$ws/$(realpath --relative-to="$MNT" .)/$name/$fits" ||
		fail "the 4,095-byte path is not in the sandbox"
}

@test "writeback: a queued mkdir lands before what depends on it; a name a command may have made is asked" {
	wb_mount
	ls "$MNT" >/dev/null
	mkdir "$MNT/q"
	assert_eq "$(stat -c %F "$MNT/q")" directory
	assert_eq "$(sb sh -c 'test -d q && echo there')" there "sbexec sees the queued mkdir"
	sb mkdir made_by_command
	run mkdir "$MNT/made_by_command"
	assert_status 1
	assert_output_has "File exists"
	mkdir "$MNT/q/r"
	chmod 700 "$MNT/q/r"
	assert_eq "$(sb stat -c %a q/r)" 700 "a chmod of a queued directory lands after it"
	rmdir "$MNT/q/r"
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(sb sh -c 'ls -A q')" "" "q/r made and removed"
}
