#!/usr/bin/env bats
# POSIX conformance, the way sshfs's own suite checks it: act through the
# mount with single system calls (tests/tools/posixop prints each call's
# result or exact errno name), then look at the result from inside the
# sandbox with sbexec (stat, cat, od, ls as the sandbox's own tools see it).

load helpers

WS=/workspace

setup() {
	sbfs_setup
	mount_sbfs
	cd "$MNT"
}

teardown() {
	sbfs_teardown
}

# po_start ARGS...: run posixop in the background; every `wait` in ARGS
# pauses it until po_continue. Its output goes to $T/po.out.
po_start() {
	mkfifo "$T/po.go"
	po "$@" <"$T/po.go" >"$T/po.out" &
	PO_PID=$!
	exec 7>"$T/po.go"
}

# po_paused N: the background posixop has printed its Nth "wait".
po_paused() {
	(($(grep -cx wait "$T/po.out") >= $1))
}

po_continue() {
	echo go >&7
}

# po_finish: let it run to its end; its output in $PO_OUT.
po_finish() {
	exec 7>&-
	wait "$PO_PID" || fail "posixop exited $?" || return 1
	PO_OUT=$(grep -vx wait "$T/po.out")
}

# hex FILE: od's hex dump of a file on the host; sb_hex PATH: in the sandbox.
hex() { od -An -tx1 -v "$1" | tr -s ' \n' ' '; }
sb_hex() { sb od -An -tx1 -v "$1" | tr -s ' \n' ' '; }
hex_of() { printf "$1" | od -An -tx1 -v | tr -s ' \n' ' '; }

# sb_ls DIR: the sandbox's sorted listing of DIR, one name a line.
sb_ls() { sb ls -A "$1"; }

@test "rename over a file replaces it; a missing source is ENOENT" {
	printf 'new' >a
	printf 'old-longer' >b
	sb test -f "$WS/b" # b is in the sandbox before the rename
	expect_po "rename OK" rename a b -
	assert_eq "$(sb cat "$WS/b")" new "b in the sandbox"
	assert_eq "$(sb_ls "$WS")" b "sandbox listing"
	assert_eq "$(cat b)" new "b on the mount"
	expect_po "rename ENOENT" rename a c -
	assert_eq "$(sb_ls "$WS")" b "sandbox listing after a failed rename"
}

@test "rename of directories: over an empty one, ENOTEMPTY, EISDIR, ENOTDIR" {
	mkdir src empty full
	printf 'in src' >src/f
	printf 'keep' >full/g
	printf 'file' >plain
	expect_po "rename OK" rename src empty -
	assert_eq "$(sb cat "$WS/empty/f")" "in src" "moved contents in the sandbox"
	run sb test -e "$WS/src"
	assert_status 1
	expect_po "rename ENOTEMPTY" rename empty full -
	expect_po "rename EISDIR" rename plain full -
	expect_po "rename ENOTDIR" rename full plain -
	expect_po "rename EINVAL" rename full full/sub -
	# nothing moved in the sandbox
	assert_eq "$(sb_ls "$WS" | tr '\n' ' ')" "empty full plain " "sandbox listing"
	assert_eq "$(sb cat "$WS/full/g")" keep
	assert_eq "$(sb cat "$WS/empty/f")" "in src"
	assert_eq "$(sb cat "$WS/plain")" file
}

# Found by fsdiff (seeds 9, 10): a new file not yet closed is only in the
# mount's spool, so the sandbox's copy of its directory is empty and took
# the rename, and the file was lost at its close.
@test "rename of a directory over one holding a new file still open is ENOTEMPTY; the file is kept" {
	mkdir src dst
	expect_po "open OK
write OK 4
rename ENOTEMPTY
close OK" open 0 dst/new w,creat 644 write 0 kept rename src dst - close 0
	assert_eq "$(cat dst/new)" kept
	assert_eq "$(sb cat "$WS/dst/new")" kept
	[[ -d src ]] || fail "src is gone"
}

