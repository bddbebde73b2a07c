#!/usr/bin/env bats
# Ownership and hard links through a real mount (issue 18, items 7, 8, 13):
# chown/lchown reach the sandbox and show in stat on both sides, -o idmap
# decides how ids show, link() gives one file two names with the right
# link counts, and a root daemon's local sandbox lives in an unprivileged
# host id range. Calls go through tests/tools/posixop for exact errnos.

load helpers

WS=/workspace

setup() {
	sbfs_setup
}

teardown() {
	[[ -f ${T:-/nonexistent}/opt-dir ]] && rm -rf -- "$(cat "$T/opt-dir")"
	sbfs_teardown
}

# owner_on_mount PATH / owner_in_sandbox PATH: "UID GID" of PATH itself.
owner_on_mount() { stat -c '%u %g' -- "$MNT/$1"; }
owner_in_sandbox() { sb stat -c '%u %g' -- "$WS/$1"; }
links_on_mount() { stat -c '%h' -- "$MNT/$1"; }
links_in_sandbox() { sb stat -c '%h' -- "$WS/$1"; }

need_root() {
	[[ $(id -u) == 0 ]] || skip "chown to other ids needs a root sbfs (CI runs the suite as root)"
}

@test "chown and lchown: the new owner shows on the mount and in the sandbox" {
	need_root
	mount_sbfs
	cd "$MNT"
	echo data >f
	ln -s f l
	expect_po "chown OK
lchown OK" chown f 1234 2345 lchown l 77 88
	assert_eq "$(owner_on_mount f)" "1234 2345" "f on the mount"
	assert_eq "$(owner_in_sandbox f)" "1234 2345" "f in the sandbox"
	# lchown changed the link, not its target
	assert_eq "$(owner_on_mount l)" "77 88" "l on the mount"
	assert_eq "$(owner_in_sandbox l)" "77 88" "l in the sandbox"
	# one id at a time: -1 leaves the other
	expect_po "chown OK" chown f -1 3456
	assert_eq "$(owner_in_sandbox f)" "1234 3456" "gid only"
	expect_po "chown OK" chown f 0 0
	assert_eq "$(owner_in_sandbox f)" "0 0" "to root, in the sandbox"
	# what the sandbox says when asked again, not what we remembered
	drop_kernel_caches
	sbfs refresh "$MNT" >/dev/null
	assert_eq "$(owner_on_mount l)" "77 88" "l after a refresh"
	assert_eq "$(owner_on_mount f)" "0 0" "f after a refresh"
	# content untouched
	assert_eq "$(sb cat "$WS/f")" data
}

# docker's stat (the engine's archive HEAD) tells no owner: the one a
# listing or the mount's own chown told must stay, not turn into the
# container user's when the attributes expire (issue 41 item 11: the
# container said 123 456, the mount 0 0, even after a refresh).
@test "an owner the mount set or the sandbox changed stays shown when the attributes are asked again" {
	need_root
	mount_sbfs -o attr_timeout=0.2,dir_timeout=0.2
	cd "$MNT"
	echo data >f
	echo data >g
	expect_po "chown OK" chown f 123 456
	sleep 0.5 # expired: the next stat asks the sandbox
	assert_eq "$(owner_on_mount f)" "123 456" "f, its attributes asked again"
	drop_kernel_caches
	sbfs refresh "$MNT" >/dev/null
	assert_eq "$(owner_on_mount f)" "123 456" "f after a refresh"
	# made inside: a stat alone tells it (the command's end made the
	# mount ask again), and a listing
	sb chown 321:654 "$WS/g"
	assert_eq "$(owner_on_mount g)" "321 654" "g, stat alone after the command"
	ls -ln >/dev/null
	sleep 0.5
	assert_eq "$(owner_on_mount g)" "321 654" "g, its attributes asked again"
	assert_eq "$(owner_in_sandbox f)" "123 456" "f in the sandbox"
}

@test "chown of a file still being written reaches the sandbox with its data" {
	need_root
	mount_sbfs
	cd "$MNT"
	expect_po "open OK
write OK 5
chown OK
close OK" open 0 w w,creat 644 write 0 hello chown w 4321 4321 close 0
	assert_eq "$(owner_in_sandbox w)" "4321 4321"
	assert_eq "$(sb cat "$WS/w")" hello
}

