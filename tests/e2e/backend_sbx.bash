# Hooks for the sbx backend (contract: backend_local.bash). The id sbfs
# reports for sbx is the sandbox's sbx name (sbfs-<random>). tests/run
# puts our fake sbx (tests/fakes/sbx) first in PATH, with its state in the
# suite's state dir, and declares the machine's policy deny-all there
# (`sbx policy init deny-all`), as a user of the backend does once; every
# mount says so with -o host_network_policy=deny-all. The hooks act on the
# fake through tests/fakes/sbx/fake_ctl, as a crash or the owner would.

SBX_FAKE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../fakes/sbx" && pwd)
SBX_CTL=$SBX_FAKE_DIR/fake_ctl

backend_sbfs_name() { echo sbx; }

backend_up() {
	local state=$1
	command -v bwrap >/dev/null || { echo "the fake sbx needs bwrap (apt-get install bubblewrap)" >&2; return 1; }
	command -v jq >/dev/null || { echo "the fake sbx needs jq" >&2; return 1; }
	command -v python3 >/dev/null || { echo "the fake sbx needs python3 (its exec -t)" >&2; return 1; }
	mkdir -p "$state/sbx" "$state/xdg-state"
	export SBX_FAKE_STATE=$state/sbx
	# sbfs's records of its sandboxes (for sweep) stay in the suite's dir
	export XDG_STATE_HOME=$state/xdg-state
	export PATH=$SBX_FAKE_DIR:$PATH
	sbx policy init deny-all
}

backend_down() {
	local state=$1 d
	[[ -d $state/sbx/boxes ]] || return 0
	# sandboxes a crashed test left: their VMs are processes of the host
	for d in "$state"/sbx/boxes/*/; do
		[[ -d $d ]] && SBX_FAKE_STATE=$state/sbx "$SBX_FAKE_DIR/sbx" rm -f "$(basename "$d")" >/dev/null 2>&1
	done
	return 0
}

backend_test_setup() { :; }
backend_mount_opts() { echo "host_network_policy=deny-all"; }
backend_sandbox_kill() { "$SBX_CTL" kill "$(cat "$1/sandbox")"; }
backend_sandbox_gone() { ! "$SBX_CTL" exists "$(cat "$1/sandbox")"; }
# as a user would: sbfs destroy also removes sbfs's record and the
# sandbox's workspace directory (sbx rm alone leaves them to a sweep)
backend_sandbox_destroy() {
	local id
	id=$(cat "$1/sandbox" 2>/dev/null) || return 0
	[[ -n $id ]] || return 0
	timeout 120 sbfs destroy -o backend=sbx "$id" >/dev/null 2>&1 ||
		sbx rm -f "$id" >/dev/null 2>&1 || true
}
# the gone checks ask sbx: they prove something as they are
backend_sandbox_exists() { "$SBX_CTL" exists "$1"; }
backend_sweep_opts() { echo "backend=sbx"; }
# the shell operations' stat gives link counts and inodes
backend_stat_has_nlink() { return 0; }
# the shell upload rewrites the file in place (cat >)
backend_upload_keeps_inode() { return 0; }
backend_has_sandbox() { :; }
backend_workspaces_left() { :; }
backend_workspaces_count() { :; }
backend_sweep() { timeout 120 sbfs sweep -o backend=sbx >/dev/null 2>&1 || true; }
# sbx's credentials are the CLI's own (sbx login), never the daemon's
backend_vendor_secret() { :; }
# the fake binds the host's /etc into its VMs (a real one has its template's)
backend_shares_host_etc() { return 0; }
backend_upload_keeps_mtime() { return 1; }
backend_upload_sets_mtime() { return 1; }
backend_sandbox_stopped() { ! "$SBX_CTL" running "$(cat "$1/sandbox")"; }
backend_lists_natively() { return 1; }
backend_disk_limit() { echo refused; }
backend_disk_refusal() { echo "sbx has no disk size per sandbox: drop disk="; }
# the fake keeps a VM's disk in a directory of the host
backend_host_workspace() {
	[[ -n ${SBFS_SANDBOX:-} && -n ${SBX_FAKE_STATE:-} ]] || return 0
	echo "$SBX_FAKE_STATE/boxes/$SBFS_SANDBOX/fs/workspace"
}
# sbexec's signals reach the command's process group (a second exec sends
# them); -t is sbx exec -i -t with the CLI on a host pty
backend_exec_signals() { return 0; }
backend_exec_tty() { return 0; }
