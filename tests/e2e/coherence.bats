#!/usr/bin/env bats
# Coherence between the mount's caches and the sandbox (found by fsdiff,
# see differential.bats): what the sandbox changes behind the mount's back
# (sbexec) must win over what the mount cached, and open files must stay
# usable through unlink and rename as on a local file system.

load helpers

# setup and teardown: the usual ones, from helpers.bash

# guest_size NAME: the file's size as the sandbox sees it.
guest_size() {
	sb sh -c 'wc -c <"$1"' sh "$1" | tr -d ' '
}

@test "a write after the sandbox emptied a file does not bring the old data back" {
	cd "$MNT"
	head -c 69592 /dev/urandom >y
	cat y >/dev/null # the spool is now kept as a read cache
	sb sh -c ': >"$1"' sh y
	assert_eq "$(stat -c %s y)" 0 "size on the mount after the sandbox emptied y"
	printf abc | dd of=y bs=1 seek=3788 conv=notrunc status=none
	assert_eq "$(stat -c %s y)" 3791 "size on the mount after the write"
	assert_eq "$(guest_size y)" 3791 "size in the sandbox after the write"
	assert_eq "$(head -c 3788 y | tr -d '\0' | wc -c)" 0 "bytes before the write are zero"
	assert_eq "$(tail -c 3 y)" abc "written bytes"
}

# Found by fsdiff (seed 4): the spool kept from the old file gave its mode
# to the new one once the mount wrote it.
@test "a file sbexec moved over a name the mount had written keeps its own mode when the mount writes it" {
	cd "$MNT"
	mkdir x y
	python3 -c '
import os
for name, mode, data in (("x/b", 0o700, b"a" * 100), ("y/x", 0o711, b"b" * 50)):
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
    os.write(fd, data)
    os.close(fd)'
	sb mv -f y/x x/b
	assert_eq "$(stat -c %a x/b)" 711 "mode on the mount after the sandbox's mv"
	run python3 -c '
import os
fd = os.open("x/b", os.O_RDWR | os.O_CREAT, 0o700)
os.pwrite(fd, b"c" * 10, 331)
print(oct(os.fstat(fd).st_mode & 0o7777))
os.close(fd)'
	assert_eq "$output" 0o711 "fstat of the open file after the write"
	assert_eq "$(stat -c %a x/b)" 711 "mode on the mount after the write"
	assert_eq "$(sb stat -c %a x/b)" 711 "mode in the sandbox after the write"
	assert_eq "$(head -c 50 x/b)" "$(printf 'b%.0s' $(seq 50))"
}

# subdir_link_counts DIR: mkdir, rmdir and rename of subdirectories in DIR,
# checking the link counts of d and e after each.
subdir_link_counts() {
	cd "$1"
	mkdir d e
	stat d e >/dev/null # their attributes are cached now
	[[ $(stat -c %h d) -ge 2 ]] || skip "the sandbox's file system does not count subdirectories"
	assert_eq "$(stat -c %h d)" 2 "empty d"
	mkdir d/y
	assert_eq "$(stat -c %h d)" 3 "d after mkdir d/y"
	mkdir d/z
	assert_eq "$(stat -c %h d)" 4 "d after mkdir d/z"
	rmdir d/y
	assert_eq "$(stat -c %h d)" 3 "d after rmdir d/y"
	mv d/z e/z
	assert_eq "$(stat -c %h d)" 2 "d after mv d/z e/z"
	assert_eq "$(stat -c %h e)" 3 "e after mv d/z e/z"
	mkdir d/w
	mv e/z d/w
	assert_eq "$(stat -c %h d)" 3 "d after mv e/z over the empty d/w"
	assert_eq "$(stat -c %h e)" 2 "e after mv e/z over d/w"
	mkdir d/v
	mv d/v d/w
	assert_eq "$(stat -c %h d)" 3 "d after mv d/v over the empty d/w"
}

@test "a directory's link count follows the mount's mkdir, rmdir and rename of subdirectories" {
	subdir_link_counts "$MNT"
}

# Every stat asks the sandbox, as once the attributes expire on a loaded
# machine: a backend whose stat cannot count subdirectories (docker's
# archive API) must not undo the counts the mount kept.
@test "a directory's link count holds when every stat asks the sandbox" {
	mount_sbfs -n uncached -o attr_timeout=0
	subdir_link_counts "$T/uncached"
}

