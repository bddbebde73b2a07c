#!/usr/bin/env bats
# Real tools doing real work on the mount: the user story of issue 2, an
# editor save, a git workflow, a cold 1,000-entry `ls -l`, big binaries.

load helpers

WS=/workspace

# setup and teardown: the usual ones, from helpers.bash

make_project() {
	mkdir -p "$T/src/project/lib"
	cat >"$T/src/project/main.c" <<-'EOF'
		#include <stdio.h>
		#include "lib/greet.h"
		int main(void) { printf("%s\n", greeting()); return 0; }
	EOF
	cat >"$T/src/project/lib/greet.h" <<-'EOF'
		const char *greeting(void);
	EOF
	cat >"$T/src/project/lib/greet.c" <<-'EOF'
		#include "greet.h"
		const char *greeting(void) { return "hello from the sandbox"; }
	EOF
	printf 'a.out: main.c lib/greet.c lib/greet.h\n\tcc -O2 -o a.out main.c lib/greet.c\n' \
		>"$T/src/project/Makefile"
}

@test "user story: cp -r a tree in, sbexec make, stderr+status, binary out byte-identical" {
	make_project
	cp -r "$T/src/project" "$MNT/"
	diff -r "$T/src/project" "$MNT/project"
	run grep -rl greeting "$MNT/project"
	assert_status 0
	assert_eq "$(sort <<<"$output")" "$MNT/project/lib/greet.c
$MNT/project/lib/greet.h
$MNT/project/main.c"

	sandbox_has make || skip "no make in the sandbox"
	sandbox_has cc || skip "no cc in the sandbox"
	cd "$MNT/project"
	run sbexec make
	assert_status 0
	run sbexec ./a.out
	assert_status 0
	assert_eq "$output" "hello from the sandbox"

	rc=0
	sbexec sh -c 'echo hi >&2; exit 3' 2>"$T/err" || rc=$?
	assert_eq "$rc" 3
	assert_eq "$(cat "$T/err")" hi

	cd /
	cp "$MNT/project/a.out" "$T/a.out"
	sb cat "$WS/project/a.out" >"$T/a.out.stream"
	cmp "$T/a.out" "$T/a.out.stream"
	assert_eq "$(sha256sum <"$T/a.out" | cut -d' ' -f1)" \
		"$(sb sha256sum "$WS/project/a.out" | cut -d' ' -f1)"
	[ -x "$MNT/project/a.out" ]

	# tar out through the mount
	run bash -c 'tar -C "$1" -cf - project | tar -tf - | sort' _ "$MNT"
	assert_status 0
	assert_output_has project/a.out
	assert_output_has project/lib/greet.c
}

vim_save() { # FILE EXTRA_SET_COMMAND
	timeout 60 vim -Es -u NONE -i NONE -N \
		-c 'set swapfile directory=. updatecount=1 fsync' \
		-c "$2" \
		-c 'g/old/s//new/' \
		-c 'wq' "$1"
}

@test "vim save (writebackup, rename-style: backupcopy=no) with a swap file" {
	require_cmd vim
	printf 'line old 1\nline old 2\n' >"$MNT/edit.txt"
	vim_save "$MNT/edit.txt" 'set writebackup nobackup backupcopy=no'
	assert_eq "$(cat "$MNT/edit.txt")" $'line new 1\nline new 2'
	assert_eq "$(sb cat "$WS/edit.txt")" $'line new 1\nline new 2'
	assert_eq "$(ls -A "$MNT")" edit.txt "no swap or backup file left"
}

@test "vim save (backup kept, in-place: backupcopy=yes) with a swap file" {
	require_cmd vim
	printf 'one old\n' >"$MNT/edit.txt"
	vim_save "$MNT/edit.txt" 'set backup backupcopy=yes backupdir=. backupskip='
	assert_eq "$(sb cat "$WS/edit.txt")" "one new"
	assert_eq "$(sb cat "$WS/edit.txt~")" "one old"
	assert_eq "$(ls -A "$MNT" | sort)" $'edit.txt\nedit.txt~'
}

