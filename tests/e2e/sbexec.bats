#!/usr/bin/env bats
# sbexec: streams, exit codes, stdin, timeouts, env, cwd mapping, Ctrl-C,
# and the coherence points (upload before, invalidate after).

load helpers

WS=/workspace

# setup and teardown: the usual ones, from helpers.bash

@test "stdout of the command comes back" {
	cd "$MNT"
	run sbexec echo hi there
	assert_status 0
	assert_eq "$output" "hi there"
}

@test "stdout and stderr are separate streams; exit status is the command's" {
	cd "$MNT"
	rc=0
	sbexec sh -c 'echo out; echo err >&2; exit 3' >"$T/out" 2>"$T/err" || rc=$?
	assert_eq "$rc" 3 "exit status"
	assert_eq "$(cat "$T/out")" out "stdout"
	assert_eq "$(cat "$T/err")" err "stderr"
}

@test "exit statuses 0, 1, 42, 255 pass through" {
	cd "$MNT"
	for code in 0 1 42 255; do
		run sbexec sh -c "exit $code"
		assert_status "$code"
	done
	run sbexec false
	assert_status 1
}

@test "a command killed by a signal gives 128+N" {
	cd "$MNT"
	run sbexec sh -c 'kill -TERM $$'
	assert_status 143
	run sbexec sh -c 'kill -KILL $$'
	assert_status 137
}

@test "stdin is forwarded (text and binary, until EOF)" {
	cd "$MNT"
	run bash -c 'printf "a\nb\nc\n" | sbexec wc -l'
	assert_status 0
	assert_eq "$(echo $output)" 3
	head -c 3000000 /dev/urandom >"$T/in"
	sbexec cat <"$T/in" >"$T/out"
	cmp "$T/in" "$T/out"
	want=$(sha256sum <"$T/in" | cut -d' ' -f1)
	got=$(sbexec sha256sum <"$T/in" | cut -d' ' -f1)
	assert_eq "$got" "$want"
}

@test "empty stdin: the command sees EOF at once" {
	cd "$MNT"
	run timeout 30 sbexec cat </dev/null
	assert_status 0
	assert_eq "$output" ""
}

@test "binary stdout is byte-exact" {
	cd "$MNT"
	sbexec sh -c 'i=0; while [ $i -lt 256 ]; do printf "\\$(printf %o $i)"; i=$((i+1)); done' >"$T/bytes"
	for i in $(seq 0 255); do printf "\\$(printf %o "$i")"; done >"$T/want"
	cmp "$T/want" "$T/bytes"
}

@test "stderr arrives while the command is still running (streamed)" {
	cd "$MNT"
	# The command prints, then waits for a file that only we create after
	# seeing the output: it can only finish if the output was streamed.
	sbexec sh -c 'echo ready >&2; i=0; while [ ! -e /workspace/go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; [ -e /workspace/go ] && echo done' \
		>"$T/out" 2>"$T/err" &
	pid=$!
	if ! poll 20 grep -q ready "$T/err"; then
		kill "$pid" 2>/dev/null
		wait "$pid" || true
		fail "stderr was not streamed before the command ended"
	fi
	touch "$MNT/go"
	wait "$pid"
	assert_eq "$(cat "$T/out")" done
}

@test "-t: a command over its timeout is killed, exit 124" {
	cd "$MNT"
	run timeout 60 sbexec -t 1 sh -c 'sleep 30; echo not-killed'
	assert_status 124
	[[ $output != *not-killed* ]]
	run sbexec -t 30 true
	assert_status 0
}

@test "-e sets variables; values may hold spaces and '='" {
	cd "$MNT"
	run sbexec -e FOO=bar -e 'X=a b=c' sh -c 'printf "%s|%s" "$FOO" "$X"'
	assert_status 0
	assert_eq "$output" "bar|a b=c"
}

@test "the caller's environment does not leak into the sandbox" {
	cd "$MNT"
	export SBFS_LEAK_CANARY=secret-value
	run sbexec env
	assert_status 0
	[[ $output != *SBFS_LEAK_CANARY* ]] || fail "caller env leaked: $output"
	[[ $output != *secret-value* ]] || fail "caller env leaked: $output"
}

@test "-o env=K=V at mount time is in every command's environment" {
	mount_sbfs -n envmnt -o env=ALPHA=one
	cd "$MNT"
	run sbexec sh -c 'printf %s "$ALPHA"'
	assert_status 0
	assert_eq "$output" one
}

@test "cwd maps: mount root is /workspace, subdirs map, spaces kept" {
	mkdir -p "$MNT/a/b" "$MNT/sp ace"
	cd "$MNT"
	assert_eq "$(sbexec pwd)" /workspace
	cd "$MNT/a/b"
	assert_eq "$(sbexec pwd)" /workspace/a/b
	cd "$MNT/sp ace"
	assert_eq "$(sbexec pwd)" "/workspace/sp ace"
	echo rel >"$MNT/a/b/r.txt"
	cd "$MNT/a/b"
	assert_eq "$(sbexec cat r.txt)" rel
}