# docker's archive stat, modal's and e2b's listings do not count links:
# there a listing of the directory counts its subdirectories.
@test "a directory's link count counts the subdirectories an sbexec made or removed, once listed" {
	cd "$MNT"
	mkdir d d/a d/b
	[[ $(stat -c %h d) -ge 2 ]] || skip "the sandbox's file system does not count subdirectories"
	sb mkdir d/c
	ls d >/dev/null
	assert_eq "$(stat -c %h d)" "$(sb stat -c %h d)" "after sbexec mkdir d/c"
	sb rmdir d/a
	cd d # a stat of the directory itself, not a lookup in its parent
	ls >/dev/null
	assert_eq "$(stat -c %h .)" "$(sb stat -c %h .)" "after sbexec rmdir d/a"
}

# command_subdir_counts DIR: a command's mkdir and rmdir below DIR show in
# DIR's link count at its next stat, with no listing first.
command_subdir_counts() {
	cd "$1"
	mkdir d d/a d/b
	[[ $(stat -c %h d) -ge 2 ]] || skip "the sandbox's file system does not count subdirectories"
	sb mkdir d/c
	assert_eq "$(stat -c %h d)" "$(sb stat -c %h d)" "after sbexec mkdir d/c"
	sb rmdir d/a d/b
	assert_eq "$(stat -c %h d)" "$(sb stat -c %h d)" "after sbexec rmdir d/a d/b"
	assert_eq "$(stat -c %h d)" 3 "d holding c"
}

# Where the stat counts no links (docker, modal, e2b), what the command did
# below a directory makes its next stat count again (a listing): watched,
# the report of a subdirectory made or gone; unwatched (or a settle that
# timed out), every directory the coherence point forgot. fsdiff seed 3
# reached it on docker: an sbexec rmdir left the parent's count one too
# high.
@test "a directory's link count follows the subdirectories a command made or removed, with no listing first" {
	command_subdir_counts "$MNT"
	mount_sbfs -n unwatched -o nowatch
	command_subdir_counts "$T/unwatched"
}

@test "an open file stays readable in full after its name is removed or replaced" {
	cd "$MNT"
	head -c 3000000 /dev/urandom >"$T/data"
	cp "$T/data" a
	cp "$T/data" b
	echo other >c
	sb true # uploaded, and the mount's cached copies of them go
	python3 - "$T/data" <<-'PY'
		import os, sys
		want = open(sys.argv[1], "rb").read()
		a = os.open("a", os.O_RDONLY)
		b = os.open("b", os.O_RDONLY)
		assert os.pread(a, 10, 0) == want[:10]
		assert os.pread(b, 10, 0) == want[:10]
		os.unlink("a")
		os.rename("c", "b")
		got_a = os.pread(a, 1000, 2500000)
		got_b = os.pread(b, 1000, 2500000)
		ok = got_a == want[2500000:2501000] and got_b == got_a
		sys.exit(0 if ok else "the open files read back wrong after unlink/rename")
	PY
}

# ---- -o watch: the backend reports the sandbox's changes (local: inotify) ----

# mount_watched: a mount with -o watch, or skip where the backend has none.
mount_watched() {
	backend_watches_changes || skip "the ${SBFS_TEST_BACKEND:-} backend does not report changes"
	mount_sbfs -n watched -o "watch${1:+,$1}"
}

# Changes made behind the mount's back, not by an sbexec the mount waits
# for: with the default timeouts (5 s) an unwatched mount would show the
# old listing and content for seconds; a watched one shows them within a
# poll.
@test "-o watch: a change made in the sandbox outside sbexec shows at once" {
	mount_watched
	backend_behind true || skip "the suite cannot reach the ${SBFS_TEST_BACKEND:-} sandbox but through sbexec"
	assert_eq "$(status_json | jq .watched)" true "sbfs status: watched"
	mkdir "$MNT/d"
	printf one >"$MNT/d/f"
	sbfs sync "$MNT" # write-back: landed before the sandbox writes over it
	ls -l "$MNT/d" >/dev/null
	assert_eq "$(cat "$MNT/d/f")" one "content before"
	backend_behind 'printf new >d/g && printf two >d/f && mkdir d/sub && printf deep >d/sub/x'
	poll 3 test -e "$MNT/d/g" || fail "a name made in the sandbox did not show within 3 s"
	poll 3 grep -qx two "$MNT/d/f" || fail "content changed in the sandbox still reads '$(cat "$MNT/d/f")' after 3 s"
	assert_eq "$(cat "$MNT/d/sub/x")" deep "a file in a directory made in the sandbox"
	# a tree moved in whole: nothing inside it was ever reported
	backend_behind 'mkdir -p ../outside-$$/tree/deeper && printf in >../outside-$$/tree/deeper/f &&
		mv ../outside-$$/tree d/tree && rmdir ../outside-$$'
	poll 3 test -e "$MNT/d/tree/deeper/f" || fail "a tree moved in did not show within 3 s"
	backend_behind 'printf more >d/tree/deeper/g'
	poll 3 test -e "$MNT/d/tree/deeper/g" || fail "a file made in a tree moved in did not show within 3 s"
	backend_behind 'rm d/g'
	poll 3 test ! -e "$MNT/d/g" || fail "a name removed in the sandbox still showed after 3 s"
}