@test "rename RENAME_NOREPLACE: EEXIST over a file or a directory, OK to a new name" {
	printf 'one' >a
	printf 'two' >b
	mkdir d
	expect_po $'rename EEXIST\nrename EEXIST\nrename OK' \
		rename a b noreplace rename a d noreplace rename a c noreplace
	assert_eq "$(sb cat "$WS/b")" two "b untouched in the sandbox"
	assert_eq "$(sb cat "$WS/c")" one "c in the sandbox"
	assert_eq "$(sb_ls "$WS" | tr '\n' ' ')" "b c d " "sandbox listing"
}

@test "open-unlink: an open file keeps working after unlink (read, write, ftruncate) and is gone from the sandbox" {
	printf 'other' >keep
	po_start open 0 f rw,creat 644 write 0 hello-marker fsync 0 unlink f wait \
		pwrite 0 5 -more pread 0 17 0 fstat 0 write 0 !tail wait \
		pread 0 22 0 ftruncate 0 5 fstat 0 pread 0 22 0 ftruncate 0 8 pread 0 8 0 close 0
	poll 30 po_paused 1 || fail "posixop did not reach its first wait: $(cat "$T/po.out")"
	assert_eq "$(sb_ls "$WS")" keep "sandbox listing while f is open and unlinked"
	assert_eq "$(ls -A "$MNT")" keep "mount listing while f is open and unlinked"
	po_continue
	poll 30 po_paused 2 || fail "posixop did not reach its second wait: $(cat "$T/po.out")"
	# writes to the unlinked file never reach the sandbox
	run sb grep -rl -e marker -e more "$WS"
	assert_status 1
	po_continue
	po_finish
	assert_eq "$PO_OUT" "open OK
write OK 12
fsync OK
unlink OK
pwrite OK 5
pread OK hello-moreer
fstat OK 12
write OK 5
pread OK hello-moreer!tail
ftruncate OK
fstat OK 5
pread OK hello
ftruncate OK
pread OK hello\\x00\\x00\\x00
close OK" "calls on the open file"
	assert_eq "$(sb_ls "$WS")" keep "sandbox listing after close"
	run sb grep -rl -e marker -e more "$WS"
	assert_status 1
}

@test "truncate by path: shrink and grow, zero-filled, as the sandbox sees it" {
	printf '0123456789' >f
	expect_po "truncate OK" truncate f 4
	assert_eq "$(sb cat "$WS/f")" 0123 "after shrinking"
	expect_po "truncate OK" truncate f 8
	assert_eq "$(sb_hex "$WS/f")" "$(hex_of '0123\0\0\0\0')" "after growing"
	assert_eq "$(hex f)" "$(hex_of '0123\0\0\0\0')" "on the mount"
	expect_po "truncate OK" truncate f 0
	assert_eq "$(sb stat -c %s "$WS/f")" 0
	expect_po $'truncate ENOENT\ntruncate EISDIR\ntruncate EINVAL' \
		truncate missing 1 truncate . 1 truncate f -1
}

@test "truncate by fd: shrink and grow on an open file, seen in the sandbox while open" {
	po_start open 0 f rw,creat 644 write 0 abcdefgh ftruncate 0 3 fstat 0 wait \
		ftruncate 0 6 pwrite 0 6 XY fstat 0 wait close 0
	poll 30 po_paused 1 || fail "posixop did not reach its first wait: $(cat "$T/po.out")"
	assert_eq "$(sb cat "$WS/f")" abc "shrunk, file still open"
	po_continue
	poll 30 po_paused 2 || fail "posixop did not reach its second wait: $(cat "$T/po.out")"
	assert_eq "$(sb_hex "$WS/f")" "$(hex_of 'abc\0\0\0XY')" "grown and written, file still open"
	po_continue
	po_finish
	assert_eq "$PO_OUT" $'open OK\nwrite OK 8\nftruncate OK\nfstat OK 3\nftruncate OK\npwrite OK 2\nfstat OK 8\nclose OK'
	assert_eq "$(sb_hex "$WS/f")" "$(hex_of 'abc\0\0\0XY')" "after close"
	expect_po $'open OK\nftruncate EINVAL\nclose OK' open 1 f r 0 ftruncate 1 1 close 1
}