@test "-w sets the working directory" {
	mkdir -p "$MNT/sub"
	cd "$MNT"
	assert_eq "$(sbexec -w /tmp pwd)" /tmp
	assert_eq "$(sbexec -w /workspace/sub pwd)" /workspace/sub
}

@test "-m finds the mount from anywhere; outside any mount without -m is exit 125" {
	cd "$T"
	assert_eq "$(sbexec -m "$MNT" pwd)" /workspace
	run sbexec true
	assert_status 125
	[ -n "$output" ]
	[ "$(wc -l <<<"$output")" -eq 1 ] || fail "reason is not one line: $output"
}

@test "options after the command belong to the command" {
	cd "$MNT"
	run sbexec printf '%s\n' -t -e -w x
	assert_status 0
	assert_eq "$output" $'-t\n-e\n-w\nx'
	run sbexec -- sh -c 'echo "$1"' sh --
	assert_eq "$output" --
}

@test "a command that does not exist: exit 127 and says so" {
	cd "$MNT"
	run -127 sbexec no-such-command-sbfs
	assert_output_has no-such-command-sbfs
}

@test "Ctrl-C (SIGINT to sbexec) kills the remote command, exit 130" {
	cd "$MNT"
	# Ctrl-C once the command runs, however long it takes to start (a
	# fixed delay lets a loaded machine send it before the command exists).
	# A duration of its own: the same test may run beside this one on
	# another backend, whose sandbox processes pgrep sees too.
	nap=59.${RANDOM}1
	env --default-signal=INT sbexec sh -c 'touch /workspace/started; exec sleep "$1"' sh "$nap" \
		>"$T/ctrlc.out" 2>&1 &
	pid=$!
	poll 60 pgrep -f "sleep ${nap/./[.]}" >/dev/null || {
		kill "$pid"
		fail "the command never started: $(cat "$T/ctrlc.out")"
	}
	kill -INT "$pid"
	status=0
	wait "$pid" || status=$?
	output=$(cat "$T/ctrlc.out")
	assert_status 130
	[ -e "$MNT/started" ] || fail "the command never started"
	poll 10 bash -c '! pgrep -f "sleep ${1/./[.]}" >/dev/null' sh "$nap" || fail "remote command still running after Ctrl-C"
	# the mount and the sandbox are still usable
	run sbexec echo still-fine
	assert_eq "$output" still-fine
}

@test "commands share the sandbox: /tmp persists between commands" {
	cd "$MNT"
	sbexec sh -c 'echo kept > /tmp/sbfs-persist'
	assert_eq "$(sbexec cat /tmp/sbfs-persist)" kept
}

@test "coherence: a dirty file still open on the host is uploaded before exec" {
	exec 7>"$MNT/open.txt"
	printf 'written-but-open' >&7
	run sb cat "$WS/open.txt"
	exec 7>&-
	assert_status 0
	assert_eq "$output" written-but-open
}

@test "coherence: a file the command creates is visible on the mount at once" {
	# prime a negative lookup and a listing first
	[ ! -e "$MNT/new.txt" ]
	ls "$MNT" >/dev/null
	sb sh -c 'echo created > /workspace/new.txt'
	assert_eq "$(cat "$MNT/new.txt")" created
	assert_eq "$(ls "$MNT")" new.txt
}

@test "coherence: same-size rewrite in the sandbox is seen on the mount at once" {
	echo aaaa >"$MNT/f"
	assert_eq "$(cat "$MNT/f")" aaaa
	sb sh -c 'echo bbbb > /workspace/f'
	assert_eq "$(cat "$MNT/f")" bbbb
	sb sh -c 'echo longer-now > /workspace/f'
	assert_eq "$(cat "$MNT/f")" longer-now
	assert_eq "$(stat -c %s "$MNT/f")" 11
}

@test "coherence: a file held open on the host is read fresh after the sandbox rewrites it" {
	echo old-content >"$MNT/held"
	exec 7<"$MNT/held"
	assert_eq "$(cat "$MNT/held")" old-content
	sb sh -c 'echo brand-new-content > /workspace/held'
	# a new open shares the held file's spool: it must not serve the old bytes
	assert_eq "$(cat "$MNT/held")" brand-new-content
	exec 7<&-
}

@test "coherence: deletes and renames in the sandbox are seen on the mount at once" {
	mkdir "$MNT/d"
	echo x >"$MNT/d/a"
	echo y >"$MNT/d/b"
	ls -l "$MNT/d" >/dev/null
	sb sh -c 'rm /workspace/d/a && mv /workspace/d/b /workspace/d/c'
	assert_eq "$(ls "$MNT/d")" c
	[ ! -e "$MNT/d/a" ]
	assert_eq "$(cat "$MNT/d/c")" y
}

@test "exec counter: one exec per sbexec command" {
	cd "$MNT"
	e0=$(calls exec)
	sbexec true
	sbexec true
	e1=$(calls exec)
	assert_eq "$((e1 - e0))" 2 "exec calls for two commands"
}