@test "a chown of a file still being written to your own ids (cp -p as root) costs no call, and the file is the sandbox user's" {
	need_root
	mount_sbfs
	cd "$MNT"
	local me guest c0
	me="$(id -u) $(id -g)"
	guest=$(sb sh -c 'echo "$(id -u) $(id -g)"')
	c0=$(calls chown)
	expect_po "open OK
write OK 5
chown OK
close OK" open 0 w w,creat 644 write 0 hello chown w "$(id -u)" "$(id -g)" close 0
	assert_eq "$(owner_on_mount w)" "$me" "w on the mount"
	sbfs sync "$MNT" # write-back: the upload lands
	assert_eq "$(calls chown)" "$c0" "chown calls"
	assert_eq "$(owner_in_sandbox w)" "$guest" "w in the sandbox"
	assert_eq "$(sb cat "$WS/w")" hello
}

@test "idmap=user (default): the sandbox's user shows as you, and a chown to you is a chown to it" {
	need_root
	mount_sbfs
	cd "$MNT"
	local me guest
	me="$(id -u) $(id -g)"
	guest=$(sb sh -c 'echo "$(id -u) $(id -g)"')
	sb sh -c 'echo x >"$1"' sh "$WS/made-inside"
	echo y >made-here
	assert_eq "$(owner_on_mount made-inside)" "$me" "sandbox-made file on the mount"
	assert_eq "$(owner_on_mount made-here)" "$me" "mount-made file on the mount"
	assert_eq "$(owner_in_sandbox made-here)" "$guest" "mount-made file in the sandbox"
	# other ids show as they are
	expect_po "chown OK" chown made-here 1234 2345
	assert_eq "$(owner_on_mount made-here)" "1234 2345"
	# back to the mounting user: the sandbox's user again
	expect_po "chown OK" chown made-here "$(id -u)" "$(id -g)"
	assert_eq "$(owner_in_sandbox made-here)" "$guest" "chown to you, in the sandbox"
	assert_eq "$(owner_on_mount made-here)" "$me" "chown to you, on the mount"
}

@test "idmap=none: every id shows as the sandbox has it" {
	need_root
	mount_sbfs -o idmap=none
	cd "$MNT"
	sb sh -c 'echo x >"$1"' sh "$WS/made-inside"
	echo y >made-here
	assert_eq "$(owner_on_mount made-inside)" "$(owner_in_sandbox made-inside)"
	assert_eq "$(owner_on_mount made-here)" "$(owner_in_sandbox made-here)"
	expect_po "chown OK" chown made-here 1234 2345
	assert_eq "$(owner_on_mount made-here)" "1234 2345"
	assert_eq "$(owner_in_sandbox made-here)" "1234 2345"
}

@test "idmap takes user or none" {
	run sbfs -o "$(sbfs_opts bad idmap=sometimes)" "$T/bad"
	[ "$status" -ne 0 ] || fail "-o idmap=sometimes was accepted"
	assert_output_has "-o idmap takes 'user' or 'none', not 'sometimes'"
}