@test "O_APPEND from two descriptors: every write lands at the end" {
	printf 'start:' >log
	expect_po $'open OK\nopen OK\nwrite OK 2\nwrite OK 2\nwrite OK 2\npwrite OK 2\nclose OK\nclose OK' \
		open 0 log w,append 0 open 1 log w,append 0 write 0 aa write 1 bb write 0 cc \
		pwrite 1 0 dd close 0 close 1
	# Linux appends even for pwrite on an O_APPEND descriptor
	assert_eq "$(sb cat "$WS/log")" start:aabbccdd "in the sandbox"
	assert_eq "$(cat log)" start:aabbccdd "on the mount"
}

@test "lseek, read, pread and pwrite at offsets; holes read as zeros" {
	expect_po "open OK
write OK 10
lseek OK 2
read OK 234
lseek OK 8
read OK 89
read OK 
pwrite OK 2
pread OK 3XY6
lseek OK 20
write OK 3
fstat OK 23
pread OK 9\\x00\\x00\\x00\\x00
pread OK 
lseek EINVAL
close OK" open 0 f rw,creat 644 write 0 0123456789 lseek 0 2 set read 0 3 \
		lseek 0 -2 end read 0 5 read 0 5 pwrite 0 4 XY pread 0 4 3 \
		lseek 0 20 set write 0 END fstat 0 pread 0 5 9 pread 0 4 30 \
		lseek 0 -1 set close 0
	assert_eq "$(sb stat -c %s "$WS/f")" 23 "size in the sandbox"
	assert_eq "$(sb_hex "$WS/f")" "$(hex_of '0123XY6789\0\0\0\0\0\0\0\0\0\0END')" "bytes in the sandbox"
	# a hole of a MiB in the middle
	expect_po $'open OK\nlseek OK 1048576\nwrite OK 4\nclose OK' \
		open 0 g w,creat 644 lseek 0 1048576 set write 0 tail close 0
	assert_eq "$(sb stat -c %s "$WS/g")" 1048580 "size of the holey file in the sandbox"
	assert_eq "$(sb sh -c 'tr -d "\0" <"$1"' sh "$WS/g")" tail "only zeros before the tail"
}

@test "utimens: explicit times, UTIME_OMIT and UTIME_NOW, as the sandbox sees them" {
	printf 'pending data' >f # not yet in the sandbox: times must survive its upload
	mkdir d
	expect_po $'utimens OK\nutimens OK' utimens f 1000000000 1200000000.5 utimens d 1100000000 1100000001
	assert_eq "$(sb stat -c '%X %Y' "$WS/f")" "1000000000 1200000000" "atime mtime of f"
	assert_eq "$(sb stat -c '%X %Y' "$WS/d")" "1100000000 1100000001" "atime mtime of d"
	# the mount's atime is the sandbox's only where the backend's stat has it
	# (docker's archive stat and modal's listing carry the mtime alone)
	assert_eq "$(stat -c %Y f)" 1200000000 "mtime on the mount"
	expect_po "utimens OK" utimens f omit 1300000000
	assert_eq "$(sb stat -c '%X %Y' "$WS/f")" "1000000000 1300000000" "after UTIME_OMIT of atime"
	expect_po "utimens OK" utimens f 1400000000 omit
	assert_eq "$(sb stat -c '%X %Y' "$WS/f")" "1400000000 1300000000" "after UTIME_OMIT of mtime"
	before=$(sb date +%s)
	expect_po "utimens OK" utimens f omit now
	read -r at mt < <(sb stat -c '%X %Y' "$WS/f")
	assert_eq "$at" 1400000000 "atime kept by UTIME_OMIT"
	((mt >= before && mt <= before + 60)) || fail "UTIME_NOW mtime $mt, sandbox clock was $before"
	expect_po "utimens OK" utimens f now omit
	read -r at mt2 < <(sb stat -c '%X %Y' "$WS/f")
	assert_eq "$mt2" "$mt" "mtime kept by UTIME_OMIT"
	((at >= before && at <= before + 60)) || fail "UTIME_NOW atime $at, sandbox clock was $before"
	expect_po "utimens ENOENT" utimens missing now now
	assert_eq "$(sb cat "$WS/f")" "pending data" "content kept through the uploads"
}

