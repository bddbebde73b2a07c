#!/usr/bin/env bats
# The spool (open files, read caches, write-back's journal) is on the host's
# disk, which fills: here a 4 MiB file system of its own. What only caches
# held gives way to what the user writes and reads; what does not fit fails
# with ENOSPC, as on a local disk, and nothing accepted is lost.

load helpers

setup() {
	sbfs_setup
	SPOOL=$(mktemp -d "${TMPDIR:-/tmp}/sbfs-spool.XXXXXX")
	mount -t tmpfs -o size=4m sbfs-test-spool "$SPOOL" ||
		skip "cannot mount a tmpfs for the spool (needs root)"
	mount_sbfs -o "spool_dir=$SPOOL"
}

teardown() {
	sbfs_teardown
	! mountpoint -q "$SPOOL" || umount -l "$SPOOL"
	rm -rf "$SPOOL"
}

# Before: a removed file's copy, kept as a read cache, held its room until
# the cache's budget (512 MiB) pushed it out, so the next write failed.
@test "a full spool: a removed file's copy frees its room, read caches give way to writes, a write that cannot fit fails with ENOSPC and loses nothing accepted" {
	head -c 3000000 /dev/urandom >"$T/a"
	head -c 3000000 /dev/urandom >"$T/b"
	head -c 1500000 /dev/urandom >"$T/c"
	cp "$T/a" "$MNT/a"
	cmp "$T/a" "$MNT/a"
	rm "$MNT/a"
	cp "$T/b" "$MNT/b" || fail "no room for b: the removed a still holds the spool"
	sbfs sync "$MNT"
	cmp "$T/b" "$MNT/b" # b's copy stays as a read cache: 3 of 4 MiB
	cp "$T/c" "$MNT/c" || fail "no room for c: b's read cache did not give way"
	run sh -c 'head -c 6000000 /dev/urandom >"$1"' sh "$MNT/d"
	[[ $status -ne 0 ]] || fail "6 MB fitted in a 4 MiB spool"
	assert_output_has "No space left on device"
	sbfs sync "$MNT" || fail "sync failed after the write that did not fit"
	sb cat b | cmp - "$T/b"
	sb cat c | cmp - "$T/c"
}

# Before: every read failed with ENOSPC once the fetched part filled the
# spool, so a file bigger than its room could not be read at all.
@test "files two and four times bigger than the spool's room read whole, one after the other and at once" {
	sb sh -c 'head -c 17000000 /dev/urandom >big && head -c 9000000 /dev/urandom >mid'
	want=$(sb sha256sum big mid)
	got=$(cd "$MNT" && sha256sum big mid)
	assert_eq "$got" "$want" "read one after the other"
	drop_kernel_caches # the second reads come from the sandbox again
	(cd "$MNT" && sha256sum big >"$T/big.sum") &
	(cd "$MNT" && sha256sum mid >"$T/mid.sum")
	wait $!
	assert_eq "$(cat "$T/big.sum" "$T/mid.sum")" "$want" "read at once"
}
