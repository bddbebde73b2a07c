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
	[[ -z ${PROXY:-} ]] || kill "$PROXY" 2>/dev/null || true
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
	run timeout 60 sbexec -m "$MNT" --timeout 1 sh -c 'sleep 281.5 & sleep 282.5; echo not-killed'
	assert_status 124
	poll 10 bash -c "! docker top $SBFS_SANDBOX | grep -q 'sleep 28[12][.]5'" ||
		fail "the command (or its child) survived its timeout"
	run sbexec -m "$MNT" echo still-here
	assert_eq "$output" still-here
}

@test "an engine too slow to confirm an upload fails that upload, never the sandbox; sync lands it" {
	[[ ${DOCKER_HOST:-} == unix://* ]] || skip "needs the engine on a unix socket (DOCKER_HOST=${DOCKER_HOST:-})"
	python3 "$SBFS_REPO/tests/tools/delay_proxy.py" "$T/slow.sock" "${DOCKER_HOST#unix://}" "$T/hold" &
	PROXY=$!
	poll 10 test -S "$T/slow.sock" || fail "the delaying proxy did not start"
	DOCKER_HOST=unix://$T/slow.sock mount_sbfs -o call_timeout=4
	echo first >"$MNT/a" || fail "an upload with the engine answering at once failed"
	# the inspect after the archive upload, held past the call's deadline
	echo 'GET \S*/containers/\S+/json 8' >"$T/hold"
	echo second >"$T/b"
	run cp "$T/b" "$MNT/b" # cp, unlike a shell's redirection, reports close()
	[[ $status -ne 0 && $output == *"timed out"* ]] || fail "the write through a held check did not fail: $status $output"
	grep -q /containers/ "$T/hold.held" || fail "no inspect was held"
	# still held: the release's own upload cannot land /b meanwhile
	run sbfs status --json "$MNT"
	rm "$T/hold"
	assert_eq "$(jq -r .state <<<"$output")" running "state after a slow check"
	assert_eq "$(jq -r '.pending_uploads[0].path' <<<"$output")" /b "pending upload"
	run sbfs sync "$MNT"
	assert_status 0
	assert_eq "$(sbexec -m "$MNT" cat $WS/a $WS/b)" $'first\nsecond'
	kill "$PROXY"
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

@test "no DOCKER_HOST: the docker CLI's context, else a rootless engine's socket; an unknown context is one line" {
	[[ $DOCKER_HOST == unix://* ]] || skip "the test engine is not on a unix socket"
	# a context as `docker context create sbfs-test --docker host=...`
	# writes it: meta/<digest>/meta.json, named by its Name field
	mkdir -p "$T/dcfg/contexts/meta/5f1d3a"
	printf '{"Name":"sbfs-test","Metadata":{},"Endpoints":{"docker":{"Host":"%s","SkipTLSVerify":false}}}' \
		"$DOCKER_HOST" >"$T/dcfg/contexts/meta/5f1d3a/meta.json"
	echo '{"currentContext":"sbfs-test"}' >"$T/dcfg/config.json"
	DOCKER_HOST='' DOCKER_CONFIG=$T/dcfg mount_sbfs -n ctx
	grep -qF "(docker at $DOCKER_HOST (docker context sbfs-test)) mounted" "$T/ctx.log" ||
		fail "not the context's engine: $(cat "$T/ctx.log")"
	assert_eq "$(sbexec -m "$T/ctx" echo via-context)" via-context
	# DOCKER_CONTEXT names one that is not there
	mkdir -p "$T/nope"
	DOCKER_HOST='' DOCKER_CONFIG=$T/dcfg DOCKER_CONTEXT=nope run sbfs -o "backend=docker,$(backend_mount_opts)" "$T/nope"
	assert_status 1
	assert_output_has "docker context 'nope' (from DOCKER_CONTEXT) is not in $T/dcfg/contexts; see \`docker context ls\`, or set DOCKER_HOST"
	not_mounted "$T/nope"
	# no context: a rootless engine's socket in XDG_RUNTIME_DIR comes first
	mkdir -p "$T/xdg" "$T/empty"
	ln -s "${DOCKER_HOST#unix://}" "$T/xdg/docker.sock"
	DOCKER_HOST='' DOCKER_CONFIG=$T/empty XDG_RUNTIME_DIR=$T/xdg mount_sbfs -n rootless
	assert_eq "$(sbfs status --json "$T/rootless" | jq -r .endpoint)" "unix://$T/xdg/docker.sock"
	grep -qF "(docker at unix://$T/xdg/docker.sock) mounted" "$T/rootless.log" ||
		fail "not the rootless socket: $(cat "$T/rootless.log")"
	assert_eq "$(sbexec -m "$T/rootless" echo via-xdg)" via-xdg
}
