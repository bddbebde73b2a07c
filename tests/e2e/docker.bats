#!/usr/bin/env bats
# docker backend only: a container killed from outside, orphans left by a
# killed daemon and `sbfs sweep`, what the container is made with, and the
# cost of writes and listings in backend calls.
#
# Needs SBFS_TEST_BACKEND=docker, DOCKER_HOST pointing at the engine, and
# SBFS_TEST_OPTS=image=... (see tests/docker/engine-up.sh).

load helpers

WS=/workspace

setup() {
	require_backend docker
	require_cmd docker
	sbfs_setup
}

teardown() {
	sbfs_teardown
	local id
	for id in ${ORPHANS:-}; do docker_sandbox_cleanup "$id"; done
}

eio_on_new_dir() {
	local out
	out=$(mkdir "$MNT/probe-$RANDOM$RANDOM" 2>&1) && return 1
	[[ $out == *"Input/output error"* ]]
}

@test "docker kill mid-use: EIO on the mount, running and new sbexec exit 125 with a reason, no hang" {
	mount_sbfs
	echo x >"$MNT/f"
	cd "$MNT"
	sbexec sleep 300 >"$T/long.out" 2>"$T/long.err" &
	long=$!
	cd /
	poll 20 bash -c "docker top $SBFS_SANDBOX 2>/dev/null | grep -q 'sleep 300'" ||
		fail "the long command never started"
	docker_sandbox_kill "$SBFS_SANDBOX"
	poll 10 eio_on_new_dir || fail "mkdir on the mount did not fail with EIO within 10s"
	poll 10 not_pid_alive "$long" || {
		kill "$long"
		fail "the running sbexec hangs after the container was killed"
	}
	rc=0
	wait "$long" || rc=$?
	assert_eq "$rc" 125 "status of the sbexec running during the kill"
	[ "$(wc -l <"$T/long.err")" -eq 1 ] || fail "reason is not one line: $(cat "$T/long.err")"
	grep -q "$SBFS_SANDBOX" "$T/long.err" || fail "reason does not name the container: $(cat "$T/long.err")"
	run timeout 30 sbexec -m "$MNT" true
	assert_status 125
	[ -n "$output" ] || fail "sbexec gave no reason"
	run cat "$MNT/f"
	[ "$status" -ne 0 ]
	unmount_sbfs
	poll 15 docker_sandbox_gone "$SBFS_SANDBOX" || fail "the killed container was not removed at unmount"
}

@test "container removed from outside (docker rm -f): EIO, exit 125, unmount works" {
	mount_sbfs
	docker rm -f "$SBFS_SANDBOX" >/dev/null
	poll 10 eio_on_new_dir || fail "no EIO within 10s of the container's removal"
	run timeout 30 sbexec -m "$MNT" true
	assert_status 125
	unmount_sbfs
}

@test "kill -9 of sbfs leaves an orphan; sbfs sweep removes it and spares a live mount" {
	mount_sbfs -n live
	live=$SBFS_SANDBOX
	mount_sbfs -n victim
	victim=$SBFS_SANDBOX
	ORPHANS="$victim"
	assert_eq "$(docker_sandbox_label "$victim" sbfs)" 1 "sbfs label"
	assert_eq "$(docker_sandbox_label "$victim" sbfs.pid)" "$SBFS_PID" "daemon pid label"
	kill -KILL "$SBFS_PID"
	poll 10 not_pid_alive "$SBFS_PID"
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
	docker_sandbox_exists "$victim" || fail "the container died with its daemon: nothing to sweep"
	run timeout 60 sbfs sweep -o backend=docker
	assert_status 0
	assert_output_has "removed $victim"
	[[ $output != *"removed $live"* ]] || fail "sweep removed a live mount's container: $output"
	poll 10 docker_sandbox_gone "$victim" || fail "the orphan is still there"
	docker_sandbox_exists "$live" || fail "the live mount's container is gone"
	# the live mount still works
	run sbexec -m "$T/live" echo alive
	assert_eq "$output" alive
}

@test "a missing image is refused with one line naming it; nothing is created" {
	mkdir "$T/m"
	run sbfs -o "backend=docker,image=localhost/sbfs-no-such-image:x,log=$T/m.log" "$T/m"
	[ "$status" -ne 0 ]
	[ "$(wc -l <<<"$output")" -eq 1 ] || fail "not one line: $output"
	assert_output_has "localhost/sbfs-no-such-image:x"
	assert_output_has "pull"
	nothing_left_behind "$T/m"
	[[ -z $(docker ps -aq --filter label=sbfs=1 --filter ancestor=localhost/sbfs-no-such-image:x 2>/dev/null) ]]
}

