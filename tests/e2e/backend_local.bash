# Hooks for the local backend (bubblewrap on this host). The contract every
# tests/e2e/backend_<name>.bash fulfils, called by name from tests/run,
# helpers.bash and the .bats files:
#
#   backend_sbfs_name            the -o backend= value this entry mounts
#   backend_up STATE_DIR         start what the backend talks to, once per
#                                suite run (tests/run); exports what the
#                                tests need; non-zero if it cannot
#   backend_down STATE_DIR       stop what backend_up started
#   backend_test_setup           per test, after $T exists
#   backend_mount_opts           -o options every mount of this backend needs
#   backend_sandbox_kill REC     kill a mount's sandbox from outside, as a crash would
#   backend_sandbox_gone REC     0 once that sandbox no longer exists
#   backend_sandbox_destroy REC  remove a sandbox that -o keep left running
#   backend_sandbox_exists ID    0 while the sandbox ID (e.g. one -o keep left) exists
#   backend_sandbox_runs ID      0 while anything of the sandbox ID is left: for
#                                local, also any process of it (helpers.bash:
#                                backend_sandbox_exists where not given)
#   backend_sweep_opts           the -o of `sbfs sweep` that finds this backend's orphans
#   backend_stat_has_nlink       0 if the backend's stat and listing report link counts
#   backend_upload_keeps_inode   0 if an upload rewrites the file in place (a hard
#                                link to it stays one file)
#   backend_has_sandbox REC      0 if the "gone" checks can prove something
#   backend_workspaces_left      print the host-side workspaces still there
#                                (nothing where there are none on the host)
#   backend_workspaces_count     how many host-side workspaces exist, or
#                                nothing where the backend has none
#   backend_sweep                remove sandboxes a killed daemon left behind
#   backend_vendor_secret        a credential the daemon holds that the
#                                sandbox must never see (empty if none)
#   backend_shares_host_etc      0 if the sandbox sees the host's /etc by design
#   backend_upload_keeps_mtime   0 if an upload gives the sandbox's copy our mtime
#   backend_upload_sets_mtime    0 if an upload gives the sandbox's copy our
#                                mtime or its whole second, and says so: the
#                                mount then needs no stat to show it
#   backend_sandbox_stopped REC  0 once that sandbox no longer runs (a killed
#                                one may be stopped, not yet removed)
#   backend_lists_natively       0 if listings are the backend's own call, fast
#                                enough for 20,000 names (not the shell's)
#   backend_disk_limit           how -o disk= fares here: "enforced" (as
#                                root: the workspace is a file system of that
#                                size under $T/root, and an unprivileged
#                                user's mount refuses it), "vendor" (the vendor
#                                is asked; its own file tests it) or "refused"
#   backend_disk_refusal         the part of the refusal line to expect
#   backend_host_workspace       the host directory of the current mount's
#                                workspace, where a test can write behind the
#                                mount's back; nothing if there is none
#
# REC is a mount's record dir ($T/.mounts/N: files mnt, pid, sandbox, procs).
# The local sandbox's processes are the daemon's descendants, recorded in
# REC/procs; its workspace lives under local_root=$T/root.

backend_sbfs_name() { echo local; }
backend_up() { :; }
backend_down() { :; }
backend_test_setup() { mkdir -p "$T/root"; }
backend_mount_opts() { echo "local_root=$T/root"; }

backend_sandbox_kill() {
	local rec=$1 line
	_local_refresh_procs "$rec"
	[[ -s $rec/procs ]] || fail "the daemon has no sandbox processes to kill" || return 1
	# Only the recorded processes still running with their recorded start
	# time: a pid that exited may already belong to another test's daemon
	# (the suite wraps the pid space), which a bare kill would take down.
	procs_alive "$rec/procs" | while IFS= read -r line; do
		kill -KILL "${line%%:*}" 2>/dev/null || true
	done
}

backend_sandbox_gone() { procs_gone "$1/procs"; }

backend_sandbox_destroy() {
	local rec
	for rec in "$T"/.mounts/*; do
		procs_alive "$rec/procs" | while IFS=: read -r p _; do kill -KILL "$p" 2>/dev/null; done
		: >"$rec/procs"
	done
	rm -rf "$T/root"
}

backend_sandbox_exists() { [[ -d $T/root/$1 ]]; }
# its workspace, or a process with the workspace bound at /workspace in
# its mount table (mountinfo's root and mount point fields; a tree whose
# workspace was deleted shows it with //deleted)
backend_sandbox_runs() {
	[[ -d $T/root/$1 ]] && return 0
	grep -qsE -- " [^ ]*/$1(//deleted)? /workspace " /proc/[0-9]*/mountinfo
}
backend_sweep_opts() { echo "backend=local,local_root=$T/root"; }
backend_stat_has_nlink() { return 0; }
backend_upload_keeps_inode() { return 0; }
backend_has_sandbox() {
	_local_refresh_procs "$1"
	[[ -s $1/procs ]] || fail "no sandbox processes under daemon $(cat "$1/pid")"
}

backend_workspaces_left() {
	[[ -d $T/root ]] && find "$T/root" -mindepth 1 -maxdepth 1 2>/dev/null
	return 0
}

backend_workspaces_count() { find "$T/root" -mindepth 1 -maxdepth 1 | wc -l; }
backend_sweep() { :; }
backend_vendor_secret() { :; }
backend_shares_host_etc() { return 1; }
backend_upload_keeps_mtime() { [[ $SBFS_TEST_OPTS != *shell_ops* ]]; }
backend_upload_sets_mtime() { backend_upload_keeps_mtime; }
backend_sandbox_stopped() { backend_sandbox_gone "$1"; }
backend_lists_natively() { return 0; }
# As root the workspace is a loop-mounted ext4 image of that size.
backend_disk_limit() {
	if [[ $(id -u) == 0 && -e /dev/loop-control ]]; then echo enforced; else echo refused; fi
}
backend_disk_refusal() {
	echo "sbfs: error: backend 'local' can enforce disk= only when sbfs runs as root (it mounts the workspace on a file system of that size); drop disk= or run sbfs as root"
}
backend_host_workspace() { echo "$T/root/$SBFS_SANDBOX"; }
# inotify on the host workspace; refused with the shell_ops testing aid
backend_watches_changes() { [[ $SBFS_TEST_OPTS != *shell_ops* ]]; }
backend_behind() { (cd "$(backend_host_workspace)" && sh -c "$1"); }

# _local_refresh_procs REC: add the daemon's current descendants (sbexec
# commands started more of them) to REC/procs.
_local_refresh_procs() {
	proc_descendants "$(cat "$1/pid")" | sort -u - "$1/procs" >"$1/procs.new"
	mv "$1/procs.new" "$1/procs"
}
