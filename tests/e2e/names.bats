#!/usr/bin/env bats
# Hostile file names round-trip exactly through create, write, read, list,
# rename and delete, in both directions, and never execute anything.
# Run the suite with SBFS_TEST_OPTS=shell_ops to push them through the
# generic shell implementations too.

load helpers

WS=/workspace

setup() {
	export LC_ALL=C # byte semantics for sort and ${name:0:n}
	sbfs_setup
	# remove leftovers of an earlier broken run so they cannot fool us
	rm -f /pwned_? /tmp/pwned_?
	mount_sbfs
	mkdir "$MNT/d"
	N=(
		"it's"
		'say "hi"'
		'$(touch pwned_a)'
		'`touch pwned_b`'
		'semi;touch pwned_c'
		'pipe|touch pwned_d'
		'amp&&touch pwned_e'
		'$(touch${IFS}pwned_f)'
		$'new\nline'
		$'\nleading-newline'
		$'trailing-newline\n'
		$'tab\there'
		$'cr\rret'
		$'esc\e[31mred'
		'-rf'
		'--help'
		'-'
		'-n'
		' leading space'
		'trailing space '
		'   '
		$'bad\xff\xfeutf8'
		$'\xc3\x28'
		$'\x80'
		'ünïcødé ✓'
		'*'
		'?x[a]'
		'back\slash'
		'$HOME'
		'${IFS}x'
		'>redir'
		'<in'
		'#hash'
		'~tilde'
		'%s%n'
		'...'
		'.hidden'
		"$(printf 'n%.0s' {1..255})"
	)
}

teardown() {
	sbfs_teardown
}

# nul_list: NUL-separated names on stdin -> sorted hex, for comparing sets.
sorted_hex() {
	sort -z | od -An -tx1 -v
}

# sb_names DIR: NUL-separated entries of DIR as the sandbox sees them
# (POSIX sh only, so busybox images work too).
sb_names() {
	sb sh -c 'cd "$1" && for f in * .[!.]* ..?*; do
		if [ -e "$f" ] || [ -L "$f" ]; then printf "%s\0" "$f"; fi; done' sh "$1"
}

expected_names_hex() {
	printf '%s\0' "$@" | sorted_hex
}

