# Hooks for the docker backend (contract: backend_local.bash). The sandbox
# id sbfs reports for docker is the container name (sbfs-<random>). Uses
# the docker CLI (Debian's docker.io has it) against $DOCKER_HOST; tests/run
# starts a private dockerd (tests/docker/engine-up.sh) unless
# SBFS_DOCKER_IMAGE and DOCKER_HOST name an engine and image already.

BACKEND_DOCKER_ENGINE=${BACKEND_DOCKER_ENGINE:-engine}

backend_sbfs_name() { echo docker; }

backend_up() {
	local state=$1 out
	if [[ -n ${SBFS_DOCKER_IMAGE:-} ]]; then
		export DOCKER_HOST SBFS_DOCKER_IMAGE
		return 0
	fi
	out=$("$SBFS_REPO/tests/docker/$BACKEND_DOCKER_ENGINE-up.sh" "$state") || return 1
	eval "$out"
	export DOCKER_HOST SBFS_DOCKER_IMAGE
	touch "$state/started-by-us"
}

backend_down() {
	local state=$1
	[[ -e $state/started-by-us ]] || return 0
	"$SBFS_REPO/tests/docker/$BACKEND_DOCKER_ENGINE-down.sh" "$state" >/dev/null 2>&1 || true
	rm -f "$state/started-by-us"
}

backend_test_setup() { :; }
backend_mount_opts() { echo "image=$SBFS_DOCKER_IMAGE"; }
backend_sandbox_kill() { docker_sandbox_kill "$(cat "$1/sandbox")"; }
backend_sandbox_gone() { docker_sandbox_gone "$(cat "$1/sandbox")"; }
backend_sandbox_destroy() { docker_sandbox_cleanup "$(cat "$1/sandbox")"; }
# the gone checks ask the engine by name: they prove something as they are
backend_sandbox_exists() { docker_sandbox_exists "$1"; }
backend_sweep_opts() { echo "backend=docker"; }
backend_stat_has_nlink() { return 1; }
backend_upload_keeps_inode() { return 1; }
backend_has_sandbox() { :; }
backend_workspaces_left() { :; }
backend_workspaces_count() { :; }
backend_sweep() { timeout 120 sbfs sweep -o backend=docker >/dev/null 2>&1 || true; }
backend_vendor_secret() { :; }
backend_shares_host_etc() { return 1; }
backend_upload_keeps_mtime() { return 1; }
# the archive's header carries whole seconds
backend_upload_sets_mtime() { return 0; }
# a killed container is stopped, not removed
backend_sandbox_stopped() {
	[[ $(docker inspect -f '{{.State.Running}}' "$(cat "$1/sandbox")" 2>/dev/null) != true ]]
}
backend_lists_natively() { return 1; }
# this suite's engines have no storage driver that takes a size
backend_disk_limit() { echo refused; }
backend_disk_refusal() { echo "cannot enforce disk= (its storage driver has no size limit here: "; }
backend_host_workspace() { :; }
# a watcher inside the container (sbfs-guest-watch); refused with shell_ops
backend_watches_changes() { [[ ${SBFS_TEST_OPTS:-} != *shell_ops* ]]; }
backend_behind() { docker exec -w /workspace "$SBFS_SANDBOX" sh -c "$1"; }

# docker_sandbox_kill ID: SIGKILL the container, as a crash would.
docker_sandbox_kill() {
	docker kill "$1" >/dev/null
}

# docker_sandbox_exists ID: 0 while a container of that name exists
# (running or not). dockerd matches the filter against "/NAME", Podman
# against "NAME".
docker_sandbox_exists() {
	[[ -n $(docker ps -aq --filter "name=^/?${1}\$" 2>/dev/null) ]]
}

# docker_sandbox_gone ID: 0 once no container of that name exists.
docker_sandbox_gone() {
	! docker_sandbox_exists "$1"
}

# docker_sandbox_label ID KEY: the value of one label of the container.
docker_sandbox_label() {
	docker inspect -f "{{index .Config.Labels \"$2\"}}" "$1"
}

# docker_sandbox_cleanup ID: remove a container a test left behind on
# purpose (after kill -9 of its daemon); quiet if it is already gone.
docker_sandbox_cleanup() {
	[[ -n $1 ]] && docker rm -f "$1" >/dev/null 2>&1 || true
}
