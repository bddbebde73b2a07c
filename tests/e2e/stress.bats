#!/usr/bin/env bats
# Stress through a real mount, every byte checked: fio's verified random
# writes and reads (re-verified from what the sandbox holds), stress-ng's
# filesystem stressors, and host writers racing sbexec readers. Sizes and
# times are bounded so each backend's run stays short; the figures are
# printed (bats shows lines sent to fd 3).

load helpers

WS=/workspace

# Its tests load the machine themselves: one at a time within the file
# (other files still run beside it).
BATS_NO_PARALLELIZE_WITHIN_FILE=true

# Stress windows: short in the default suite; SBFS_LONG=1 runs the long ones.
# A stressor that has not started when stress-ng's run time is up exits
# without a result: at 2 s a loaded 2-core machine (27 stressors beside
# the other test files, a write-back journal syncing copy-file's 128 MiB)
# sometimes left some out (seen in CI and under strace: their children
# exited with the others, before making their temporary directories).
if [[ -n ${SBFS_LONG:-} ]]; then
	STRESS_NG_SECONDS=30 MAX_WRITE_SECONDS=60 FILES_PER_WRITER=200 FIO_FILE_MIB=16
else
	STRESS_NG_SECONDS=5 MAX_WRITE_SECONDS=4 FILES_PER_WRITER=25 FIO_FILE_MIB=4
fi

setup() {
	sbfs_setup
	local c
	for c in fio stress-ng sha256sum; do
		command -v "$c" >/dev/null || fail "needs $c on the host (apt-get install ${c/sha256sum/coreutils})" || return 1
	done
	mount_sbfs
}

teardown() {
	sbfs_teardown
}

# ------------------------------------------------------------------- fio

FIO_JOBS=(psync mmap) # I/O through write(2), and through a shared mapping
FIO_NJOBS=2

# run_fio NAME ENGINE RW [ARGS...]: one fio run over NAME.{0,1}.0 in
# $MNT/fio, block sizes from 512 B to 64 KiB, crc32c verify headers.
run_fio() {
	local name=$1 engine=$2 rw=$3
	shift 3
	(cd "$T" && fio --name="$name" --directory="$MNT/fio" --ioengine="$engine" --rw="$rw" \
		--bsrange=512-64k --size="${FIO_FILE_MIB}M" --numjobs=$FIO_NJOBS \
		--verify=crc32c --verify_state_save=0 --group_reporting "$@") >"$T/fio-$name-$rw.out" 2>&1
}

