# Hooks for the e2b backend (contract: backend_local.bash). The id sbfs
# reports for e2b is its own name for the sandbox (sbfs-<random>, kept in
# the sandbox's metadata); fake_ctl.py turns it into the E2B id. tests/run starts our fake E2B
# (tests/fakes/e2b) on loopback: plain HTTP here, TLS with its own CA for
# the e2b-tls entry (backend_e2b-tls.bash sets E2B_FAKE_MODE=tls). The
# hooks reach it through tests/fakes/e2b/fake_ctl.py, over the same
# control-plane API a user's tools would use.

E2B_CTL=${E2B_CTL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../fakes/e2b" && pwd)/fake_ctl.py}
E2B_FAKE_MODE=${E2B_FAKE_MODE:-plain}

backend_sbfs_name() { echo e2b; }

backend_up() {
	local state=$1 line
	local out
	out=$("$SBFS_REPO/tests/fakes/e2b/run-fake.sh" "$state" "$E2B_FAKE_MODE") || return 1
	while IFS= read -r line; do
		# shellcheck disable=SC2163
		export "$line"
	done <<<"$out"
	if [[ $E2B_FAKE_MODE == tls ]]; then
		# E2B_DOMAIN alone names both planes, as for a self-hosted cluster
		export E2B_API_URL= E2B_SANDBOX_URL=
	fi
	export FAKE_E2B_STATE=$state
	touch "$state/started-by-us"
}

backend_down() {
	local state=$1
	[[ -e $state/started-by-us ]] || return 0
	"$SBFS_REPO/tests/fakes/e2b/stop-fake.sh" "$state" >/dev/null 2>&1 || true
	rm -f "$state/started-by-us"
}

backend_test_setup() { :; }
# over TLS the fake's CA is given as a self-hosted cluster's would be
backend_mount_opts() { [[ -z ${FAKE_E2B_CA:-} ]] || echo "ca_file=$FAKE_E2B_CA"; }
backend_sandbox_kill() { "$E2B_CTL" kill "$(cat "$1/sandbox")"; }
backend_sandbox_gone() { ! "$E2B_CTL" running "$(cat "$1/sandbox")" 2>/dev/null; }
backend_sandbox_destroy() {
	local id
	id=$(cat "$1/sandbox" 2>/dev/null) || return 0
	[[ -n $id ]] && "$E2B_CTL" kill "$id" >/dev/null 2>&1 || true
}
# the gone checks ask the API: they prove something as they are
backend_sandbox_exists() { "$E2B_CTL" running "$1" 2>/dev/null; }
backend_sweep_opts() { echo "backend=e2b${FAKE_E2B_CA:+,ca_file=$FAKE_E2B_CA}"; }
# ListDir and Stat do not give a directory's link count
backend_stat_has_nlink() { return 1; }
# envd's upload opens the target with O_TRUNC: the same inode
backend_upload_keeps_inode() { return 0; }
backend_has_sandbox() { :; }
backend_workspaces_left() { :; }
backend_workspaces_count() { :; }
backend_sweep() { timeout 120 sbfs sweep -o "$(backend_sweep_opts)" >/dev/null 2>&1 || true; }
# the key that creates sandboxes is what the daemon must keep to itself
backend_vendor_secret() { echo "$E2B_API_KEY"; }
# The fake binds the host's /etc into its sandboxes (a real E2B sandbox
# has its template's own).
backend_shares_host_etc() { return 0; }
# envd's upload has no mtime: the file gets the time it was written
backend_upload_keeps_mtime() { return 1; }
backend_upload_sets_mtime() { return 1; }
backend_sandbox_stopped() { backend_sandbox_gone "$1"; }
# ListDir is envd's own call
backend_lists_natively() { return 0; }
# E2B sizes sandboxes by template only: disk= is refused
backend_disk_limit() { echo refused; }
backend_disk_refusal() {
	echo "E2B sizes a sandbox by its template, not per sandbox: drop cpu=/memory=/disk= or pick a template (-o template=) built with them"
}
# the fake keeps a sandbox's files in a directory of the host
backend_host_workspace() {
	[[ -n ${SBFS_SANDBOX:-} && -n ${FAKE_E2B_STATE:-} ]] || return 0
	echo "$FAKE_E2B_STATE/sandboxes/$("$E2B_CTL" id "$SBFS_SANDBOX")/fs/workspace"
}
# a watcher inside the sandbox (sbfs-guest-watch); refused with shell_ops
backend_watches_changes() { [[ ${SBFS_TEST_OPTS:-} != *shell_ops* ]]; }
# the fake runs commands in a bwrap whose root is its directory of the host
backend_behind() { (cd "$(backend_host_workspace)" && sh -c "$1"); }
# The fake E2B makes 20,000 files in one command in about 20 s on an idle
# machine and in over 300 s on CI's loaded one (security.bats scales down).
backend_bulk_files_fast() { return 1; }
# Signals reach the command's processes by its marker, from a second
# process (envd's SendSignal has only TERM and KILL).
backend_exec_signals() { return 0; }
# sbexec -t runs the command on envd's own PTY.
backend_exec_tty() { return 0; }