# link_counts [MOUNT_OPTS]: three names of one file, then two, then one.
link_counts() {
	backend_stat_has_nlink || skip "this backend's native stat and listing carry no link count (README: Known limits)"
	mount_sbfs ${1:+-o "$1"}
	cd "$MNT"
	echo one >a
	stat a >/dev/null # cache a's attributes: link must update them
	mkdir d
	expect_po "link OK
link OK" link a b link a d/c
	assert_eq "$(links_on_mount a)" 3 "a on the mount"
	assert_eq "$(links_on_mount b)" 3 "b on the mount"
	assert_eq "$(links_on_mount d/c)" 3 "d/c on the mount (across directories)"
	assert_eq "$(links_in_sandbox a)" 3 "a in the sandbox"
	assert_eq "$(sb stat -c %i "$WS/a")" "$(sb stat -c %i "$WS/d/c")" "one inode in the sandbox"
	assert_eq "$(cat b)" one
	# a change through the sandbox shows through every name
	sb sh -c 'echo two >>"$1"' sh "$WS/a"
	sbfs refresh "$MNT" >/dev/null
	assert_eq "$(cat d/c)" "one
two"
	local ctime_before
	ctime_before=$(stat -c %.9Z a)
	sleep 1.1 # past the second: a backend's stat may tell whole seconds
	# a link right after the unlink: its count must not count b
	# (write-back may still have b's remove queued)
	expect_po "unlink OK
link OK" unlink b link a e
	assert_eq "$(links_on_mount a)" 3 "a after unlinking b and linking e"
	assert_eq "$(links_on_mount e)" 3 "e"
	assert_eq "$(links_in_sandbox e)" 3 "e in the sandbox"
	python3 -c 'import sys; sys.exit(0 if float(sys.argv[2]) > float(sys.argv[1]) else "a'"'"'s ctime did not move with the unlink of b")' \
		"$ctime_before" "$(stat -c %.9Z a)"
	expect_po "unlink OK" unlink e
	assert_eq "$(links_on_mount a)" 2 "a after unlinking b and e"
	assert_eq "$(links_on_mount d/c)" 2 "d/c after unlinking b and e"
	# a rename over one name: the others lose a link, as with an unlink
	echo other >f
	expect_po "link OK
rename OK" link a g rename f g -
	assert_eq "$(links_on_mount a)" 2 "a after a rename over its name g"
	assert_eq "$(links_on_mount d/c)" 2 "d/c after a rename over g"
	assert_eq "$(links_on_mount g)" 1 "g, the renamed file"
	assert_eq "$(links_in_sandbox a)" 2 "a in the sandbox after the rename over g"
	assert_eq "$(cat g)" other
	expect_po "unlink OK" unlink d/c
	assert_eq "$(links_on_mount a)" 1 "a after unlinking d/c"
	assert_eq "$(links_in_sandbox a)" 1 "a in the sandbox"
	drop_kernel_caches
	assert_eq "$(links_on_mount a)" 1 "a after a cache drop"
}

@test "link: both names show nlink 2 and one content; unlink of one leaves 1" {
	link_counts
}

# Every stat asks the sandbox: a remove that write-back had only queued
# would still be counted there.
@test "link: the counts hold when every stat asks the sandbox" {
	link_counts attr_timeout=0
}

@test "link: a write through one name is read through the other" {
	backend_upload_keeps_inode || skip "this backend's native upload replaces the file, which splits a hard link (README: Known limits)"
	mount_sbfs
	cd "$MNT"
	echo old >a
	expect_po "link OK" link a b
	echo new >a
	assert_eq "$(sb cat "$WS/b")" new "b in the sandbox"
	assert_eq "$(links_in_sandbox b)" 2 "the write kept the link"
}

# Found by fsdiff (seeds 4, 7, 9, 10): what one name of a hard-linked
# file showed after a write, a rename or an unlink through another.
@test "link: a write through one name shows through the other at once, size, content and count" {
	backend_upload_keeps_inode || skip "this backend's native upload replaces the file, which splits a hard link (README: Known limits)"
	mount_sbfs
	cd "$MNT"
	echo one >a
	cat a >/dev/null # a's spool is kept as a read cache
	expect_po "link OK" link a b
	stat a b >/dev/null # both names' attributes are cached
	echo two >b # the same size as before
	assert_eq "$(cat a)" two "a after a write of the same size through b"
	echo longer >b
	assert_eq "$(stat -c %s a)" 7 "a's size after a write through b"
	assert_eq "$(cat a)" longer
	backend_stat_has_nlink || return 0
	# an open, written name keeps counting the links of the others
	expect_po "open OK
write OK 3
fnlink OK 2
unlink OK
fnlink OK 1
close OK" open 0 a w,trunc 0 write 0 new fnlink 0 unlink b fnlink 0 close 0
	assert_eq "$(links_on_mount a)" 1 "a after unlinking b"
}

