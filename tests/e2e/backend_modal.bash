# Hooks for the modal backend (contract: backend_local.bash). The id sbfs
# reports for modal is the sandbox's name (sbfs-<random>) in app "sbfs".
# They talk to whatever MODAL_SERVER_URL names (the fake in CI) with the
# MODAL_TOKEN_* in the environment, through tests/fakes/modal/fake_ctl.py
# (python3-grpcio). tests/run starts the fake unless MODAL_SERVER_URL is set:
# plaintext here, TLS with a CA of its own for the modal-tls entry
# (backend_modal-tls.bash sets MODAL_FAKE_MODE=tls), that CA given to every
# mount with -o ca_file= and to fake_ctl.py as FAKE_MODAL_CA.

MODAL_CTL=${MODAL_CTL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../fakes/modal" && pwd)/fake_ctl.py}
MODAL_FAKE_MODE=${MODAL_FAKE_MODE:-plain}

backend_sbfs_name() { echo modal; }

backend_up() {
	local state=$1
	if [[ -n ${MODAL_SERVER_URL:-} ]]; then
		export MODAL_SERVER_URL
		return 0
	fi
	MODAL_SERVER_URL=$("$SBFS_REPO/tests/fakes/modal/run-fake.sh" "$state" "$MODAL_FAKE_MODE") || return 1
	export MODAL_SERVER_URL MODAL_TOKEN_ID=ak-fake MODAL_TOKEN_SECRET=as-fake
	[[ $MODAL_FAKE_MODE != tls ]] || export FAKE_MODAL_CA=$state/tls/ca.pem
	export SBFS_FAKE_MODAL_STATE=$state
	touch "$state/started-by-us"
}

backend_down() {
	local state=$1
	[[ -e $state/started-by-us ]] || return 0
	"$SBFS_REPO/tests/fakes/modal/stop-fake.sh" "$state" >/dev/null 2>&1 || true
	rm -f "$state/started-by-us"
}

backend_test_setup() { :; }
# over TLS the fake's CA is given as a user's own server's would be
backend_mount_opts() { [[ -z ${FAKE_MODAL_CA:-} ]] || echo "ca_file=$FAKE_MODAL_CA"; }
backend_sandbox_kill() { modal_sandbox_kill "$(cat "$1/sandbox")"; }
backend_sandbox_gone() { modal_sandbox_gone "$(cat "$1/sandbox")"; }
backend_sandbox_destroy() { modal_sandbox_cleanup "$(cat "$1/sandbox")"; }
# the gone checks ask the API by name: they prove something as they are
backend_sandbox_exists() { modal_sandbox_exists "$1"; }
backend_sweep_opts() { echo "backend=modal${FAKE_MODAL_CA:+,ca_file=$FAKE_MODAL_CA}"; }
backend_stat_has_nlink() { return 1; }
backend_upload_keeps_inode() { return 0; }
backend_has_sandbox() { :; }
backend_workspaces_left() { :; }
backend_workspaces_count() { :; }
backend_sweep() { timeout 120 sbfs sweep -o "$(backend_sweep_opts)" >/dev/null 2>&1 || true; }
# the fake's real token is what the daemon must keep to itself
backend_vendor_secret() { echo "$MODAL_TOKEN_SECRET"; }
# The fake Modal binds the host's /etc into its sandboxes itself (a real
# Modal sandbox has its own image).
backend_shares_host_etc() { return 0; }
backend_upload_keeps_mtime() { return 1; }
backend_upload_sets_mtime() { return 1; }
backend_sandbox_stopped() { backend_sandbox_gone "$1"; }
backend_lists_natively() { return 1; }
# Modal is asked for an ephemeral disk of that size (modal.bats)
backend_disk_limit() { echo vendor; }
backend_disk_refusal() { :; }
backend_host_workspace() { :; }
# a watcher inside the sandbox (sbfs-guest-watch); refused with shell_ops
backend_watches_changes() { [[ ${SBFS_TEST_OPTS:-} != *shell_ops* ]]; }
# the fake runs a sandbox in a bwrap over directories of the host
backend_behind() {
	[[ -n ${SBFS_FAKE_MODAL_STATE:-} ]] || return 1
	(cd "$SBFS_FAKE_MODAL_STATE/sandboxes/$("$MODAL_CTL" id "$SBFS_SANDBOX")/workspace" && sh -c "$1")
}

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
# sbexec -t runs on Modal's own pty (TaskExecStart pty_info).
backend_exec_tty() { return 0; }
# Modal has no call that resizes a running command's terminal: it keeps the
# size it started with (backends/modal/modal_pty.c).
backend_exec_tty_resize() { return 1; }
