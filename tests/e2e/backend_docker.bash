# Hooks for the docker backend, for tests that must reach the sandbox from
# outside sbfs (kill it, check it is gone, clean up an orphan). The sandbox
# id sbfs reports for docker is the container name (sbfs-<random>). Uses
# the docker CLI (Debian's docker.io has it) against $DOCKER_HOST.

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
