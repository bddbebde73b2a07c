#!/bin/sh
# podman-down.sh DIR: stop the podman service that podman-up.sh started
# under DIR (its containers first), wait for the exec monitors (conmon)
# it left behind, and remove DIR, unmounting whatever podman left mounted
# under it. A second argument "keep-log" keeps DIR/service.log and removes
# the rest (used by podman-up.sh when it retries with another storage
# driver: podman refuses a graph root made by another driver).
set -u
DIR=${1:?usage: podman-down.sh DIR}
[ -d "$DIR" ] || exit 0
DIR=$(cd "$DIR" && pwd -P)
SOCK=$DIR/podman.sock
if [ -S "$SOCK" ]; then
	for id in $(curl -s --max-time 10 --unix-socket "$SOCK" 'http://d/containers/json?all=1' |
		tr ',' '\n' | sed -n 's/^[[{]*"Id":"\([0-9a-f]*\)".*/\1/p'); do
		curl -s --max-time 30 --unix-socket "$SOCK" -X DELETE "http://d/containers/$id?force=1&v=1" >/dev/null
	done
fi
if [ -f "$DIR/service.pid" ]; then
	p=$(cat "$DIR/service.pid")
	if kill -TERM "$p" 2>/dev/null; then
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$p" 2>/dev/null || true
	fi
fi
# What the service left running: conmons (one per container, two per exec
# for exit_command_delay seconds) and their exit commands, all of which
# are conmon or podman processes naming DIR on their command line. Give them the delay, then kill them by pid.
ours() {
	for c in /proc/[0-9]*/comm; do
		p=${c#/proc/}
		p=${p%/comm}
		comm=
		read -r comm <"$c" 2>/dev/null || continue
		case $comm in conmon | podman) ;; *) continue ;; esac
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$DIR/" && echo "$p"
	done
}
i=0
while [ -n "$(ours)" ] && [ $i -lt 80 ]; do sleep 0.1; i=$((i + 1)); done
for p in $(ours); do kill -KILL "$p" 2>/dev/null || true; done
# Containers the API could not remove: runc keeps their state under the
# service's private /run (DIR/ns/run/runc); kill and delete them there.
if [ -d "$DIR/ns/run/runc" ]; then
	for id in $(runc --root "$DIR/ns/run/runc" list -q 2>/dev/null); do
		runc --root "$DIR/ns/run/runc" kill -a "$id" KILL 2>/dev/null || true
		runc --root "$DIR/ns/run/runc" delete -f "$id" >/dev/null 2>&1 || true
	done
fi
# Leftover overlay/shm mounts under DIR and the short run root (and the
# bind mount podman puts on its own overlay dir), deepest first.
RUN=$(cat "$DIR/runroot.path" 2>/dev/null || true)
for pass in 1 2; do
	for d in "$DIR" ${RUN:+"$RUN"}; do
		awk -v d="$d/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
			while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	done
done
[ -n "$RUN" ] && rm -rf "$RUN"
if [ "${2:-}" = keep-log ]; then
	find "$DIR" -mindepth 1 -maxdepth 1 ! -name service.log -exec rm -rf {} +
	exit 0
fi
rm -rf "$DIR"
exit 0
