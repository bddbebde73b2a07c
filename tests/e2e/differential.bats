#!/usr/bin/env bats
# Differential checks (issue 18): the same seeded random calls on a mount
# and on a local directory must give the same results (tests/tools/fsdiff),
# and one file written, truncated and mapped at random must always read
# back as its in-memory shadow (tests/tools/fsx). Both drop the kernel's
# caches between calls, through drop_kernel_caches (see serve_cache_drops).
#
# SBFS_LONG=1: longer runs (more calls, more seeds), for a soak by hand.

load helpers

# Known bugs: these call kinds and checks diverge today and are left out
# of the CI mix until their fix lands; then delete the entry (the list
# ends up empty). Each is a bug, not a difference we accept. An entry is a
# name from `fsdiff --list`, or MODE:NAME to leave it out only in that mode
# (writeback, default) or on that backend (local, docker, modal).
# DIFF_KNOWN_BROKEN= in the environment runs everything (to check a fix).
#   dirmtime dirctime  a directory's mtime/ctime follow the mount's own
#                      creates, removes, renames and links (issue 18 item
#                      9, fixed), but they are the daemon's clock until the
#                      sandbox's stat replaces them after a barrier: the
#                      times then move at an unrelated sbexec (seed 1,
#                      ~880 calls in write-back, ~1640 in the default mode)
#   mtime ctime        a file's mtime/ctime change at a later unrelated
#                      call (an sbexec) after the mount changed it: the
#                      sandbox stamped its own time. The upload case is
#                      fixed for mtime where the backend sets it in the
#                      same call (local); the ctime the sandbox stamps at
#                      the upload cannot be set
#   link               link() works (item 8), and a write, rename or
#                      unlink through one name shows through the others
#                      (fsdiff seeds 4, 7, 9, 10, fixed); but each name
#                      keeps its own spool, so what one name's open
#                      descriptor wrote shows through another name only
#                      once it is uploaded (close, fsync), where a local
#                      file system shows it at once (seeds 4, 8, 10).
#                      `quietlink` stays on: links where no descriptor is
#                      open on the file and no name of a linked file is
#                      opened, so the names, counts, renames onto links and
#                      write-back's deferred links are compared (it found a
#                      count left stale by a truncate through the other
#                      name, a count the kernel kept after a link, and a
#                      rename onto a link that lost the name in the
#                      kernel's cache; all fixed)
DIFF_KNOWN_BROKEN=${DIFF_KNOWN_BROKEN-"dirmtime dirctime mtime ctime link"}

DIFF_SEEDS="1 2 3"
DIFF_OPS=3000
FSX_SEEDS="1 2"
FSX_OPS=3000
if [[ -n ${SBFS_LONG:-} ]]; then
	DIFF_SEEDS="1 2 3 4 5 6 7 8"
	DIFF_OPS=20000
	FSX_OPS=50000
	DIFF_SECONDS=${DIFF_SECONDS:-0}
fi
# A bound on each run, so a slow machine shortens a run instead of
# failing the suite's time budget; the figures say how far it got.
DIFF_SECONDS=${DIFF_SECONDS:-10}

setup() {
	sbfs_setup
	TOOLS=$SBFS_BUILD/tests/tools
}

teardown() {
	exec 7>&- 8>&-
	sbfs_teardown
}

# mode_of_mount: "writeback" or "default", for the known-broken entries.
mode_of_mount() {
	[[ ,$SBFS_TEST_OPTS,$1, == *,writeback,* ]] && echo writeback || echo default
}

# known_broken MODE: the entries of DIFF_KNOWN_BROKEN that apply to MODE
# and to this backend, comma-separated, for --disable.
known_broken() {
	local e out=
	for e in $DIFF_KNOWN_BROKEN; do
		case $e in
		*:*) [[ ${e%%:*} == "$1" || ${e%%:*} == "$SBFS_TEST_BACKEND" ]] || continue
			e=${e#*:} ;;
		esac
		out+=${out:+,}$e
	done
	echo "$out"
}

# The tools ask for a cache drop by running $T/drop-request, which hands
# the request to this shell and waits: the drop itself is made by
# drop_kernel_caches, the suite's one entry point.
make_drop_request() {
	mkfifo "$T/drop-request.req" "$T/drop-request.ack"
	cat >"$T/drop-request" <<-'EOF'
		#!/bin/sh
		# asks differential.bats to drop the kernel's caches; waits for its answer
		printf 'drop\n' >"$0.req" && IFS= read -r answer <"$0.ack" && [ "$answer" = ok ]
	EOF
	chmod +x "$T/drop-request"
	exec 7<>"$T/drop-request.req" 8<>"$T/drop-request.ack"
}

