#!/usr/bin/env bats
# The hostile name corpus (name_corpus.bash, 300 names) through a real
# mount: each name is created, listed, renamed and deleted on the mount,
# and after every phase the sandbox's own view (names and contents, byte
# for byte) is checked with a single sbexec. Nothing in a name may run.

load helpers
load name_corpus

WS=/workspace

# 300 names, each created, listed, renamed and deleted through the
# backend's own calls: on a remote engine under the suite's load that is
# minutes, past the suite's usual hang guard.
setup_file() {
	((${BATS_TEST_TIMEOUT:-0} >= 900)) || export BATS_TEST_TIMEOUT=900
}

setup() {
	export LC_ALL=C # byte semantics for sort and string lengths
	sbfs_setup
	name_corpus
	mount_sbfs
	mkdir "$MNT/d" "$MNT/e"
}

teardown() {
	sbfs_teardown
}

sorted_hex() {
	sort -z | od -An -tx1 -v
}

# sb_entries DIR: "name \001 content \0" for every entry of DIR, as the
# sandbox sees it (POSIX sh only, so busybox images work too), sorted hex.
sb_entries() {
	sb sh -c 'cd "$1" && for f in * .[!.]* ..?*; do
		if [ -e "$f" ] || [ -L "$f" ]; then printf "%s\001" "$f"; cat <"$f"; printf "\0"; fi
	done' sh "$1" | sorted_hex
}

# want_entries SHIFT: the expected entries when name i holds content
# i-SHIFT (mod N): content "c<i>:<name i>" as written at create time.
want_entries() {
	local n=${#NAMES[@]} i j
	for i in "${!NAMES[@]}"; do
		j=$(((i - $1 + n) % n))
		printf '%s\001c%d:%s\0' "${NAMES[i]}" "$j" "${NAMES[j]}"
	done | sorted_hex
}

mount_names() {
	find "$1" -mindepth 1 -maxdepth 1 -printf '%f\0' | sorted_hex
}

# no_pwned: none of the corpus's injected `touch pwned_?` ran, on the host
# (around the daemon and the test) or in the sandbox.
no_pwned() {
	local cwd found
	cwd=$(readlink "/proc/$SBFS_PID/cwd" 2>/dev/null || echo /)
	found=$(ls -d /pwned_? /tmp/pwned_? "$cwd"/pwned_? "$T"/pwned_? "$T"/*/pwned_? \
		"$SBFS_REPO"/pwned_? 2>/dev/null || true)
	[[ -z $found ]] || fail "injected command ran on the host: $found" || return 1
	found=$(sb sh -c 'ls -d /pwned_? /tmp/pwned_? 2>/dev/null; find / -xdev -name "pwned_?" 2>/dev/null')
	[[ -z $found ]] || fail "injected command ran in the sandbox: $found" || return 1
}

@test "name corpus: create, list, rename and delete on the mount; exact in the sandbox" {
	local n=${#NAMES[@]} i
	((n >= 200)) || fail "corpus has only $n names"
	echo "# $n names" >&3

	for i in "${!NAMES[@]}"; do
		printf 'c%d:%s' "$i" "${NAMES[i]}" >"$MNT/d/${NAMES[i]}"
	done
	assert_eq "$(sb_entries "$WS/d")" "$(want_entries 0)" "names and contents in the sandbox after create"
	assert_eq "$(mount_names "$MNT/d")" "$(printf '%s\0' "${NAMES[@]}" | sorted_hex)" "listing on the mount"
	for i in "${!NAMES[@]}"; do
		cmp -s <(printf 'c%d:%s' "$i" "${NAMES[i]}") "$MNT/d/${NAMES[i]}" ||
			fail "content of $(printf %q "${NAMES[i]}") read on the mount" || return 1
	done

	# name i moves to the other directory under name i+1
	for i in "${!NAMES[@]}"; do
		mv -T -- "$MNT/d/${NAMES[i]}" "$MNT/e/${NAMES[(i + 1) % n]}"
	done
	assert_eq "$(sb ls -A "$WS/d")" "" "sandbox: source directory after renames"
	assert_eq "$(sb_entries "$WS/e")" "$(want_entries 1)" "names and contents in the sandbox after rename"
	assert_eq "$(mount_names "$MNT/e")" "$(printf '%s\0' "${NAMES[@]}" | sorted_hex)" "listing on the mount after rename"
	assert_eq "$(ls -A "$MNT/d")" "" "mount: source directory after renames"

	for i in "${!NAMES[@]}"; do
		rm -- "$MNT/e/${NAMES[i]}"
	done
	assert_eq "$(sb sh -c 'find "$1" "$2" -mindepth 1 | wc -l' sh "$WS/d" "$WS/e")" 0 "sandbox after delete"
	assert_eq "$(ls -A "$MNT/e")" "" "mount after delete"
	no_pwned
	tally "hostile names made, renamed and deleted on the mount, checked byte-exact in the sandbox" "$n"
}

@test "name corpus: names made in the sandbox list, read and delete exactly on the mount" {
	printf '%s\0' "${NAMES[@]}" |
		sb sh -c 'cd "$1" && xargs -0 sh -c '\''for f; do printf "in:%s" "$f" >"$f"; done'\'' sh' sh "$WS/d"
	assert_eq "$(mount_names "$MNT/d")" "$(printf '%s\0' "${NAMES[@]}" | sorted_hex)" "listing on the mount"
	for i in "${!NAMES[@]}"; do
		cmp -s <(printf 'in:%s' "${NAMES[i]}") "$MNT/d/${NAMES[i]}" ||
			fail "content of $(printf %q "${NAMES[i]}") read on the mount" || return 1
		[[ $(stat -c %s -- "$MNT/d/${NAMES[i]}") == $((${#NAMES[i]} + 3)) ]] ||
			fail "size of $(printf %q "${NAMES[i]}") on the mount" || return 1
	done
	find "$MNT/d" -mindepth 1 -delete
	assert_eq "$(sb ls -A "$WS/d")" "" "sandbox after delete on the mount"
	no_pwned
	tally "hostile names made in the sandbox, read and deleted exactly on the mount" "${#NAMES[@]}"
}
