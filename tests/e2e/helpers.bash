# Shared setup/teardown for the sbfs end-to-end suite.
#
# Each test gets a private temp dir ($T) holding its mountpoint(s), the local
# backend's host root and the daemon logs; teardown unmounts everything the
# test mounted, even when the test failed, and kills what will not go.
#
# Knobs (all optional):
#   SBFS_BUILD_DIR     build dir holding daemon/sbfs and shim/sbexec
#                      (default: <repo>/build)
#   SBFS_TEST_BACKEND  backend under test (default: local)
#   SBFS_TEST_OPTS     extra -o options for every mount, e.g. "shell_ops"
#   SBFS_TEST_TMPDIR   where per-test temp dirs go (default: $BATS_TMPDIR)
#   SBFS_TEST_KEEP     set: keep each test's temp dir (logs) afterwards
#
# Usage in a .bats file:
#   load helpers
#   setup()    { sbfs_setup; mount_sbfs; }   # sets $T and $MNT
#   teardown() { sbfs_teardown; }

bats_require_minimum_version 1.5.0

SBFS_REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
SBFS_BUILD=$(cd "${SBFS_BUILD_DIR:-$SBFS_REPO/build}" 2>/dev/null && pwd || echo "${SBFS_BUILD_DIR:-$SBFS_REPO/build}")
SBFS_TEST_BACKEND=${SBFS_TEST_BACKEND:-local}
SBFS_TEST_OPTS=${SBFS_TEST_OPTS:-}
PATH="$SBFS_BUILD/daemon:$SBFS_BUILD/shim:$PATH"
export PATH SBFS_TEST_BACKEND
# The caller's SBFS_BACKEND must not change which backend a test mounts.
unset SBFS_BACKEND

# ---------------------------------------------------------------- small utils

# fail MSG...: print to the test's output and fail.
fail() {
	printf '%s\n' "$*" >&2
	return 1
}

# poll SECONDS CMD...: run CMD every 0.1s until it succeeds; 1 on deadline.
poll() {
	local deadline=$((SECONDS + $1))
	shift
	while :; do
		"$@" && return 0
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# is_mounted PATH: PATH is a mountpoint in our mount table (works even
# when the filesystem behind it is dead and stat would fail).
is_mounted() {
	awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

not_mounted() { ! is_mounted "$1"; }

require_backend() {
	local b
	for b in "$@"; do
		[[ $SBFS_TEST_BACKEND == "$b" ]] && return 0
	done
	skip "needs backend $*, testing $SBFS_TEST_BACKEND"
}

require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || skip "needs $c on the host"
	done
}

# sandbox_has CMD: the sandbox can run CMD.
sandbox_has() {
	sbexec -m "$MNT" sh -c 'command -v "$1" >/dev/null' sh "$1"
}

# ----------------------------------------------------- processes and pids

# proc_starttime PID: field 22 of /proc/PID/stat (start time in ticks).
proc_starttime() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	[[ $1 != Z && $1 != X ]] || return 1 # zombies count as gone
	echo "${20}"
}

# proc_descendants PID: every descendant as "pid:starttime", one a line.
proc_descendants() {
	local root=$1 p
	ps -e -o pid= -o ppid= | awk -v root="$root" '
		{ kids[$2] = kids[$2] " " $1 }
		END {
			n = split(kids[root], q, " ")
			for (i = 1; i <= n; i++) {
				print q[i]
				m = split(kids[q[i]], more, " ")
				for (j = 1; j <= m; j++) q[++n] = more[j]
			}
		}' | while read -r p; do
		local st
		st=$(proc_starttime "$p") && echo "$p:$st"
	done
}

# procs_alive FILE: print the "pid:starttime" lines of FILE still running.
procs_alive() {
	local line
	[[ -s $1 ]] || return 0
	while IFS= read -r line; do
		[[ $(proc_starttime "${line%%:*}") == "${line#*:}" ]] && echo "$line"
	done <"$1"
	return 0
}

procs_gone() { [[ -z $(procs_alive "$1") ]]; }

