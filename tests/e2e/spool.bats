#!/usr/bin/env bats
# The spool (open files, read caches, write-back's journal) is on the host's
# disk, which fills: here a 4 MiB file system of its own. What only caches
# held gives way to what the user writes and reads; what does not fit fails
# with ENOSPC, as on a local disk, and nothing accepted is lost.

load helpers

setup() {
	sbfs_setup
	# in the suite's own folder: a run cut short (its cap, a kill) leaves
	# no tmpfs behind, tests/run's exit unmounts what is left there
	SPOOL=$(mktemp -d "${SBFS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/sbfs-spool.XXXXXX")
	mount -t tmpfs -o size=4m sbfs-test-spool "$SPOOL" ||
		skip "cannot mount a tmpfs for the spool (needs root)"
	mount_sbfs -o "spool_dir=$SPOOL"
}

# The readers of the writers' test, held open in the test's own shell.
close_readers() {
	[[ -z ${READER_BIG:-} ]] || exec {READER_BIG}<&-
	[[ -z ${READER_MID:-} ]] || exec {READER_MID}<&-
	READER_BIG= READER_MID=
}

teardown() {
	close_readers
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

# Before: what two open readers had fetched filled the spool, and only a
# read made it give way: writes that would fit failed with ENOSPC (issue
# 41 item 6: two 25 MiB writers beside two readers of 100 MB files).
@test "writers that fit beside two readers holding the spool's room write whole; the readers still read whole" {
	sb sh -c 'head -c 17000000 /dev/urandom >big && head -c 9000000 /dev/urandom >mid'
	want=$(sb sha256sum big mid)
	head -c 1200000 /dev/urandom >"$T/w1"
	head -c 1200000 /dev/urandom >"$T/w2"
	exec {READER_BIG}<"$MNT/big" {READER_MID}<"$MNT/mid"
	# the readers read on until what they fetched holds most of the 4 MiB
	local i used=0 fds=("$READER_BIG" "$READER_MID")
	for ((i = 0; i < 100 && used < 3300000; i++)); do
		dd bs=256k count=1 <&"${fds[i % 2]}" >/dev/null 2>&1
		used=$(df --output=used -B1 "$SPOOL" | tail -1)
	done
	((used >= 3300000)) || fail "the readers never filled the spool: $used bytes used"
	cp "$T/w1" "$MNT/w1" &
	local w1=$!
	cp "$T/w2" "$MNT/w2" || fail "w2 did not fit beside the readers' fetched windows"
	wait $w1 || fail "w1 did not fit beside the readers' fetched windows"
	close_readers
	sbfs sync "$MNT"
	sb cat w1 | cmp - "$T/w1"
	sb cat w2 | cmp - "$T/w2"
	drop_kernel_caches
	assert_eq "$(cd "$MNT" && sha256sum big mid)" "$want" "read after the writes"
}