@test "symlink and readlink: targets as given, EEXIST, EINVAL on a regular file" {
	printf 't' >target
	expect_po "symlink OK
symlink OK
symlink OK
readlink OK target
readlink OK no/such/thing
readlink OK sub/and back
symlink EEXIST
symlink EEXIST
readlink EINVAL
readlink ENOENT" symlink target l1 symlink no/such/thing l2 symlink 'sub/and back' l3 \
		readlink l1 readlink l2 readlink l3 symlink x l1 symlink x target readlink target readlink missing
	assert_eq "$(sb readlink "$WS/l1")" target
	assert_eq "$(sb readlink "$WS/l2")" no/such/thing
	assert_eq "$(sb readlink "$WS/l3")" "sub/and back"
	assert_eq "$(sb cat "$WS/l1")" t "followed in the sandbox"
	assert_eq "$(cat l1)" t "followed on the mount"
	assert_eq "$(sb cat "$WS/target")" t "target untouched by the failed symlink"
}

@test "errno values: EEXIST, ENOTEMPTY, ENOENT, ENOTDIR, EISDIR, ENAMETOOLONG" {
	mkdir d
	printf 'x' >d/f
	printf 'y' >file
	long=$(printf 'n%.0s' {1..256})
	expect_po "mkdir EEXIST
mkdir EEXIST
rmdir ENOTEMPTY
rmdir ENOTDIR
rmdir ENOENT
unlink ENOENT
unlink EISDIR
open EEXIST
open EEXIST
open ENOTDIR
mkdir ENOTDIR
stat ENOTDIR
unlink ENOTDIR
open ENOENT
open EISDIR
open ENOTDIR
open ENAMETOOLONG
mkdir ENAMETOOLONG
stat ENAMETOOLONG
rename ENAMETOOLONG" mkdir d 755 mkdir file 755 rmdir d rmdir file rmdir nodir \
		unlink nofile unlink d open 0 file w,creat,excl 644 open 0 d w,creat,excl 644 \
		open 0 file/x w,creat 644 mkdir file/x 755 stat file/x unlink file/x \
		open 0 nodir/x w,creat 644 open 0 d w 0 open 0 file r,directory 0 \
		open 0 "$long" w,creat 644 mkdir "$long" 755 stat "$long" rename file "$long" -
	# nothing changed in the sandbox
	assert_eq "$(sb sh -c 'cd "$1" && find . | sort' sh "$WS" | tr '\n' ' ')" ". ./d ./d/f ./file " "sandbox tree"
	assert_eq "$(sb cat "$WS/file")" y
	assert_eq "$(sb cat "$WS/d/f")" x
}

@test "chmod by path is visible in the sandbox, for files and directories" {
	printf 'x' >f
	mkdir d
	expect_po "chmod OK" chmod f 640
	assert_eq "$(sb stat -c %a "$WS/f")" 640
	expect_po "chmod OK" chmod f 755
	assert_eq "$(sb stat -c %a "$WS/f")" 755
	expect_po "chmod OK" chmod f 0
	assert_eq "$(sb stat -c %a "$WS/f")" 0
	expect_po "chmod OK" chmod d 711
	assert_eq "$(sb stat -c %a "$WS/d")" 711
	assert_eq "$(stat -c %a f) $(stat -c %a d)" "0 711" "on the mount"
	expect_po "chmod ENOENT" chmod missing 644
}

@test "link(): a hard link is one file with two names, never faked by a copy; a directory is EPERM" {
	printf 'data' >f
	mkdir d
	expect_po $'link OK\nlink EPERM' link f g link d e
	run ln f h
	assert_status 0
	assert_eq "$(sb_ls "$WS" | tr '\n' ' ')" "d f g h " "names in the sandbox"
	assert_eq "$(ls -A | tr '\n' ' ')" "d f g h " "names on the mount"
	assert_eq "$(sb stat -c %h "$WS/f")" 3 "link count in the sandbox"
	assert_eq "$(sb stat -c %i "$WS/g")" "$(sb stat -c %i "$WS/f")" "one inode, not a copy"
	assert_eq "$(stat -c %h f) $(stat -c %h g) $(stat -c %h h)" "3 3 3" "link counts on the mount"
}