# sbfs_daemon_pid MNT: the pid of the daemon serving MNT. Uses the "pid"
# field of `sbfs status --json` when there is one, else looks for an sbfs
# process whose last argument is MNT.
sbfs_daemon_pid() {
	local mnt=$1 pid d
	pid=$(timeout 10 sbfs status --json "$mnt" 2>/dev/null | jq -r '.pid // empty' 2>/dev/null)
	if [[ $pid =~ ^[0-9]+$ ]] && [[ -d /proc/$pid ]]; then
		echo "$pid"
		return 0
	fi
	for d in /proc/[0-9]*; do
		local -a argv=()
		mapfile -d '' -t argv <"$d/cmdline" 2>/dev/null || continue
		((${#argv[@]} >= 2)) || continue
		[[ ${argv[0]##*/} == sbfs ]] || continue
		case ${argv[1]} in status | sync | refresh | sweep) continue ;; esac
		if [[ ${argv[-1]} == "$mnt" ]]; then
			echo "${d#/proc/}"
			return 0
		fi
	done
	return 1
}

# drop_kernel_caches: what memory pressure may do at any moment: the
# kernel forgets every unused dentry and inode (all file systems: it is
# global). Every test uses this one helper, so the suite can serialise it
# against tests that count backend calls.
drop_kernel_caches() {
	sync
	echo 2 >/proc/sys/vm/drop_caches
}

# ------------------------------------------------------------ status/counters

# status_json [MNT]: one line of JSON from `sbfs status --json`.
status_json() {
	timeout 20 sbfs status --json "${1:-$MNT}"
}

# calls KIND [MNT]: the backend call counter KIND (list, stat, exec, ...).
calls() {
	local v
	v=$(status_json "${2:-$MNT}" | jq -er --arg k "$1" '.calls[$k]') || {
		fail "calls $1: no counter in sbfs status --json"
		return 1
	}
	echo "$v"
}

# ------------------------------------------------------------ setup/teardown

sbfs_setup() {
	[[ -x $SBFS_BUILD/daemon/sbfs ]] || fail "no sbfs binary at $SBFS_BUILD/daemon/sbfs (build first, or set SBFS_BUILD_DIR)" || return 1
	[[ -x $SBFS_BUILD/shim/sbexec ]] || fail "no sbexec binary at $SBFS_BUILD/shim/sbexec" || return 1
	local base=${SBFS_TEST_TMPDIR:-${BATS_TMPDIR:-/tmp}}
	mkdir -p "$base"
	T=$(mktemp -d "$base/sbfs-e2e.XXXXXX")
	T=$(cd "$T" && pwd -P)
	# is_mounted compares against /proc/self/mountinfo, which escapes
	# spaces and such; keep our own paths plain.
	[[ $T =~ ^[A-Za-z0-9/._-]+$ ]] || fail "temp dir path must be plain: $T" || return 1
	mkdir -p "$T/.mounts"
	[[ $SBFS_TEST_BACKEND == local ]] && mkdir -p "$T/root"
	export T
	SBFS_MOUNT_SEQ=0
}

# sbfs_opts NAME [EXTRA]: the -o string for a mount called NAME.
sbfs_opts() {
	local o="backend=$SBFS_TEST_BACKEND,log=$T/$1.log"
	[[ $SBFS_TEST_BACKEND == local ]] && o+=",local_root=$T/root"
	[[ -n $SBFS_TEST_OPTS ]] && o+=",$SBFS_TEST_OPTS"
	[[ -n ${2:-} ]] && o+=",$2"
	echo "$o"
}

# mount_sbfs [-n NAME] [-o EXTRA_OPTS] [-f|-d]: mounts $T/NAME (default "mnt")
# and sets MNT to it. Records the daemon pid, the sandbox id and the
# daemon's descendant processes (the sandbox, for local) for teardown.
# With -f (or -d), runs `sbfs -f` (`sbfs -d`) in the background and polls for the mount;
# SBFS_FG_PID is then the foreground daemon's pid (wait for its status).
# SBFS_MOUNT_OUT holds what the mount command printed.
mount_sbfs() {
	local name=mnt extra="" fg=0 fgflag=-f opt
	OPTIND=1
	while getopts n:o:fd opt; do
		case $opt in
		n) name=$OPTARG ;;
		o) extra=$OPTARG ;;
		f) fg=1 ;;
		d) fg=1 fgflag=-d ;;
		*) return 2 ;;
		esac
	done
	local mnt=$T/$name rec
	mkdir -p "$mnt"
	SBFS_MOUNT_SEQ=$((SBFS_MOUNT_SEQ + 1))
	rec=$T/.mounts/$SBFS_MOUNT_SEQ
	mkdir -p "$rec"
	echo "$mnt" >"$rec/mnt"
	# SIGINT/SIGTERM start at their defaults even if our shell runs as a
	# background job (where bash leaves SIGINT ignored).
	if ((fg)); then
		env --default-signal=INT,TERM sbfs "$fgflag" -o "$(sbfs_opts "$name" "$extra")" "$mnt" \
			>"$T/$name.fg.out" 2>&1 &
		SBFS_FG_PID=$!
		echo "$SBFS_FG_PID" >"$rec/pid"
		if ! poll 60 is_mounted "$mnt"; then
			cat "$T/$name.fg.out" >&2
			fail "sbfs -f did not mount $mnt within 60s"
			return 1
		fi
		# The mountpoint appears in the table a moment before requests are
		# served; wait until the root answers.
		poll 30 stat "$mnt" >/dev/null 2>&1 || true
		SBFS_MOUNT_OUT=$(cat "$T/$name.fg.out")
	else
		local rc=0
		SBFS_MOUNT_OUT=$(timeout 60 env --default-signal=INT,TERM sbfs -o "$(sbfs_opts "$name" "$extra")" "$mnt" 2>&1) || rc=$?
		if ((rc != 0)); then
			printf '%s\n' "$SBFS_MOUNT_OUT" >&2
			fail "sbfs $mnt failed with status $rc"
			return 1
		fi
		is_mounted "$mnt" || fail "sbfs returned 0 but $mnt is not mounted" || return 1
		local pid
		pid=$(sbfs_daemon_pid "$mnt") || fail "cannot find the daemon serving $mnt" || return 1
		echo "$pid" >"$rec/pid"
	fi
	status_json "$mnt" 2>/dev/null | jq -r '.sandbox // empty' >"$rec/sandbox" 2>/dev/null || true
	proc_descendants "$(cat "$rec/pid")" >"$rec/procs"
	MNT=$mnt
	SBFS_REC=$rec
	SBFS_PID=$(cat "$rec/pid")
	SBFS_SANDBOX=$(cat "$rec/sandbox")
	export MNT SBFS_PID SBFS_SANDBOX
}