# assert_nothing_executed: none of the injected `touch pwned_?` ran, on the
# host or in the sandbox.
assert_nothing_executed() {
	local cwd found
	cwd=$(readlink "/proc/$SBFS_PID/cwd" 2>/dev/null || echo /)
	found=$(ls -d /pwned_? /tmp/pwned_? /root/pwned_? "$cwd"/pwned_? "$T"/pwned_? "$T"/*/pwned_? \
		"$SBFS_REPO"/pwned_? "$PWD"/pwned_? 2>/dev/null || true)
	[[ -z $found ]] || fail "injected command ran on the host: $found" || return 1
	found=$(sb sh -c 'ls -d /pwned_? /tmp/pwned_? 2>/dev/null; find /workspace -name "pwned_?"')
	[[ -z $found ]] || fail "injected command ran in the sandbox: $found" || return 1
}

@test "hostile names: create+write on the mount, read and list on the mount" {
	for i in "${!N[@]}"; do
		printf 'content %d' "$i" >"$MNT/d/${N[i]}"
	done
	for i in "${!N[@]}"; do
		assert_eq "$(cat "$MNT/d/${N[i]}")" "content $i" "content of name #$i $(printf %q "${N[i]}")"
	done
	got=$(find "$MNT/d" -mindepth 1 -maxdepth 1 -printf '%f\0' | sorted_hex)
	assert_eq "$got" "$(expected_names_hex "${N[@]}")" "listing on the mount"
	assert_nothing_executed
}

@test "hostile names made on the mount are exact in the sandbox (names and contents)" {
	for i in "${!N[@]}"; do
		printf 'content %d' "$i" >"$MNT/d/${N[i]}"
	done
	got=$(sb_names "$WS/d" | sorted_hex)
	assert_eq "$got" "$(expected_names_hex "${N[@]}")" "listing in the sandbox"
	# name \001 content \0, for every entry, as the sandbox sees it
	got=$(sb sh -c 'cd /workspace/d && for f in * .[!.]* ..?*; do
		[ -e "$f" ] || continue; printf "%s\001" "$f"; cat <"$f"; printf "\0"; done' | sorted_hex)
	want=$(for i in "${!N[@]}"; do printf '%s\001content %d\0' "${N[i]}" "$i"; done | sorted_hex)
	assert_eq "$got" "$want" "names with contents in the sandbox"
	assert_nothing_executed
}

@test "hostile names: rename and delete on the mount" {
	for i in "${!N[@]}"; do
		printf 'content %d' "$i" >"$MNT/d/${N[i]}"
	done
	R=()
	for i in "${!N[@]}"; do
		R[i]="${N[i]:0:200}~mv"
		mv -- "$MNT/d/${N[i]}" "$MNT/d/${R[i]}"
	done
	got=$(find "$MNT/d" -mindepth 1 -maxdepth 1 -printf '%f\0' | sorted_hex)
	assert_eq "$got" "$(expected_names_hex "${R[@]}")" "listing after rename (mount)"
	got=$(sb_names "$WS/d" | sorted_hex)
	assert_eq "$got" "$(expected_names_hex "${R[@]}")" "listing after rename (sandbox)"
	for i in "${!N[@]}"; do
		assert_eq "$(cat "$MNT/d/${R[i]}")" "content $i" "content after rename of #$i"
	done
	# directories with hostile names, renamed with their contents
	mkdir -- "$MNT/d/"'$(touch pwned_g) dir'
	echo inner >"$MNT/d/"'$(touch pwned_g) dir'/$'f\nx'
	mv -- "$MNT/d/"'$(touch pwned_g) dir' "$MNT/d/-dir \`touch pwned_h\`"
	assert_eq "$(sb cat "$WS/d/-dir \`touch pwned_h\`/"$'f\nx')" inner
	rm -r -- "$MNT/d/-dir \`touch pwned_h\`"

	for i in "${!N[@]}"; do
		rm -- "$MNT/d/${R[i]}"
	done
	assert_eq "$(ls -A "$MNT/d")" "" "mount dir after deleting all"
	assert_eq "$(sb ls -A "$WS/d")" "" "sandbox dir after deleting all"
	assert_nothing_executed
}

@test "hostile names made in the sandbox round-trip on the mount" {
	printf '%s\0' "${N[@]}" |
		sb sh -c 'cd /workspace/d && xargs -0 sh -c '\''for f; do printf "in:%s" "$f" > "$f"; done'\'' sh'
	got=$(find "$MNT/d" -mindepth 1 -maxdepth 1 -printf '%f\0' | sorted_hex)
	assert_eq "$got" "$(expected_names_hex "${N[@]}")" "listing on the mount"
	for i in "${!N[@]}"; do
		printf 'in:%s' "${N[i]}" >"$T/want"
		cmp "$T/want" "$MNT/d/${N[i]}" || fail "content of #$i $(printf %q "${N[i]}")"
	done
	for i in "${!N[@]}"; do
		mv -- "$MNT/d/${N[i]}" "$MNT/d/${N[i]:0:200}.2"
		rm -- "$MNT/d/${N[i]:0:200}.2"
	done
	assert_eq "$(sb ls -A "$WS/d")" ""
	assert_nothing_executed
}

@test "hostile names pass through sbexec argv intact" {
	for i in "${!N[@]}"; do
		printf '%s' "${N[i]}" >"$T/want"
		sb printf '%s' "${N[i]}" >"$T/got"
		cmp "$T/want" "$T/got" || fail "argv #$i $(printf %q "${N[i]}") changed"
	done
	cd "$MNT/d"
	for i in "${!N[@]}"; do
		: >"$MNT/d/${N[i]}"
		run sbexec test -f "${N[i]}"
		assert_status 0
	done
	assert_nothing_executed
}

@test "hostile names in a cwd map into the sandbox" {
	dir=$'cwd $(touch pwned_i) \xff\n-x'
	mkdir -- "$MNT/$dir"
	cd -- "$MNT/$dir"
	sbexec pwd >"$T/got"
	printf '%s\n' "/workspace/$dir" >"$T/want"
	cmp "$T/want" "$T/got"
	assert_nothing_executed
}

@test "a 256-byte name is refused (ENAMETOOLONG) and nothing is created" {
	long=$(printf 'x%.0s' {1..256})
	run touch "$MNT/d/$long"
	[ "$status" -ne 0 ]
	assert_output_has "File name too long"
	run mkdir "$MNT/d/$long"
	[ "$status" -ne 0 ]
	assert_eq "$(sb ls -A "$WS/d")" ""
}
