# Hooks for the docker backend against a private rootful Podman service
# (tests/docker/podman-up.sh; Debian podman, runc, busybox-static) instead
# of dockerd. Everything but the engine is the docker backend's.

BACKEND_DOCKER_ENGINE=podman
# shellcheck source=backend_docker.bash
source "$(dirname "${BASH_SOURCE[0]}")/backend_docker.bash"