# refresh_sandbox_procs: re-read the daemon's descendants for the current
# mount (after sbexec commands started more of them).
refresh_sandbox_procs() {
	proc_descendants "$SBFS_PID" | sort -u - "$SBFS_REC/procs" >"$SBFS_REC/procs.new"
	mv "$SBFS_REC/procs.new" "$SBFS_REC/procs"
}

# kill_sandbox: kill the current mount's sandbox from outside, as a crash
# would (local: SIGKILL every process of the sandbox; docker: docker kill).
kill_sandbox() {
	case $SBFS_TEST_BACKEND in
	local)
		refresh_sandbox_procs
		[[ -s $SBFS_REC/procs ]] || fail "the daemon has no sandbox processes to kill" || return 1
		local line
		while IFS= read -r line; do
			kill -KILL "${line%%:*}" 2>/dev/null || true
		done <"$SBFS_REC/procs"
		;;
	docker)
		docker kill "$SBFS_SANDBOX" >/dev/null
		;;
	modal)
		modal_sandbox_kill "$SBFS_SANDBOX"
		;;
	*)
		skip "kill_sandbox not implemented for backend $SBFS_TEST_BACKEND"
		;;
	esac
}

# sandbox_gone_check REC_DIR: 0 when the recorded sandbox no longer exists.
sandbox_gone_check() {
	local rec=$1
	case $SBFS_TEST_BACKEND in
	local)
		procs_gone "$rec/procs"
		;;
	docker)
		local id
		id=$(cat "$rec/sandbox")
		[[ -z $(docker ps -aq --filter "name=^/${id}\$" 2>/dev/null) ]]
		;;
	modal)
		modal_sandbox_gone "$(cat "$rec/sandbox")"
		;;
	*) return 0 ;;
	esac
}