# serve_cache_drops PID: answers the drop requests of PID until it exits.
serve_cache_drops() {
	local req
	while :; do
		if IFS= read -r -t 1 -u 7 req; then
			if drop_kernel_caches; then echo ok >&8; else echo failed >&8; fi
		elif ! kill -0 "$1" 2>/dev/null; then
			return 0
		fi
	done
}

# run_tool OUT CMD...: runs CMD with its cache drops served; prints its
# output; returns its status.
run_tool() {
	local out=$1 pid rc=0
	shift
	"$@" >"$out" 2>&1 &
	pid=$!
	serve_cache_drops "$pid"
	wait "$pid" || rc=$?
	cat "$out"
	return $rc
}

# fsdiff_seeds MODE: fsdiff with each seed on a fresh directory of the
# mount and of $T/local; records the figures.
fsdiff_seeds() {
	local mode=$1 s line total=0 skip
	[[ -x $TOOLS/fsdiff ]] || fail "no $TOOLS/fsdiff (build first)" || return 1
	skip=$(known_broken "$mode")
	make_drop_request
	for s in $DIFF_SEEDS; do
		mkdir "$MNT/diff$s" "$T/local/diff$s"
		run_tool "$T/fsdiff-$s.out" "$TOOLS/fsdiff" --seed "$s" --ops "$DIFF_OPS" \
			--seconds "$DIFF_SECONDS" --drop-cmd "$T/drop-request" --sbexec "$MNT" \
			${skip:+--disable "$skip"} "$MNT/diff$s" "$T/local/diff$s" ||
			fail "fsdiff seed $s ($mode mode) diverged or failed (left out: ${skip:-nothing})"
		line=$(grep '^fsdiff: ops' "$T/fsdiff-$s.out")
		figure "fsdiff $mode: ${line#fsdiff: }"
		line=${line#fsdiff: ops }
		total=$((total + ${line%% *}))
	done
	tally "fsdiff calls compared" "$total"
	[[ -z $skip ]] || figure "fsdiff $mode: left out as known bugs: $skip"
}

# fsx_seeds MODE: fsx with each seed on one file of the mount.
fsx_seeds() {
	local mode=$1 s line
	[[ -x $TOOLS/fsx ]] || fail "no $TOOLS/fsx (build first)" || return 1
	make_drop_request
	for s in $FSX_SEEDS; do
		run_tool "$T/fsx-$s.out" "$TOOLS/fsx" --seed "$s" --ops "$FSX_OPS" \
			--seconds "$DIFF_SECONDS" --reopen 50 --drop-cmd "$T/drop-request" \
			"$MNT/fsx$s" || fail "fsx seed $s ($mode mode) found a mismatch or failed"
		line=$(grep '^fsx: ops' "$T/fsx-$s.out")
		[[ $line == *"shared-mmap yes"* ]] ||
			fail "the mount does not take shared writable mappings (MAP_SHARED, PROT_WRITE): $line"
		figure "fsx $mode: ${line#fsx: }"
		line=${line#fsx: ops }
		tally "fsx operations verified" "${line%% *}"
	done
}

@test "fsdiff: random calls on the mount and on a local directory give the same results" {
	mount_sbfs
	mkdir "$T/local"
	fsdiff_seeds "$(mode_of_mount)"
}

@test "fsdiff: the same in write-back mode" {
	mount_sbfs -o writeback
	mkdir "$T/local"
	fsdiff_seeds writeback
}

@test "fsdiff: the same with -o nowatch where the backend watches by default (the timeouts)" {
	backend_watches_changes || skip "the ${SBFS_TEST_BACKEND:-} backend does not report changes"
	mount_sbfs -o nowatch # and the entry's own options (writeback)
	mkdir "$T/local"
	fsdiff_seeds "$(mode_of_mount)"
}

@test "fsx: random writes, truncates and mapped I/O on one file read back as written" {
	mount_sbfs
	fsx_seeds "$(mode_of_mount)"
}

@test "fsx: the same in write-back mode" {
	mount_sbfs -o writeback
	fsx_seeds writeback
}
