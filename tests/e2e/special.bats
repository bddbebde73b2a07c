#!/usr/bin/env bats
# Things that are not plain files: FIFOs (with and without a writer that
# never stops), huge sparse files, symlinks shown as they are, loops.
# Reads must return promptly with bounded data or an error and never hang
# the mount. The `timeout`s below are hang guards, not timing assertions.

load helpers

WS=/workspace

# setup and teardown: the usual ones, from helpers.bash (a writer we
# started in the sandbox must not keep anything busy)

# mount_still_answers: the mount and the sandbox still work.
mount_still_answers() {
	run timeout 20 ls -A "$MNT"
	assert_status 0
	echo ok >"$MNT/after"
	run timeout 20 sbexec -m "$MNT" cat "$WS/after"
	assert_status 0
	assert_eq "$output" ok
}

@test "FIFO made in the sandbox: reading it on the mount returns promptly" {
	sb mkfifo "$WS/f"
	run timeout 10 cat "$MNT/f"
	[ "$status" -ne 124 ] || fail "cat of a FIFO on the mount hung"
	[ "${#output}" -lt 1048576 ]
	mount_still_answers
}

@test "FIFO with a writer that never stops: bounded data or an error" {
	sb sh -c 'mkfifo /workspace/y; (yes > /workspace/y 2>/dev/null &) >/dev/null 2>&1 </dev/null'
	run bash -c 'timeout 20 cat "$1" | head -c 268435456 | wc -c; exit "${PIPESTATUS[0]}"' _ "$MNT/y"
	[ "$status" -ne 124 ] || fail "cat of a FIFO fed by yes hung"
	n=${output##*$'\n'}
	((n < 268435456)) || fail "read $n bytes from a FIFO fed by yes: not bounded"
	mount_still_answers
}

@test "ls -l of a directory holding a FIFO works; the FIFO is listed" {
	# (it may be shown as a FIFO or as an empty regular file: a FIFO node
	# on a FUSE mount would be opened as a host-side pipe)
	sb mkfifo "$WS/p"
	run timeout 20 ls -l "$MNT"
	assert_status 0
	grep -q ' p$' <<<"$output" || fail "no FIFO line in: $output"
}

@test "1 GiB sparse file: size is right, reading a window at its end is bounded" {
	sb truncate -s 1G "$WS/big"
	assert_eq "$(stat -c %s "$MNT/big")" 1073741824
	run timeout 60 bash -c 'tail -c 16 "$1" | od -An -tx1 | tr -d " \n"' _ "$MNT/big"
	assert_status 0
	assert_eq "$output" 00000000000000000000000000000000
	timeout 60 dd if="$MNT/big" bs=1M skip=512 count=1 status=none | cmp - <(head -c 1048576 /dev/zero)
	mount_still_answers
}

@test "symlinks out of the mount are listed as links, never resolved on the host" {
	sb ln -s /etc/shadow-sbfs-nope "$WS/abs"
	sb ln -s ../../../../escape "$WS/rel"
	sb ln -s "$WS/../../x" "$WS/dots"
	for l in abs rel dots; do
		assert_eq "$(stat -c %F "$MNT/$l")" "symbolic link"
		run readlink "$MNT/$l"
		[ "$status" -ne 0 ] || fail "readlink $l gave '$output'"
	done
	run ls -l "$MNT/rel"
	assert_output_has "Operation not permitted"
}

@test "symlink to a directory inside the workspace resolves through the mount" {
	sb sh -c 'mkdir /workspace/real && echo x > /workspace/real/f && ln -s real /workspace/alias'
	assert_eq "$(cat "$MNT/alias/f")" x
	assert_eq "$(readlink "$MNT/alias")" real
}

@test "symlink loop: ELOOP, no hang" {
	sb ln -s loop "$WS/loop"
	assert_eq "$(readlink "$MNT/loop")" loop
	run timeout 20 cat "$MNT/loop"
	[ "$status" -ne 124 ]
	[ "$status" -ne 0 ]
	assert_output_has "Too many levels of symbolic links"
}

@test "dangling symlink: lstat works, reading is ENOENT" {
	sb ln -s does-not-exist "$WS/dangling"
	assert_eq "$(stat -c %F "$MNT/dangling")" "symbolic link"
	run cat "$MNT/dangling"
	[ "$status" -ne 0 ]
	assert_output_has "No such file or directory"
}

@test "a file that is not readable in the sandbox gives an error, not a hang" {
	echo secret >"$MNT/locked"
	chmod 000 "$MNT/locked"
	# root in the sandbox may still read it; then it reads fine. Either
	# way it must return.
	run timeout 20 cat "$MNT/locked"
	[ "$status" -ne 124 ]
	chmod 644 "$MNT/locked"
	assert_eq "$(cat "$MNT/locked")" secret
}