# assert_sandbox_gone [REC_DIR]: polls up to 15s for the sandbox of a mount
# to be gone (processes, and for local its host workspace too).
assert_sandbox_gone() {
	local rec=${1:-$SBFS_REC}
	if ! poll 15 sandbox_gone_check "$rec"; then
		echo "still running:" >&2
		procs_alive "$rec/procs" | while IFS=: read -r p _; do
			ps -o pid=,args= -p "$p" >&2 || true
		done
		fail "sandbox $(cat "$rec/sandbox") of $(cat "$rec/mnt") is still there"
		return 1
	fi
	if [[ $SBFS_TEST_BACKEND == local && -d $T/root ]]; then
		local left
		left=$(find "$T/root" -mindepth 1 -maxdepth 1 2>/dev/null)
		[[ -z $left ]] || fail "local workspace left behind: $left" || return 1
	fi
}

# nothing_left_behind MNT: after a failed mount: no mount, no daemon for
# MNT, no local workspace, no sandbox process started by a daemon for it.
nothing_left_behind() {
	local mnt=$1
	not_mounted "$mnt" || fail "$mnt is mounted" || return 1
	if pid=$(sbfs_daemon_pid "$mnt" 2>/dev/null); then
		fail "an sbfs process ($pid) still serves $mnt"
		return 1
	fi
	if [[ $SBFS_TEST_BACKEND == local && -d $T/root ]]; then
		local left
		left=$(find "$T/root" -mindepth 1 -maxdepth 1 2>/dev/null)
		[[ -z $left ]] || fail "local workspace left behind: $left" || return 1
	fi
	return 0
}