@test "-o watch: a directory moved in the sandbox is watched where it went" {
	mount_watched
	backend_behind true || skip "the suite cannot reach the ${SBFS_TEST_BACKEND:-} sandbox but through sbexec"
	mkdir -p "$MNT/a/b"
	sb mv a moved
	ls "$MNT/moved/b" >/dev/null
	backend_behind 'printf x >moved/b/later'
	poll 3 test -e "$MNT/moved/b/later" || fail "a file made in the moved directory did not show within 3 s"
	sb mv moved/b b2
	backend_behind 'printf y >b2/later2'
	poll 3 test -e "$MNT/b2/later2" || fail "a file made in the twice-moved directory did not show within 3 s"
	assert_eq "$(ls "$MNT")" b2$'\n'moved "the root after the moves"
}

@test "-o watch: after an sbexec that changed nothing, a tree already listed costs no call" {
	mount_watched
	mkdir -p "$MNT/t/u"
	for i in 1 2 3; do printf "$i" >"$MNT/t/f$i"; printf "$i" >"$MNT/t/u/g$i"; done
	sb true # what the mount wrote has landed; its own changes come back
	ls -lR "$MNT/t" >/dev/null
	local l0 s0
	l0=$(calls list) s0=$(calls stat)
	sb true
	ls -lR "$MNT/t" >/dev/null
	grep -r nothing "$MNT/t" || true
	assert_eq "$(calls list) $(calls stat)" "$l0 $s0" "list and stat calls after 'sbexec true'"
	# and what a command changes is seen, and only that is asked again
	sb sh -c 'printf changed > t/u/g2'
	assert_eq "$(cat "$MNT/t/u/g2")" changed "a file the command rewrote"
	ls -lR "$MNT/t" >/dev/null
	(($(calls list) - l0 <= 1)) || fail "$(($(calls list) - l0)) listings after one file changed"
}

@test "a backend that can watch does by default; with -o nowatch an sbexec forgets what is cached" {
	backend_watches_changes || skip "the ${SBFS_TEST_BACKEND:-} backend does not report changes"
	assert_eq "$(status_json | jq .watched)" true "sbfs status of a default mount: watched"
	mount_sbfs -n unwatched -o nowatch
	assert_eq "$(status_json | jq .watched)" false "sbfs status with -o nowatch: watched"
	mkdir "$MNT/d"
	ls "$MNT/d" >/dev/null
	local l0
	l0=$(calls list)
	sb true
	ls "$MNT/d" >/dev/null
	(($(calls list) > l0)) || fail "a listing after sbexec called no list"
}

@test "-o watch is refused where the backend cannot report changes" {
	backend_watches_changes && skip "the ${SBFS_TEST_BACKEND:-} backend reports changes"
	mkdir "$T/refused"
	run sbfs -o "backend=$(backend_sbfs_name),watch${SBFS_TEST_OPTS:+,$SBFS_TEST_OPTS}" "$T/refused"
	assert_status 2
	assert_output_has "-o watch: "
}

# names_in DIR N: DIR lists N names.
names_in() {
	local names
	names=$(ls "$1") || return 1
	[[ $(wc -l <<<"$names") -eq $2 ]]
}

