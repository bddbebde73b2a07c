#!/bin/sh
# podman-up.sh DIR: start a private rootful Podman service (the Docker
# Engine API of `podman system service`) whose whole state lives under DIR:
# its own containers.conf and storage.conf (CONTAINERS_CONF,
# CONTAINERS_STORAGE_CONF), graph root, run root, tmp dir, network config
# and socket; it runs in a private mount namespace whose /run and /var/lib
# are dirs under DIR, so the system's /var/lib/containers, /run/containers
# and /run/runc are never touched and /etc/containers is only read. Waits until it answers and imports the
# same small busybox-static image as engine-up.sh, without any registry.
# Installs nothing: needs root, podman (Debian podman), runc, curl and
# busybox-static (and util-linux's unshare). Prints DOCKER_HOST=... and SBFS_DOCKER_IMAGE=... lines
# that a caller can eval. Stop it with podman-down.sh DIR.
#
# Workarounds this VM class needs (shared protocol notes, docker-engine.md):
#   runc, not crun: crun 1.8 refuses hybrid cgroups ("drop all controllers
#     from cgroupv2");
#   rlimits no higher than the hard ones: podman asks for nofile/nproc
#     1048576 by default, which needs CAP_SYS_RESOURCE;
#   exit_command_delay = 5: otherwise every exec leaves two conmons alive
#     for 300 s, and a suite of thousands of execs runs out of pids.
set -eu
DIR=${1:?usage: podman-up.sh DIR}
IMAGE=${SBFS_DOCKER_IMAGE:-localhost/sbfs-test:bb}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
SOCK=$DIR/podman.sock
BUSYBOX=$(command -v busybox || true)
for t in podman runc curl tar unshare; do
	command -v "$t" >/dev/null ||
		{ echo "podman-up: $t is not installed (apt-get install podman runc curl)" >&2; exit 1; }
done
[ -n "$BUSYBOX" ] || { echo "podman-up: busybox is not installed (apt-get install busybox-static)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "podman-up: needs root (a rootful podman service)" >&2; exit 1; }

export CONTAINERS_CONF="$DIR/containers.conf"
export CONTAINERS_STORAGE_CONF="$DIR/storage.conf"
# rootful podman reads the registries' config but never needs a registry
# Podman refuses a run root longer than 50 characters and DIR may be deep
# (CI's TMPDIR), so the run root is a short folder of its own, named in
# DIR for podman-down.sh.
if [ -s "$DIR/runroot.path" ]; then
	RUN=$(cat "$DIR/runroot.path")
else
	RUN=$(mktemp -d /tmp/sbfs-pm.XXXXXX)
	echo "$RUN" >"$DIR/runroot.path"
fi
PODMAN="podman --root $DIR/storage --runroot $RUN --tmpdir $DIR/libpod"

# config DRIVER: write containers.conf and storage.conf for one storage driver
config() {
	nofile=$(ulimit -Hn)
	[ "$nofile" = unlimited ] && nofile=1048576
	[ "$nofile" -gt 1048576 ] && nofile=1048576
	mkdir -p "$DIR/storage" "$RUN" "$DIR/libpod" "$DIR/networks" "$DIR/volumes"
	cat >"$DIR/containers.conf" <<-EOF
		[containers]
		default_ulimits = ["nofile=$nofile:$nofile", "nproc=4096:4096"]
		[network]
		network_config_dir = "$DIR/networks"
		[engine]
		runtime = "runc"
		cgroup_manager = "cgroupfs"
		events_logger = "file"
		events_logfile_path = "$DIR/libpod/events.log"
		exit_command_delay = 5
		tmp_dir = "$DIR/libpod"
		static_dir = "$DIR/storage/libpod"
		volume_path = "$DIR/volumes"
	EOF
	cat >"$DIR/storage.conf" <<-EOF
		[storage]
		driver = "$1"
		graphroot = "$DIR/storage"
		runroot = "$RUN"
	EOF
}

# start DRIVER: one service; 0 once /_ping answers and the image is there
start() {
	config "$1"
	rm -f "$SOCK"
	# Its own mount namespace, with /run and /var/lib replaced by dirs
	# under DIR: podman 4.3 still writes a few fixed paths (the netavark
	# run dir /run/containers/networks, the blob-info cache under
	# /var/lib/containers/cache on import), and runc keeps its state in
	# /run/runc. Container mounts stay in that namespace too, and vanish
	# with the service and its conmons. Slave, not private: the namespace
	# copies every mount the host has now, sbfs mounts included, and a
	# private copy would keep an unmounted FUSE filesystem alive (its
	# daemon would never see the unmount); as a slave it follows the
	# host's unmounts, and nothing it mounts reaches the host.
	mkdir -p "$DIR/ns/run" "$DIR/ns/var-lib"
	unshare --mount --propagation slave sh -c '
		mount --bind "$1/ns/run" /run && mount --bind "$1/ns/var-lib" /var/lib &&
		shift && exec "$@"' sh "$DIR" \
		$PODMAN --storage-driver "$1" system service --time=0 "unix://$SOCK" \
		>>"$DIR/service.log" 2>&1 &
	echo $! >"$DIR/service.pid"
	i=0
	until curl -sf --max-time 2 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; do
		kill -0 "$(cat "$DIR/service.pid")" 2>/dev/null || return 1
		i=$((i + 1))
		[ $i -lt 300 ] || return 1
		sleep 0.1
	done
	curl -sf --max-time 60 --unix-socket "$SOCK" "http://d/images/$IMAGE/json" >/dev/null 2>&1 &&
		return 0
	"$(dirname "$0")/busybox-rootfs.sh" "$DIR/rootfs.tar" || return 1
	# through the API, as engine-up.sh: podman ignores tag=, so the tag
	# goes into repo= as well
	out=$(curl -sS --max-time 120 --unix-socket "$SOCK" -X POST \
		-H 'Content-Type: application/x-tar' --data-binary "@$DIR/rootfs.tar" \
		"http://d/images/create?fromSrc=-&repo=$IMAGE") || true
	rm -f "$DIR/rootfs.tar"
	curl -sf --max-time 60 --unix-socket "$SOCK" "http://d/images/$IMAGE/json" >/dev/null 2>&1 ||
		{ echo "podman-up: image import failed: $out" >&2; return 1; }
}

if [ -S "$SOCK" ] && curl -sf --max-time 2 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1 &&
	curl -sf --max-time 10 --unix-socket "$SOCK" "http://d/images/$IMAGE/json" >/dev/null 2>&1; then
	: # already up
elif ! start overlay; then
	echo "podman-up: podman with overlay failed; retrying with vfs" >&2
	"$(dirname "$0")/podman-down.sh" "$DIR" keep-log >/dev/null 2>&1 || true
	start vfs || { tail -n 30 "$DIR/service.log" >&2; echo "podman-up: the podman service did not start (log: $DIR/service.log)" >&2; exit 1; }
fi
echo "DOCKER_HOST=unix://$SOCK"
echo "SBFS_DOCKER_IMAGE=$IMAGE"