# unmount_sbfs [MNT]: `fusermount3 -u` and wait for the daemon to go.
unmount_sbfs() {
	local mnt=${1:-$MNT} rec pid
	rec=$(grep -lxF -- "$mnt" "$T"/.mounts/*/mnt | tail -n1)
	rec=${rec%/mnt}
	pid=$(cat "$rec/pid")
	timeout 30 fusermount3 -u "$mnt" || fail "fusermount3 -u $mnt failed" || return 1
	poll 30 not_pid_alive "$pid" || fail "daemon $pid did not exit after unmount" || return 1
}

not_pid_alive() {
	! proc_starttime "$1" >/dev/null
}

# _teardown_mount REC_DIR: unmount one mount whatever state it is in.
# Returns 1 if it had to use force.
# figure TEXT: something a test measured (names tried, bytes verified...),
# shown in the TAP output and gathered by tests/run into its summary.
figure() {
	echo "# $SBFS_TEST_BACKEND: $*" >&3
	if [[ -n ${SBFS_FIGURES_FILE:-} ]]; then
		printf '%s\n' "$*" >>"$SBFS_FIGURES_FILE"
	fi
}

# tally WHAT N: adds N to a count tests/run sums over the whole suite
# ("errno results checked", "faults injected").
tally() {
	if [[ -n ${SBFS_FIGURES_FILE:-} ]]; then
		printf '@tally\t%s\t%s\n' "$1" "$2" >>"$SBFS_FIGURES_FILE"
	fi
}

# _record_fault_counters REC: the mount's injected faults, retries and
# deadline expiries, tallied.
_record_fault_counters() {
	[[ -n ${SBFS_FIGURES_FILE:-} ]] || return 0
	local mnt st
	mnt=$(cat "$1/mnt")
	is_mounted "$mnt" || return 0
	st=$(timeout 10 sbfs status --json "$mnt" 2>/dev/null) || return 0
	local k n
	for k in faults_injected retries deadlines; do
		n=$(jq -r ".$k // 0" <<<"$st" 2>/dev/null) || continue
		((n > 0)) && tally "$k" "$n"
	done
	return 0
}

# mount_users MNT: the processes whose cwd, root or open files are under
# MNT (what keeps an unmount busy), one "pid: args" line each.
mount_users() {
	local p link
	for p in /proc/[0-9]*; do
		for link in "$p/cwd" "$p/root" "$p"/fd/*; do
			[[ $(readlink "$link" 2>/dev/null) == "$1"* ]] || continue
			echo "  busy: ${p#/proc/}: $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) ($link)"
			break
		done
	done
}

_teardown_mount() {
	local rec=$1 mnt pid forced=0
	mnt=$(cat "$rec/mnt")
	pid=$(cat "$rec/pid" 2>/dev/null || true)
	if is_mounted "$mnt"; then
		local i
		for i in 1 2 3 4 5 6; do
			timeout 30 fusermount3 -u "$mnt" 2>/dev/null && break
			sleep 1
		done
		if is_mounted "$mnt"; then
			echo "teardown: fusermount3 -u $mnt failed; killing the daemon" >&2
			mount_users "$mnt" >&2
			forced=1
			[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
			fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
		fi
	fi
	if [[ -n $pid ]] && ! poll 30 not_pid_alive "$pid"; then
		echo "teardown: daemon $pid still alive 30s after unmount; killing it" >&2
		forced=1
		kill -KILL "$pid" 2>/dev/null || true
	fi
	if [[ -n $(procs_alive "$rec/procs") ]] && ! poll 10 procs_gone "$rec/procs"; then
		echo "teardown: sandbox processes survived the daemon; killing them:" >&2
		forced=1
		procs_alive "$rec/procs" | while IFS=: read -r p _; do
			ps -o pid=,args= -p "$p" >&2 || true
			kill -KILL "$p" 2>/dev/null || true
		done
	fi
	return $forced
}

# sbfs_teardown: unmount everything this test mounted (newest first).
# Prints the daemon logs when the test failed. Fails if force was needed.
sbfs_teardown() {
	cd / || true
	[[ -n ${T:-} && -d $T/.mounts ]] || return 0
	local rec forced=0
	for rec in $(ls -1d "$T"/.mounts/* 2>/dev/null | sort -V -r); do
		_record_fault_counters "$rec"
		_teardown_mount "$rec" || forced=1
	done
	if [[ ${BATS_TEST_COMPLETED:-} != 1 || $forced == 1 ]]; then
		local log
		for log in "$T"/*.log "$T"/*.fg.out; do
			[[ -s $log ]] || continue
			echo "--- ${log##*/} (last 40 lines)" >&2
			tail -n 40 "$log" >&2
		done
	fi
	# Leave no mount under $T, whatever happened, before deleting it.
	if grep -qF " $T/" /proc/self/mountinfo; then
		echo "teardown: stray mounts under $T" >&2
		forced=1
		awk -v t="$T/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo |
			while read -r m; do fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
	fi
	if [[ -z ${SBFS_TEST_KEEP:-} ]]; then
		chmod -R u+rwX "$T" 2>/dev/null || true
		rm -rf "$T" 2>/dev/null || true
	fi
	((forced == 0)) || fail "teardown needed force (see above)"
}

# ------------------------------------------------------------ assertions

# assert_eq GOT WANT [WHAT]
assert_eq() {
	[[ $1 == "$2" ]] && return 0
	printf '%s\n  want: %q\n  got:  %q\n' "${3:-value differs}" "$2" "$1" >&2
	return 1
}

# assert_status WANT: after `run`, status is WANT (prints output if not).
assert_status() {
	[[ $status -eq $1 ]] && return 0
	printf 'exit status %s, want %s; output:\n%s\n' "$status" "$1" "$output" >&2
	return 1
}

# assert_output_has STRING: after `run`, output contains STRING.
assert_output_has() {
	[[ $output == *"$1"* ]] && return 0
	printf 'output lacks %q; output:\n%s\n' "$1" "$output" >&2
	return 1
}

# sb: sbexec on the current mount, wherever the shell is.
sb() {
	sbexec -m "$MNT" "$@"
}

if [[ $SBFS_TEST_BACKEND == modal ]]; then
	source "$BATS_TEST_DIRNAME/backend_modal.bash"
fi