# kind PATH: what lstat says PATH is ("regular empty file", "directory"),
# or the errno name when it fails.
kind() {
	local out
	out=$(stat -c %F -- "$1" 2>&1) && echo "$out" && return
	[[ $out == *"No such file"* ]] && echo ENOENT || echo "$out"
}

@test "after the kernel drops its caches, a renamed file or directory is found at once" {
	mkdir fresh # listed by the mount itself: its listing is complete
	cd fresh
	expect_po $'open OK\nclose OK\nrename OK' open 0 a w,creat 644 close 0 rename a b -
	drop_kernel_caches
	assert_eq "$(kind b)" "regular empty file" "file b after rename and cache drop"
	assert_eq "$(kind a)" ENOENT "old name a"
	expect_po $'mkdir OK\nrename OK' mkdir c 755 rename c d -
	drop_kernel_caches
	assert_eq "$(kind d)" directory "directory d after rename and cache drop"
	assert_eq "$(kind c)" ENOENT "old name c"
	expect_po $'mkdir OK\nmkdir OK\nrename OK' mkdir e 755 mkdir f 755 rename e f -
	drop_kernel_caches
	assert_eq "$(kind f)" directory "directory f after rename over an empty one"
	assert_eq "$(kind e)" ENOENT "old name e"
	assert_eq "$(sb_ls "$WS/fresh" | tr '\n' ' ')" "b d f " "sandbox listing"
}

@test "close and reopen with cache drops in between never loses the file" {
	mkdir fresh
	cd fresh
	local i want got data
	for ((i = 0; i < 30; i++)); do
		# Odd rounds leave the file empty: no spool is kept for it then,
		# so the node lives only as long as its attributes say.
		data=(pwrite 0 $((i % 7)) abc)
		want=$'open OK\npwrite OK 3\nclose OK\nrename OK'
		if ((i % 2)); then
			data=()
			want=$'open OK\nclose OK\nrename OK'
		fi
		got=$(po open 0 f w,creat,trunc 644 "${data[@]}" close 0 rename f g -)
		assert_eq "$got" "$want" "round $i: write, close, rename" || return 1
		drop_kernel_caches
		want=$'open OK\nclose OK\nrename OK'
		got=$(po open 0 g rw 0 close 0 rename g f -)
		assert_eq "$got" "$want" "round $i: reopen after a cache drop" || return 1
	done
	tally "close/reopen cycles with cache drops" "$i"
}

# ns_times PATH: mtime and ctime of PATH in nanoseconds.
ns_times() { stat -c '%.9Y %.9Z' -- "$1" | tr -d .; }

# clock_past NS: the (coarse) clock the kernel stamps files with has moved
# past NS, so a change made now gets a later time than one made then.
clock_past() { (($(date +%s%N) > $1 + 20000000)); }

# dir_times_follow DIR: create, unlink, rename, mkdir, rmdir and symlink in
# DIR each change DIR's mtime and ctime, seen through DIR at once.
dir_times_follow() {
	local dir=$1 step m0 c0 m1 c1 said
	local steps=("open 0 $dir/a w,creat 644 close 0" "rename $dir/a $dir/b -"
		     "unlink $dir/b" "mkdir $dir/d 755" "rename $dir/d $dir/e -"
		     "rmdir $dir/e" "symlink x $dir/s" "unlink $dir/s")
	for step in "${steps[@]}"; do
		read -r m0 c0 < <(ns_times "$dir")
		poll 10 clock_past "$((m0 > c0 ? m0 : c0))" || fail "clock stuck" || return 1
		# shellcheck disable=SC2086 # the step is a posixop argument list
		said=$(po $step | tr '\n' ' ')
		read -r m1 c1 < <(ns_times "$dir")
		((m1 > m0)) || fail "$dir: mtime unchanged by: $step (posixop: $said; $m0 -> $m1)" || return 1
		((c1 > c0)) || fail "$dir: ctime unchanged by: $step (posixop: $said; $c0 -> $c1)" || return 1
	done
}

