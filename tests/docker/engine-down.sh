#!/bin/sh
# engine-down.sh DIR: stop the dockerd that engine-up.sh started under DIR
# (its containers first) and remove DIR, unmounting whatever the engine
# left mounted under it. A second argument "keep-log" keeps DIR (used by
# engine-up.sh when it retries with another storage driver).
set -u
DIR=${1:?usage: engine-down.sh DIR}
[ -d "$DIR" ] || exit 0
DIR=$(cd "$DIR" && pwd -P)
SOCK=$DIR/docker.sock
if [ -S "$SOCK" ]; then
	for id in $(curl -s --max-time 10 --unix-socket "$SOCK" 'http://d/containers/json?all=1' |
		tr ',' '\n' | sed -n 's/^[[{]*"Id":"\([0-9a-f]*\)".*/\1/p'); do
		curl -s --max-time 30 --unix-socket "$SOCK" -X DELETE "http://d/containers/$id?force=1&v=1" >/dev/null
	done
fi
for f in dockerd.pid dockerd.launcher.pid exec/containerd/containerd.pid; do
	[ -f "$DIR/$f" ] || continue
	p=$(cat "$DIR/$f")
	kill -TERM "$p" 2>/dev/null || continue
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
	kill -KILL "$p" 2>/dev/null || true
done
# (containerd, started by dockerd under the exec root, exits with it; its
# pidfile is in the list above in case dockerd was killed hard.)
# Leftover overlay/shm/netns mounts under DIR, deepest first.
awk -v d="$DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
	while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
[ "${2:-}" = keep-log ] && exit 0
rm -rf "$DIR"
exit 0
