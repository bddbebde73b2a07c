#!/bin/sh
# engine-up.sh DIR: start a private dockerd whose whole state lives under
# DIR (data root, exec root, pidfile, socket), wait until it answers, and
# import a small busybox-static image through the API, without any
# registry. Installs nothing: needs dockerd (Debian docker.io), curl and
# busybox-static. Prints DOCKER_HOST=... and SBFS_DOCKER_IMAGE=... lines
# that a caller can eval.
set -eu
DIR=${1:?usage: engine-up.sh DIR}
IMAGE=${SBFS_DOCKER_IMAGE:-localhost/sbfs-test:bb}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
SOCK=$DIR/docker.sock
BUSYBOX=$(command -v busybox || true)
for t in dockerd curl tar; do
	command -v "$t" >/dev/null || { echo "engine-up: $t is not installed (apt-get install docker.io curl)" >&2; exit 1; }
done
[ -n "$BUSYBOX" ] || { echo "engine-up: busybox is not installed (apt-get install busybox-static)" >&2; exit 1; }

api() { curl -sS --max-time 60 --unix-socket "$SOCK" "$@"; }

# start DRIVER: one dockerd; 0 once /_ping answers, 1 if it died.
start() {
	rm -f "$SOCK"
	mkdir -p "$DIR/data" "$DIR/exec"
	# No iptables, bridge or NAT: sbfs containers use NetworkMode none,
	# and this must not touch the host's network configuration.
	dockerd --host "unix://$SOCK" --data-root "$DIR/data" \
		--exec-root "$DIR/exec" --pidfile "$DIR/dockerd.pid" \
		--iptables=false --ip6tables=false --ip-forward=false \
		--ip-masq=false --bridge=none --storage-driver="$1" \
		>>"$DIR/dockerd.log" 2>&1 &
	echo $! >"$DIR/dockerd.launcher.pid"
	i=0
	until curl -sf --max-time 2 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; do
		kill -0 "$(cat "$DIR/dockerd.launcher.pid")" 2>/dev/null || return 1
		i=$((i + 1))
		[ $i -lt 300 ] || return 1
		sleep 0.1
	done
}

if [ -S "$SOCK" ] && curl -sf --max-time 2 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; then
	: # already up
elif ! start overlay2; then
	echo "engine-up: dockerd with overlay2 failed; retrying with vfs" >&2
	"$(dirname "$0")/engine-down.sh" "$DIR" keep-log >/dev/null 2>&1 || true
	start vfs || { tail -n 30 "$DIR/dockerd.log" >&2; echo "engine-up: dockerd did not start (log: $DIR/dockerd.log)" >&2; exit 1; }
fi

if ! api -f "http://d/images/$IMAGE/json" >/dev/null 2>&1; then
	repo=${IMAGE%:*}
	tag=${IMAGE##*:}
	"$(dirname "$0")/busybox-rootfs.sh" "$DIR/rootfs.tar"
	out=$(api -X POST -H 'Content-Type: application/x-tar' --data-binary "@$DIR/rootfs.tar" \
		"http://d/images/create?fromSrc=-&repo=$repo&tag=$tag")
	rm -f "$DIR/rootfs.tar"
	api -f "http://d/images/$IMAGE/json" >/dev/null 2>&1 ||
		{ echo "engine-up: image import failed: $out" >&2; exit 1; }
fi
echo "DOCKER_HOST=unix://$SOCK"
echo "SBFS_DOCKER_IMAGE=$IMAGE"