@test "a directory's mtime and ctime follow creates, removes and renames in it" {
	mkdir "$T/local" d
	dir_times_follow "$T/local" # the reference: a local directory
	dir_times_follow d
	tally "parent time changes checked" 16
}

@test "write-back: a directory's mtime and ctime follow creates, removes and renames in it" {
	mount_sbfs -n wb -o writeback
	cd "$MNT"
	mkdir "$T/local" d
	dir_times_follow "$T/local"
	dir_times_follow d
}

@test "fstat of an open file that was unlinked gives nlink 0" {
	expect_po $'open OK\nfnlink OK 1\nunlink OK\nfnlink OK 0\nclose OK' \
		open 0 new w,creat 644 fnlink 0 unlink new fnlink 0 close 0
	printf 'data' >old
	sb test -f "$WS/old"
	expect_po $'open OK\nunlink OK\nfnlink OK 0\nread OK data\nclose OK' \
		open 0 old r 0 unlink old fnlink 0 read 0 4 close 0
	printf 'data' >over
	printf 'new' >src
	expect_po $'open OK\nrename OK\nfnlink OK 0\nclose OK' \
		open 0 over r 0 rename src over - fnlink 0 close 0
}

@test "rename of paths near PATH_MAX works where the sandbox allows it" {
	local name i deep="" last
	name=$(printf 'n%.0s' {1..255})
	for ((i = 0; i < 15; i++)); do deep+=$name/; done
	# The last level makes "$WS/$deep/bb" 4095 bytes: PATH_MAX with its NUL.
	last=$(printf 'm%.0s' $(seq $((4095 - ${#WS} - 1 - ${#deep} - 3))))
	deep+=$last
	assert_eq "$((${#WS} + 1 + ${#deep} + 3))" 4095 "longest path" || return 1
	sb sh -c 'mkdir -p "$1" && : >"$1/pp" && mv "$1/pp" "$1/qq" && rm -r "$2"' \
		sh "$WS/$deep" "$WS/$name" ||
		skip "the sandbox's own file system refuses a 4095-byte path"
	mkdir -p "$deep"
	printf 'deep' >"$deep/a"
	expect_po "rename OK" rename "$deep/a" "$deep/bb" -
	assert_eq "$(sb cat "$WS/$deep/bb")" deep "renamed file in the sandbox"
	expect_po "rename OK" rename "$deep" "${deep%/*}/m" -
	sb test -f "$WS/${deep%/*}/m/bb" || fail "renamed directory not in the sandbox"
	assert_eq "$(cat "${deep%/*}/m/bb")" deep "through the mount"
	expect_po "rename OK" rename "${deep%/*}/m" "$deep" -
	expect_po "rename OK" rename "$deep/bb" "$deep/cc" -
	assert_eq "$(sb cat "$WS/$deep/cc")" deep "renamed back in the sandbox"
}

@test "truncate changes ctime, as the sandbox sees it" {
	printf 'some data' >f
	sb test -f "$WS/f"
	local c0 c1 step
	for step in "truncate f 4" "open 0 f rw 0 ftruncate 0 2 close 0" "truncate f 2"; do
		c0=$(sb stat -c %Z "$WS/f") # whole seconds: what every stat(1) gives
		poll 10 clock_past "$(((c0 + 1) * 1000000000))" || fail "clock stuck"
		# shellcheck disable=SC2086 # the step is a posixop argument list
		po $step >/dev/null
		c1=$(sb stat -c %Z "$WS/f")
		((c1 > c0)) || fail "sandbox ctime unchanged by $step: $c0 -> $c1" || return 1
		sbfs refresh "$MNT" >/dev/null
		c1=$(stat -c %Z f)
		((c1 > c0)) || fail "mount ctime unchanged by $step: $c0 -> $c1" || return 1
	done
	assert_eq "$(sb cat "$WS/f")" so "content after both truncates"
}