# Where the sandbox's stat tells no inode nor count (docker, modal, e2b),
# the mount keeps the counts its own calls made: every name of the file
# follows them, on every backend alike.
@test "link: an unlink or a rename over one name lowers the other's count, and renaming one onto the other does nothing" {
	mount_sbfs
	cd "$MNT"
	echo one >a
	ln a b
	assert_eq "$(links_on_mount a) $(links_on_mount b)" "2 2" "a and b after ln"
	echo other >x
	mv x b
	assert_eq "$(links_on_mount a)" 1 "a after a rename over b"
	assert_eq "$(cat b)" other
	ln a c
	expect_po "rename OK" rename a c - # two names of one file: nothing happens
	assert_eq "$(cat a) $(cat c)" "one one" "a and c after mv a c"
	assert_eq "$(links_on_mount c)" 2 "c after mv a c"
	rm c
	assert_eq "$(links_on_mount a)" 1 "a after rm c"
	assert_eq "$(sb cat a)" one "a in the sandbox"
	[[ $(sb cat c 2>&1) != one ]] || fail "c is still in the sandbox"
}

# While a file has two names, each name's attributes are asked at every
# stat; once one is left they are cached again, so what went through the
# other name must not be left out of them (fsdiff: size 0 shown for a
# file truncated to 4594 through the name since removed).
# (nowatch: a watch's report of the change would hide it)
@test "link: a truncate or chmod through one name, that name then removed: the other shows it" {
	mount_sbfs -o nowatch
	cd "$MNT"
	printf 'some data\n' >a
	ln a b
	stat b >/dev/null
	expect_po "truncate OK
chmod OK
unlink OK" truncate a 4 chmod a 600 unlink a
	assert_eq "$(stat -c '%s %a %h' b)" "4 600 1" "b after the truncate and chmod through a, and rm a"
	assert_eq "$(cat b)" some
}

@test "link: rename of a name over another link of the same file does nothing" {
	# which names are one file, only a stat with inodes and link counts tells
	backend_stat_has_nlink || skip "this backend's native stat and listing carry no link count nor inode (README: Known limits)"
	mount_sbfs
	cd "$MNT"
	echo one >a
	expect_po "link OK
rename OK" link a b rename a b -
	assert_eq "$(cat a)" one "a after rename(a, b)"
	assert_eq "$(cat b)" one "b after rename(a, b)"
	assert_eq "$(sb cat "$WS/a")" one "a in the sandbox"
	assert_eq "$(links_on_mount a)" 2
	assert_eq "$(links_on_mount b)" 2
}

# The kernel holds each name of a linked file as its own inode, so it
# takes a rename of one onto another for a move: it moves its entry for
# the first name over the second. Both must still name the file after,
# and a name then put over the first must not take the second with it
# (fsdiff seed 2: the second name answered ENOENT, nlink 0).
@test "link: after a rename of one name onto another of the same file, both still name it" {
	mount_sbfs
	cd "$MNT"
	echo one >a
	stat a >/dev/null # the kernel holds a's entry
	expect_po "link OK
rename OK
open OK
write OK 5
close OK
rename OK
link OK" link a b rename b a - open 0 x w,creat 644 write 0 other close 0 rename x b - link a c
	assert_eq "$(cat a) $(cat b) $(cat c)" "one other one"
	assert_eq "$(links_on_mount a) $(links_on_mount b) $(links_on_mount c)" "2 1 2"
	assert_eq "$(sb cat "$WS/c")" one "c in the sandbox"
}

@test "link: a file not uploaded yet is linked with its data" {
	mount_sbfs
	cd "$MNT"
	expect_po "open OK
write OK 5
link OK
close OK" open 0 n w,creat 644 write 0 fresh link n m close 0
	assert_eq "$(sb cat "$WS/m")" fresh
	assert_eq "$(links_in_sandbox n)" 2
}

