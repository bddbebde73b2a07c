# Hooks for the modal backend, for tests that must reach the sandbox from
# outside sbfs (kill it, check it is gone). The id sbfs reports for modal is
# the sandbox's name (sbfs-<random>) in app "sbfs". They talk to whatever
# MODAL_SERVER_URL names (the fake in CI) with the MODAL_TOKEN_* in the
# environment, through tests/fakes/modal/fake_ctl.py (python3-grpcio).

MODAL_CTL=${MODAL_CTL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../fakes/modal" && pwd)/fake_ctl.py}

# modal_sandbox_kill ID: terminate the sandbox, as its lifetime ending or
# the Modal dashboard would.
modal_sandbox_kill() {
	"$MODAL_CTL" terminate "$1"
}

# modal_sandbox_exists ID: 0 while the sandbox runs.
modal_sandbox_exists() {
	"$MODAL_CTL" running "$1" 2>/dev/null
}

# modal_sandbox_gone ID: 0 once it is terminated or unknown.
modal_sandbox_gone() {
	! modal_sandbox_exists "$1"
}

# modal_sandbox_cleanup ID: terminate a sandbox a test left behind on
# purpose (after kill -9 of its daemon); quiet if it is already gone.
modal_sandbox_cleanup() {
	[[ -n $1 ]] && "$MODAL_CTL" terminate "$1" >/dev/null 2>&1 || true
}