# inotify drops events past its queue (IN_Q_OVERFLOW, 16,384 by default):
# the mount then forgets everything and watches the whole tree again. The
# daemon's testing aid SBFS_TEST_WATCH_PAUSE holds its reading while a file
# exists, so the queue overflows for sure.
@test "-o watch: a watch whose events overflowed forgets everything and goes on watching" {
	backend_watches_changes || skip "the ${SBFS_TEST_BACKEND:-} backend does not report changes"
	# relative to the workspace, wherever the watcher runs
	local pause=.sbfs-e2e-watch-pause
	SBFS_TEST_WATCH_PAUSE=$pause mount_sbfs -n overflow -o watch
	backend_behind true || skip "the suite cannot reach the ${SBFS_TEST_BACKEND:-} sandbox but through sbexec"
	mkdir "$MNT/d"
	ls "$MNT/d" >/dev/null
	sb true # the watch has settled: d is watched
	backend_behind "touch $pause"
	# three events a file (made, written, closed): past the queue
	backend_behind 'i=0; while [ $i -lt 6000 ]; do printf x >d/f$i; i=$((i + 1)); done; mkdir -p d/made/deeper'
	backend_behind "rm $pause"
	# The overflow comes after the events the queue held, each of which
	# the watch reports first (seconds under the sanitizers).
	poll 60 grep -q "inotify queue overflowed" "$T/overflow.log" ||
		fail "no overflow in the log: the test did not try what it is about"
	poll 10 names_in "$MNT/d" 6001 ||
		fail "after the overflow the mount lists $(ls "$MNT/d" | wc -l) of 6001 names"
	assert_eq "$(status_json | jq .watched)" true "sbfs status: watched after an overflow"
	ls "$MNT/d/made/deeper" >/dev/null
	backend_behind 'printf later >d/made/deeper/g'
	poll 3 test -e "$MNT/d/made/deeper/g" ||
		fail "a directory made while events were lost is not watched"
}

# mmap_vs_replace MOUNT: the host opens a 1 MiB file and maps it shared,
# the sandbox replaces the file (mv new f, the new one older), then the
# host writes 30 pages through the mapping and msyncs. The
# sandbox must end with one of the two files: its own new one (as a local
# disk: the mapping holds the replaced inode) or the host's whole one
# (last upload wins), never the host's pages on top of the new file's
# (issue 41, item 2). The helper waits for a barrier file: the order is
# forced, not timed.
mmap_vs_replace() {
	local m=$1 page=4096 pages=256
	sbexec -m "$m" sh -c 'head -c "$1" /dev/zero | tr "\0" A >f &&
		head -c "$1" /dev/zero | tr "\0" B >new && touch -t 200001010000 new' \
		sh $((page * pages))
	python3 - "$m/f" "$T/mapped" "$T/go" "$T/msync" <<'PY' &
import mmap, os, sys, time
path, mapped, go, result = sys.argv[1:]
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
page = mmap.PAGESIZE
open(mapped, "w").close()
while not os.path.exists(go):  # the test's barrier: the sandbox replaced f
    time.sleep(0.05)
# an error (EIO: the file was replaced under the mapping) is one of the
# outcomes; what the sandbox ends with is checked
r = []
def step(what, fn):
    try:
        fn()
    except OSError as e:
        r.append(what + ": " + os.strerror(e.errno))
def write():
    for i in range(30):
        m[i * page:(i + 1) * page] = b"H" * page
step("write", write)
step("msync", m.flush)
step("munmap", m.close)
step("close", lambda: os.close(fd))
with open(result, "w") as out:
    out.write(", ".join(r) or "no error")
PY
	local helper=$!
	poll 30 test -e "$T/mapped" || fail "the helper did not map f"
	sbexec -m "$m" mv new f
	touch "$T/go"
	wait "$helper" || fail "the mmap helper failed"
	sbfs sync "$m" >/dev/null 2>&1 || true
	local got sandbox_new host_whole
	got=$(sbexec -m "$m" md5sum f | cut -d' ' -f1)
	sandbox_new=$(head -c $((page * pages)) /dev/zero | tr '\0' B | md5sum | cut -d' ' -f1)
	host_whole=$({ head -c $((page * 30)) /dev/zero | tr '\0' H
		head -c $((page * (pages - 30))) /dev/zero | tr '\0' A; } | md5sum | cut -d' ' -f1)
	if [[ $got != "$sandbox_new" && $got != "$host_whole" ]]; then
		sbexec -m "$m" sh -c 'od -An -c f | uniq -c | head -5' >&2
		fail "the sandbox's f is neither its new file nor the host's whole one (host: $(cat "$T/msync"))"
	fi
	# and the mount shows what the sandbox has
	assert_eq "$(md5sum <"$m/f" | cut -d' ' -f1)" "$got" "f on the mount"
}

@test "a host mmap writer and a sandbox replace: the sandbox ends with one whole version, not a splice" {
	mmap_vs_replace "$MNT"
}

@test "a host mmap writer and a sandbox replace, write-back mode: one whole version, not a splice" {
	mount_sbfs -n wb -o "writeback"
	mmap_vs_replace "$T/wb"
}