# git writes each object under a temporary name, links it to its final
# one and removes the first: the final name starts from the content the
# mount wrote (fs_link), and that copy must never hide a later change.
@test "link: the new name reads what the mount wrote without a fetch, and the sandbox's later changes" {
	mount_sbfs
	cd "$MNT"
	printf 'first version\n' >tmp_obj
	expect_po "link OK" link tmp_obj obj
	rm tmp_obj
	r0=$(calls read)
	assert_eq "$(cat obj)" "first version" "obj after the link and the unlink"
	if backend_upload_keeps_mtime; then
		assert_eq "$(calls read)" "$r0" "read calls for what the mount wrote"
	fi
	sb sh -c 'printf "other version\n" >"$1"' sh "$WS/obj" # the same size
	assert_eq "$(cat obj)" "other version" "obj after the sandbox rewrote it"
	backend_upload_keeps_inode || return 0
	expect_po "link OK" link obj obj2
	printf 'third version\n' >obj
	assert_eq "$(cat obj2)" "third version" "obj2 after a write of the same size through obj"
}

@test "link: EPERM for a directory, EEXIST onto a name, ENOENT without a source" {
	mount_sbfs
	cd "$MNT"
	mkdir dir
	echo x >f
	echo y >g
	ln -s f sym
	expect_po "link EPERM
link EEXIST
link EEXIST
link ENOENT
link ENOENT
link OK" link dir dir2 link f g link f dir link missing z link f nodir/z link sym hsym
	assert_eq "$(sb cat "$WS/g")" y "g untouched"
	[[ ! -e dir2 ]] || fail "dir2 exists"
	# a link to a symlink is to the symlink itself
	assert_eq "$(sb readlink "$WS/hsym")" f
}

@test "local as root: the sandbox's ids are an unprivileged host range" {
	require_backend local
	[[ $(id -u) == 0 ]] || skip "only a root daemon maps the sandbox's ids"
	# a root-only directory on a path the sandbox sees (/opt is bound)
	local secret
	secret=$(mktemp -d /opt/sbfs-test-XXXXXX)
	echo "$secret" >"$T/opt-dir"
	chmod 0755 "$secret"
	mkdir -m 0711 "$secret/secret"
	echo host-only >"$secret/secret/file"
	chmod 0600 "$secret/secret/file"
	mount_sbfs
	cd "$MNT"
	run sb ls "$secret/secret"
	[ "$status" -ne 0 ] || fail "the sandbox listed a root-only 0711 directory: $output"
	run sb cat "$secret/secret/file"
	[ "$status" -ne 0 ] || fail "the sandbox read a root-only 0600 file: $output"
	[[ $output != *host-only* ]] || fail "host-only data shown"
	assert_eq "$(sb id -u)" 0 "the sandbox runs as its root"
	local host_uid ws
	host_uid=$(awk '$1 == 0 { print $2 }' < <(sb cat /proc/self/uid_map))
	((host_uid >= 1000)) || fail "sandbox root is host uid $host_uid"
	ws=$T/root/$SBFS_SANDBOX
	[[ -d $ws ]] || fail "no host workspace at $ws"
	# written through the mount and through sbexec: the sandbox's root owns
	# both, host side as the mapped id, inside as 0, on the mount as you
	echo via-mount >m
	sb sh -c 'echo via-sbexec >"$1"' sh "$WS/s"
	mkdir -p deep/er
	echo x >deep/er/f
	local f
	for f in m s deep deep/er deep/er/f; do
		assert_eq "$(stat -c '%u %g' "$ws/$f")" "$host_uid $host_uid" "host owner of $f"
		assert_eq "$(owner_in_sandbox "$f")" "0 0" "sandbox owner of $f"
		assert_eq "$(owner_on_mount "$f")" "$(id -u) $(id -g)" "mount owner of $f"
	done
	# chown in the sandbox's ids lands as the mapped host ids
	expect_po "chown OK" chown m 1000 1000
	assert_eq "$(stat -c '%u %g' "$ws/m")" "$((host_uid + 1000)) $((host_uid + 1000))"
	assert_eq "$(owner_in_sandbox m)" "1000 1000"
}

@test "link and chown failing once with a transient error are retried" {
	mount_sbfs -o "inject_faults=transient:link:1+transient:chown:1"
	cd "$MNT"
	echo x >a
	expect_po "link OK" link a b
	assert_eq "$(links_in_sandbox b)" 2
	expect_po "chown OK" chown a "$(id -u)" "$(id -g)"
	assert_eq "$(status_json | jq -r '.retries')" 2 "retries counted"
	assert_eq "$(status_json | jq -r '.calls.link')" 2 "link attempts"
}
