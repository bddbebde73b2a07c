#!/usr/bin/env bats
# What the sandbox is: isolated from the host and from other mounts; no
# network unless asked; env only from the spec.

load helpers

WS=/workspace

# setup and teardown: the usual ones, from helpers.bash

# sandbox_ifaces: network interfaces the sandbox sees, sorted, one a line.
sandbox_ifaces() {
	sb sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | sort'
}

@test "no network by default: only loopback" {
	run sandbox_ifaces
	assert_status 0
	assert_eq "$output" lo
}

@test "-o network: the sandbox shares the host's network" {
	require_backend local
	mount_sbfs -n net -o network
	run sandbox_ifaces
	assert_status 0
	host=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort)
	assert_eq "$output" "$host"
}

@test "local: host /usr and /etc are visible read-only" {
	require_backend local
	run sb test -x /usr/bin/env
	assert_status 0
	run sb touch /usr/sbfs-probe
	[ "$status" -ne 0 ]
	run sb touch /etc/sbfs-probe
	[ "$status" -ne 0 ]
	[ ! -e /usr/sbfs-probe ]
	[ ! -e /etc/sbfs-probe ]
}

@test "local: no /home, and the host's /tmp is not the sandbox's /tmp" {
	require_backend local
	run sb test -e /home/.
	[ "$status" -ne 0 ] || {
		run sb ls -A /home
		assert_eq "$output" "" "/home in the sandbox"
	}
	echo host-secret >"$T/host-file"
	run sb test -e "$T/host-file"
	[ "$status" -ne 0 ] || fail "the sandbox sees the host's $T"
	sb sh -c 'echo sandbox > /tmp/sbfs-inside-only'
	[ ! -e /tmp/sbfs-inside-only ] || fail "sandbox /tmp is the host's"
}

@test "the sandbox has its own pid namespace" {
	run sb sh -c 'ls /proc | grep -c "^[0-9]"'
	assert_status 0
	host=$(ls /proc | grep -c '^[0-9]')
	((output < host)) || fail "sandbox sees $output pids, host has $host"
	run sb sh -c 'test ! -e /proc/'"$SBFS_PID"'/exe || ! readlink /proc/'"$SBFS_PID"'/exe | grep -q sbfs'
	assert_status 0
}

@test "two mounts are two sandboxes" {
	echo in-a >"$MNT/only-a"
	sb sh -c 'echo a > /tmp/sbfs-a'
	A=$MNT
	mount_sbfs -n b
	[ ! -e "$MNT/only-a" ]
	run sb test -e "$WS/only-a"
	assert_status 1
	run sb test -e /tmp/sbfs-a
	assert_status 1
	[ "$(status_json "$A" | jq -r .sandbox)" != "$(status_json | jq -r .sandbox)" ]
}

@test "workdir=: the mount root maps to another sandbox directory" {
	mount_sbfs -n wd -o workdir=/srv/work
	cd "$MNT"
	assert_eq "$(sbexec pwd)" /srv/work
	echo x >"$MNT/f"
	assert_eq "$(sbexec cat /srv/work/f)" x
}