@test "fio: verified random writes (write and mmap), re-verified from the sandbox's bytes" {
	mkdir "$MNT/fio"
	local job files=()
	for job in "${FIO_JOBS[@]}"; do
		run_fio "$job" "$job" randwrite --do_verify=1 --end_fsync=1 ||
			fail "fio $job randwrite+verify failed: $(tail -20 "$T/fio-$job-randwrite.out")" || return 1
		for ((i = 0; i < FIO_NJOBS; i++)); do files+=("$job.$i.0"); done
	done

	# What the sandbox holds is what the mount shows (sbexec is a
	# coherence point: pending data goes up before, caches drop after).
	local inside host
	inside=$(cd "$MNT/fio" && sbexec sha256sum "${files[@]}")
	host=$(cd "$MNT/fio" && sha256sum "${files[@]}")
	assert_eq "$inside" "$host" "sha256 in the sandbox vs on the mount"

	# Random reads with verification, now fetched back from the sandbox.
	for job in "${FIO_JOBS[@]}"; do
		run_fio "$job" psync randread --randrepeat=0 ||
			fail "fio $job randread+verify failed: $(tail -20 "$T/fio-$job-randread.out")" || return 1
	done

	# The checks above read the sandbox's bytes: spoil 64 of them inside
	# and the same verification must now fail.
	sb sh -c 'head -c 64 /dev/urandom | dd of="$1" bs=1 seek=1048600 conv=notrunc 2>/dev/null' sh "$WS/fio/psync.0.0"
	run run_fio psync psync randread --randrepeat=0
	[ "$status" -ne 0 ] || fail "fio verified a file spoiled in the sandbox"
	grep -q 'verify:.*psync\.0\.0' "$T/fio-psync-randread.out" ||
		fail "fio failed, but not on the spoiled file: $(tail -5 "$T/fio-psync-randread.out")"

	local per=$((FIO_FILE_MIB * ${#files[@]}))
	figure "fio: ${#files[@]} files, ${per} MiB written and verified, ${per} MiB sha256-compared in the sandbox, ${per} MiB re-verified from the sandbox, spoiled block detected"
}

# --------------------------------------------------------------- stress-ng

# Stressors that a network filesystem should pass, and their options:
# bounded sizes so their clean-up through the mount stays short on a slow
# backend. Left out: xattr (see the next test); link and symlink, whose
# set-up and clean-up unlink 8,192 names with two statfs calls each
# whatever the run time (minutes where each call is a command in the
# sandbox; hard links are checked in ownership.bats and symlinks in
# posix.bats); fallocate, fpunch and fsize, which need fallocate(2),
# which sbfs does not implement (the kernel answers EOPNOTSUPP); the rest
# are not about files.
STRESSORS=(hdd seek readahead copy-file sync-file iomix mmap sendfile splice
	dentry dir dirdeep dirmany chdir rename filename utime chmod touch
	open fstat getdent access io lockf flock fcntl)
STRESSOR_OPTS=(
	--hdd-bytes 2M --hdd-write-size 4K --seek-size 2M --readahead-bytes 2M
	--copy-file-bytes 128M --sync-file-bytes 2M --iomix-bytes 2M
	--mmap-file --mmap-bytes 2M --sendfile-size 64K --splice-bytes 64K
	--filename-opts posix --dentries 64 --dir-dirs 64 --dirdeep-dirs 1 --dirdeep-inodes 64
	--dirmany-ops 64 --chdir-dirs 64
)

@test "stress-ng: filesystem stressors in the mount pass, and leave nothing behind" {
	mkdir "$MNT/sng"
	local args=() s
	for s in "${STRESSORS[@]}"; do args+=("--$s" 1); done
	run timeout -k 10 150 stress-ng --temp-path "$MNT/sng" --timeout "${STRESS_NG_SECONDS}s" --verify --metrics-brief \
		--yaml "$T/sng.yaml" "${args[@]}" "${STRESSOR_OPTS[@]}"
	assert_status 0
	if grep -E '(fail|error):' <<<"$output"; then
		fail "a stressor failed (above)"
		return 1
	fi
	# every stressor ran and reported its bogo ops
	local ran=0 ops total=0 line=""
	for s in "${STRESSORS[@]}"; do
		ops=$(awk -v s="$s" '$1 == "-" && $2 == "stressor:" { cur = $3 } cur == s && $1 == "bogo-ops:" { print $2; exit }' "$T/sng.yaml")
		[[ -n $ops ]] || fail "no result for stressor $s" || return 1
		ran=$((ran + 1))
		total=$((total + ops))
		line+=" $s=$ops"
	done
	# their temp dirs were removed through the mount: none on either side
	assert_eq "$(ls -A "$MNT/sng")" "" "stress-ng leftovers on the mount"
	assert_eq "$(sb ls -A "$WS/sng")" "" "stress-ng leftovers in the sandbox"
	figure "stress-ng: $ran stressors passed, $total bogo ops:$line"
}

@test "stress-ng: xattrs are refused, so the xattr stressor skips, never fakes" {
	mkdir "$MNT/sng"
	run timeout -k 10 60 stress-ng --temp-path "$MNT/sng" --timeout 2s --xattr 1
	# 3: the stressor skipped for lack of support
	assert_status 3
	assert_output_has "does not support xattr"
	assert_eq "$(sb ls -A "$WS/sng")" "" "leftovers in the sandbox"
	figure "stress-ng: xattr skipped (setxattr: not supported)"
}

# ----------------------------------------- concurrent writers and readers

WRITERS=4

# content K G: the bytes of writer K's file G (size 1 B .. ~192 KiB).
content() {
	yes "writer $1 file $2 " | head -c $((($1 * 7919 + $2 * 104729) % 196608 + 1))
}

writer() {
	local k=$1 g deadline=$((SECONDS + MAX_WRITE_SECONDS))
	mkdir -p "$MNT/w$k"
	for ((g = 1; g <= FILES_PER_WRITER && SECONDS < deadline; g++)); do
		content "$k" "$g" >"$MNT/w$k/f$g" || return 1
		echo "w$k/f$g" >>"$T/closed.$k"
	done
}

# reader R: until the writers are done, snapshot the list of closed files,
# then have the sandbox report "path size sha256" for every file it sees.
reader() {
	local r=$1 i=0
	while [[ ! -e $T/writers.done ]] && ((i < 40)); do
		cat "$T"/closed.* 2>/dev/null | sort >"$T/snap.$r.$i"
		# one read of each file (a copy), so size and hash describe the same bytes
		sbexec -m "$MNT" sh -c 'cd /workspace && for f in w*/f*; do
			[ -f "$f" ] || continue
			cat <"$f" >"/tmp/seen.$1" || continue
			printf "%s %s %s\n" "$f" "$(wc -c <"/tmp/seen.$1")" "$(sha256sum <"/tmp/seen.$1" | cut -c1-64)"
		done' sh "$r" >"$T/seen.$r.$i" || echo "sbexec failed: $?" >"$T/seen.$r.$i.err"
		i=$((i + 1))
	done
}

@test "concurrent host writers and sbexec readers: no torn data, closed files complete, every byte verified" {
	local k r pids=()
	for ((k = 1; k <= WRITERS; k++)); do
		writer "$k" &
		pids+=($!)
	done
	for r in 1 2; do
		reader "$r" &
		readers+=($!)
	done
	for k in "${pids[@]}"; do wait "$k" || fail "a writer failed" || return 1; done
	touch "$T/writers.done"
	for r in "${readers[@]}"; do wait "$r"; done
	if ls "$T"/seen.*.err >/dev/null 2>&1; then
		fail "sbexec failed during the run: $(cat "$T"/seen.*.err)"
		return 1
	fi

	# the expected size and sha256 of every file written
	local -A size=() sum=()
	local f files=0 bytes=0
	for f in $(cat "$T"/closed.*); do
		k=${f#w} k=${k%%/*} g=${f##*/f}
		size[$f]=$(content "$k" "$g" | wc -c)
		sum[$f]=$(content "$k" "$g" | sha256sum | cut -c1-64)
		files=$((files + 1))
		bytes=$((bytes + size[$f]))
	done

	# Every file a reader saw is a prefix of what was written (a file
	# still being written may be short, never spliced), and every file
	# closed before the reader's sbexec started is complete.
	local seen obs=0 obs_bytes=0 snap p s h want
	for seen in "$T"/seen.*.*; do
		snap=${seen/seen./snap.}
		while read -r p s h; do
			[[ -n ${size[$p]:-} ]] || fail "$seen: unknown file $p" || return 1
			if ((s == size[$p])); then
				want=${sum[$p]}
			else
				((s < size[$p])) || fail "$seen: $p has $s bytes, more than the ${size[$p]} written" || return 1
				k=${p#w} k=${k%%/*} g=${p##*/f}
				want=$(content "$k" "$g" | head -c "$s" | sha256sum | cut -c1-64)
			fi
			assert_eq "$h" "$want" "$seen: sha256 of the first $s bytes of $p" || return 1
			obs=$((obs + 1))
			obs_bytes=$((obs_bytes + s))
		done <"$seen"
		while read -r p; do
			grep -q "^$p ${size[$p]} " "$seen" ||
				fail "$seen: $p was closed before this sbexec started but is not complete there: $(grep "^$p " "$seen")" || return 1
		done <"$snap"
	done

	# finally every byte of every file, in the sandbox and on the mount
	local inside="" want_all=""
	inside=$(sb sh -c 'cd /workspace && for f in w*/f*; do printf "%s %s\n" "$f" "$(sha256sum <"$f" | cut -c1-64)"; done' | sort)
	want_all=$(for f in "${!sum[@]}"; do echo "$f ${sum[$f]}"; done | sort)
	assert_eq "$inside" "$want_all" "every file's sha256 in the sandbox"
	for f in "${!sum[@]}"; do
		[[ $(sha256sum <"$MNT/$f" | cut -c1-64) == "${sum[$f]}" ]] || fail "$f differs on the mount" || return 1
	done
	local rounds
	rounds=$(ls "$T"/seen.*.* | wc -l)
	figure "concurrency: $WRITERS writers, $files files, $bytes bytes verified in the sandbox and on the mount; $rounds sbexec reader rounds checked $obs observations ($obs_bytes bytes)"
}
