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