@test "atomic save: write temp, fsync, rename over the target" {
	printf 'v1\n' >"$MNT/conf"
	cat "$MNT/conf" >/dev/null
	printf 'v2 longer\n' | dd of="$MNT/.conf.tmp" conv=fsync status=none
	mv -f "$MNT/.conf.tmp" "$MNT/conf"
	assert_eq "$(cat "$MNT/conf")" "v2 longer"
	assert_eq "$(sb cat "$WS/conf")" "v2 longer"
	assert_eq "$(ls -A "$MNT")" conf
	run sb test -e "$WS/.conf.tmp"
	assert_status 1
}

@test "git: init, add, commit, status, checkout -b on the mount" {
	require_cmd git
	export GIT_CONFIG_NOSYSTEM=1 HOME=$T
	git config --global user.name sbfs-test
	git config --global user.email sbfs-test@example.invalid
	git config --global init.defaultBranch main
	mkdir "$MNT/repo"
	cd "$MNT/repo"
	git init -q
	printf 'hello\n' >README
	mkdir src
	printf 'int x;\n' >src/a.c
	git add .
	git commit -q -m first
	run git status --porcelain
	assert_status 0
	assert_eq "$output" ""
	git checkout -q -b feature
	assert_eq "$(git branch --show-current)" feature
	printf 'more\n' >>README
	run git status --porcelain
	assert_eq "$output" " M README"
	git commit -q -am second
	assert_eq "$(git rev-list --count HEAD)" 2
	git checkout -q main
	assert_eq "$(cat README)" hello
	git checkout -q feature
	assert_eq "$(cat README)" $'hello\nmore'
	run git fsck --no-progress
	assert_status 0
	# the sandbox sees the same repository
	if sandbox_has git; then
		head=$(git rev-parse HEAD)
		cd /
		run sb git -c safe.directory='*' -C "$WS/repo" rev-parse HEAD
		assert_status 0
		assert_eq "$output" "$head"
		run sb git -c safe.directory='*' -C "$WS/repo" status --porcelain
		assert_status 0
		assert_eq "$output" ""
	fi
}

@test "ls -l of a cold 1,000-file directory costs exactly one list call" {
	sb sh -c 'mkdir /workspace/many && cd /workspace/many && i=0;
		while [ $i -lt 1000 ]; do : > "f$i"; i=$((i + 1)); done'
	stat "$MNT/many" >/dev/null # the directory itself, not its listing
	l0=$(calls list)
	ls -l "$MNT/many" >"$T/ls.out"
	l1=$(calls list)
	assert_eq "$(grep -c '^-' "$T/ls.out")" 1000 "files listed"
	assert_eq "$((l1 - l0))" 1 "list calls for one ls -l"
}

@test "20 MiB random binary: host -> mount -> sandbox and sandbox -> mount -> host" {
	head -c $((20 * 1024 * 1024)) /dev/urandom >"$T/big"
	cp "$T/big" "$MNT/big"
	assert_eq "$(sb sha256sum "$WS/big" | cut -d' ' -f1)" "$(sha256sum <"$T/big" | cut -d' ' -f1)" "sha256 in the sandbox"
	cmp "$T/big" "$MNT/big"

	sb sh -c 'head -c 20971520 /dev/urandom > /workspace/big2'
	cp "$MNT/big2" "$T/big2"
	assert_eq "$(stat -c %s "$T/big2")" 20971520
	assert_eq "$(sha256sum <"$T/big2" | cut -d' ' -f1)" "$(sb sha256sum "$WS/big2" | cut -d' ' -f1)" "sha256 of the copy out"
	sb cat "$WS/big2" >"$T/big2.stream"
	cmp "$T/big2" "$T/big2.stream"
}