@test "the container has no network, the limits asked for, the labels, and the spec's env" {
	mount_sbfs -o memory=96,cpu=0.5,pids=77,env=GREETING=hi,tag=team=qa
	assert_eq "$(docker inspect -f '{{.HostConfig.NetworkMode}}' "$SBFS_SANDBOX")" none
	assert_eq "$(docker inspect -f '{{.HostConfig.Memory}}' "$SBFS_SANDBOX")" $((96 * 1024 * 1024))
	assert_eq "$(docker inspect -f '{{.HostConfig.NanoCpus}}' "$SBFS_SANDBOX")" 500000000
	assert_eq "$(docker inspect -f '{{.HostConfig.PidsLimit}}' "$SBFS_SANDBOX")" 77
	assert_eq "$(docker_sandbox_label "$SBFS_SANDBOX" team)" qa
	assert_eq "$(docker_sandbox_label "$SBFS_SANDBOX" sbfs.owner.uid)" "$(id -u)"
	assert_eq "$(docker_sandbox_label "$SBFS_SANDBOX" sbfs.host)" "$(hostname)"
	run sbexec -m "$MNT" sh -c 'printf %s "$GREETING"'
	assert_eq "$output" hi
}

@test "a timed-out command dies in the container; the container survives" {
	mount_sbfs
	run timeout 60 sbexec -m "$MNT" -t 1 sh -c 'sleep 281.5 & sleep 282.5; echo not-killed'
	assert_status 124
	poll 10 bash -c "! docker top $SBFS_SANDBOX | grep -q 'sleep 28[12][.]5'" ||
		fail "the command (or its child) survived its timeout"
	run sbexec -m "$MNT" echo still-here
	assert_eq "$output" still-here
}

@test "counters: one archive upload per file written, one command per directory listed" {
	mount_sbfs
	mkdir -p "$T/src"
	for i in 1 2 3 4 5; do head -c $((i * 1000)) /dev/urandom >"$T/src/f$i"; done
	mkdir "$MNT/d1" "$MNT/d2" "$MNT/d3"
	w0=$(calls write)
	l0=$(calls list)
	f0=$(status_json | jq -r .shell_fallbacks)
	cp "$T/src"/f* "$MNT/d1/"
	w1=$(calls write)
	l1=$(calls list)
	f1=$(status_json | jq -r .shell_fallbacks)
	assert_eq "$((w1 - w0))" 5 "write calls for 5 files"
	# Listings are shell commands on docker; a slow machine may outlive
	# d1's fresh listing during cp, and its lookups then list d1 again.
	assert_eq "$((f1 - f0))" "$((l1 - l0))" "shell commands for 5 native uploads, besides listings"
	sbfs refresh "$MNT" >/dev/null
	stat "$MNT/d1" "$MNT/d2" "$MNT/d3" >/dev/null # the directories, not their listings
	l0=$(calls list)
	f0=$(status_json | jq -r .shell_fallbacks)
	ls -l "$MNT/d1" "$MNT/d2" "$MNT/d3" >/dev/null
	l1=$(calls list)
	f1=$(status_json | jq -r .shell_fallbacks)
	assert_eq "$((l1 - l0))" 3 "list calls for 3 directories"
	assert_eq "$((f1 - f0))" 3 "shell commands for 3 listings"
	for i in 1 2 3 4 5; do cmp "$T/src/f$i" "$MNT/d1/f$i"; done
	for i in 1 2 3 4 5; do
		assert_eq "$(sbexec -m "$MNT" sha256sum "$WS/d1/f$i" | cut -d' ' -f1)" \
			"$(sha256sum <"$T/src/f$i" | cut -d' ' -f1)" "f$i in the container"
	done
}

@test "uploads keep the mode and create missing parents inside the sandbox view" {
	mount_sbfs
	printf '#!/bin/sh\necho ran\n' >"$T/s.sh"
	chmod 0751 "$T/s.sh"
	mkdir -p "$MNT/a/b/c"
	cp -p "$T/s.sh" "$MNT/a/b/c/s.sh"
	assert_eq "$(sbexec -m "$MNT" stat -c %a "$WS/a/b/c/s.sh")" 751
	assert_eq "$(sbexec -m "$MNT" "$WS/a/b/c/s.sh")" ran
	name=$(printf 'n%.0s' $(seq 1 200))
	echo long >"$MNT/$name"
	assert_eq "$(sbexec -m "$MNT" cat "$WS/$name")" long
}
