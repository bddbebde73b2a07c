# Shared setup/teardown for the sbfs end-to-end suite.
#
# Each test gets a private temp dir ($T) holding its mountpoint(s), the local
# backend's host root and the daemon logs; teardown unmounts everything the
# test mounted, even when the test failed, and kills what will not go.
#
# Knobs (all optional):
#   SBFS_BUILD_DIR     build dir holding daemon/sbfs and shim/sbexec
#                      (default: <repo>/build)
#   SBFS_TEST_BACKEND  backend under test, the -o backend= value (default: local)
#   SBFS_TEST_HOOKS    which tests/e2e/backend_<name>.bash to load (default:
#                      $SBFS_TEST_BACKEND; docker-podman for the docker
#                      backend on Podman). Every backend-specific step of a
#                      test is a hook there, called by name.
#   SBFS_TEST_OPTS     extra -o options for every mount, e.g. "shell_ops"
#   SBFS_TEST_TMPDIR   where per-test temp dirs go (default: $BATS_TMPDIR)
#   SBFS_TEST_KEEP     set: keep each test's temp dir (logs) afterwards
#
# Usage in a .bats file:
#   load helpers          # also defines the usual setup and teardown:
#   setup()    { sbfs_setup; mount_sbfs; }   # sets $T and $MNT
#   teardown() { sbfs_teardown; }
# A file that needs more defines its own, calling these.

bats_require_minimum_version 1.5.0

SBFS_REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
SBFS_BUILD=$(cd "${SBFS_BUILD_DIR:-$SBFS_REPO/build}" 2>/dev/null && pwd || echo "${SBFS_BUILD_DIR:-$SBFS_REPO/build}")
SBFS_TEST_BACKEND=${SBFS_TEST_BACKEND:-local}
SBFS_TEST_OPTS=${SBFS_TEST_OPTS:-}
PATH="$SBFS_BUILD/daemon:$SBFS_BUILD/shim:$PATH"
SBFS_TEST_HOOKS=${SBFS_TEST_HOOKS:-$SBFS_TEST_BACKEND}
export PATH SBFS_TEST_BACKEND SBFS_TEST_HOOKS
# The caller's SBFS_BACKEND must not change which backend a test mounts.
unset SBFS_BACKEND
if [[ ! -f $BATS_TEST_DIRNAME/backend_$SBFS_TEST_HOOKS.bash ]]; then
	echo "helpers.bash: no hooks file tests/e2e/backend_$SBFS_TEST_HOOKS.bash for backend $SBFS_TEST_HOOKS" >&2
	return 1
fi
# Hooks a backend file may leave out, with their usual answer:
# backend_bulk_files_fast: its sandbox makes tens of thousands of files
# in one command within seconds, also on a loaded machine.
backend_bulk_files_fast() { return 0; }
# backend_exec_signals: sbexec's Ctrl-C, SIGTERM and SIGHUP reach the
# command's processes (a trap runs); otherwise the first one kills it.
backend_exec_signals() { return 0; }
# backend_exec_tty: sbexec -t gives the command a terminal in the sandbox.
backend_exec_tty() { return 0; }
# backend_exec_tty_resize: the size changes of sbexec -t's terminal reach
# the command's; otherwise its terminal keeps the size it started with.
backend_exec_tty_resize() { return 0; }
# backend_watches_changes: the backend reports the sandbox's changes as
# they happen (sbfs status: "watched"): cached attributes and listings
# stay until one is reported, and an sbexec forgets only what changed.
backend_watches_changes() { return 1; }
# backend_behind SCRIPT: runs `sh -c SCRIPT` in the current mount's
# sandbox, in its workspace, not through sbexec: a change the mount is
# not told of. Status 1 where the suite cannot reach the sandbox so.
backend_behind() { return 1; }
# backend_sandbox_runs ID: anything of the sandbox ID is left (a process,
# where its host can tell).
backend_sandbox_runs() { backend_sandbox_exists "$1"; }
# shellcheck source=backend_local.bash
source "$BATS_TEST_DIRNAME/backend_$SBFS_TEST_HOOKS.bash"

# ---------------------------------------------------------------- small utils

# fail MSG...: print to the test's output and fail.
fail() {
	printf '%s\n' "$*" >&2
	return 1
}

# nap SECONDS: sleep without a fork. A fork is what the CI machine pays
# most for (a paravirtualised page table), and the suite's waits are
# loops: a read with a timeout on a FIFO that nobody writes.
nap() {
	if [[ -z ${_SBFS_NAP_FD:-} ]]; then
		local fifo=${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/.sbfs-nap.$BASHPID.$RANDOM
		if ! { mkfifo "$fifo" && exec {_SBFS_NAP_FD}<>"$fifo"; }; then
			rm -f "$fifo"
			_SBFS_NAP_FD=
			sleep "$1"
			return 0
		fi
		rm -f "$fifo"
	fi
	read -r -t "$1" -u "$_SBFS_NAP_FD" _ || true
}

# poll SECONDS CMD...: run CMD every 0.1s until it succeeds; 1 on deadline.
poll() {
	local deadline=$((SECONDS + $1))
	shift
	while :; do
		"$@" && return 0
		((SECONDS < deadline)) || return 1
		nap 0.1
	done
}

# is_mounted PATH: PATH is a mountpoint in our mount table (works even
# when the filesystem behind it is dead and stat would fail). One read of
# the whole table (awk): a shell loop's line-by-line reads can skip lines
# of /proc/self/mountinfo while other tests mount and unmount.
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
	read -r s 2>/dev/null <"/proc/$1/stat" || return 1
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	[[ $1 != Z && $1 != X ]] || return 1 # zombies count as gone
	echo "${20}"
}

# proc_descendants PID: every descendant as "pid:starttime", one a line
# (the start time as proc_starttime reads it; zombies left out).
proc_descendants() {
	ps -e -o pid= -o ppid= | awk -v root="$1" '
		{ kids[$2] = kids[$2] " " $1 }
		END {
			n = split(kids[root], q, " ")
			for (i = 1; i <= n; i++) {
				m = split(kids[q[i]], more, " ")
				for (j = 1; j <= m; j++) q[++n] = more[j]
				line = ""
				if ((getline line < ("/proc/" q[i] "/stat")) <= 0) continue
				close("/proc/" q[i] "/stat")
				sub(/^.*\) /, "", line)
				split(line, f, " ")
				if (f[1] != "Z" && f[1] != "X") print q[i] ":" f[20]
			}
		}'
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

# sbfs_daemon_pid MNT [STATUS]: the pid of the daemon serving MNT. Uses the
# "pid" field of `sbfs status --json` (STATUS, when the caller has it) when
# there is one, else looks for an sbfs process whose last argument is MNT.
sbfs_daemon_pid() {
	local mnt=$1 st=${2-} pid d
	[[ -n $st ]] || st=$(timeout 10 sbfs status --json "$mnt" 2>/dev/null)
	if pid=$(json_int "$st" pid) && [[ -d /proc/$pid ]]; then
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

# The kernel's dentry and inode caches are global: a drop in one test
# empties every other test's mount too. Tests run in parallel, so a drop
# takes this lock exclusively, and a test that counts backend calls or
# needs the caches to stay warm holds it shared while it measures.
# The machine has one kernel: every suite running on it (CI runs two side
# by side) takes the same lock.
_caches_lock_file() {
	echo /tmp/.sbfs-e2e-kernel-caches.lock
}
# A drop holds this turnstile while it waits for the lock, and a
# measurement passes through it before taking the lock shared: flock
# alone lets overlapping shared holders (two suites, several jobs each)
# keep a drop waiting past the test's timeout.
_caches_turnstile_file() {
	echo /tmp/.sbfs-e2e-kernel-caches.turnstile
}

# drop_kernel_caches: what memory pressure may do at any moment: the
# kernel forgets every unused dentry and inode (all file systems). Every
# test uses this one helper; it waits for the measurements in progress.
drop_kernel_caches() {
	caches_steady_end # this test's own measurement, if any, ends here
	flock -x "$(_caches_turnstile_file)" \
		flock -x "$(_caches_lock_file)" sh -c 'sync; echo 2 >/proc/sys/vm/drop_caches'
}

# with_warm_caches CMD...: run CMD while no other test may drop the
# kernel's caches.
with_warm_caches() {
	local rc=0 held=0
	[[ -s $T/.caches-holder ]] && held=1
	caches_steady_begin || return 1
	"$@" || rc=$?
	((held)) || caches_steady_end
	return $rc
}

# caches_steady_begin / caches_steady_end: the same, around a stretch of
# a test; teardown ends it too. The shared lock is held by a process of
# its own (recorded in $T/.caches-holder), so that taking it works from a
# command substitution too ($(calls read) takes it).
caches_steady_begin() {
	[[ -s $T/.caches-holder ]] && return 0
	local lock turnstile
	lock=$(_caches_lock_file)
	turnstile=$(_caches_turnstile_file)
	(flock -s "$turnstile" true && flock -s "$lock" sh -c 'echo $$ >"$1.new" && mv "$1.new" "$1" && exec sleep 2147483' sh "$T/.caches-holder" &) \
		</dev/null >/dev/null 2>&1 3>&-
	poll 300 test -s "$T/.caches-holder" || fail "could not take the shared lock $lock within 300s" || return 1
	SBFS_CACHES_HOLDER=$(cat "$T/.caches-holder")
}
caches_steady_end() {
	[[ -n ${T:-} && -s $T/.caches-holder ]] || return 0
	kill "$(cat "$T/.caches-holder")" 2>/dev/null || true
	rm -f "$T/.caches-holder"
	SBFS_CACHES_HOLDER=
}

# ------------------------------------------------------------ status/counters

# status_json [MNT]: one line of JSON from `sbfs status --json`.
status_json() {
	timeout 20 sbfs status --json "${1:-$MNT}"
}

# json_int JSON KEY: the integer after the first "KEY": in JSON, which is
# sbfs's own compact status line (its keys are plain words), without a
# jq process: the helpers read it for every mount.
json_int() {
	local re="\"$2\":(-?[0-9]+)"
	[[ $1 =~ $re ]] || return 1
	echo "${BASH_REMATCH[1]}"
}

# calls KIND [MNT]: the backend call counter KIND (list, stat, exec, ...).
# A test that counts calls measures from its first count on, so from then
# until its teardown no other test may drop the kernel's caches.
calls() {
	local st re='"calls":\{([^}]*)\}'
	caches_steady_begin || return 1
	st=$(status_json "${2:-$MNT}") && [[ $st =~ $re ]] &&
		json_int "{${BASH_REMATCH[1]}}" "$1" || {
		fail "calls $1: no counter in sbfs status --json"
		return 1
	}
}

# ------------------------------------------------------------ setup/teardown

# test_time_mark start|end: one line in $SBFS_TEST_TIMES_FILE (tests/run's),
# written as the test goes: bats shows a file's results only once the file
# ends, so an entry stopped by its cap still knows what its tests took and
# which were running (a start with no end).
test_time_mark() {
	[[ -n ${SBFS_TEST_TIMES_FILE:-} ]] || return 0
	local now=${EPOCHREALTIME/[.,]/} id=${BATS_TEST_FILENAME##*/}:${BATS_TEST_NUMBER:-0}
	if [[ $1 == start ]]; then
		SBFS_TEST_T0=$now
		printf 'start\t%s\t%s\t%s\n' "$id" "$((now / 1000))" "$BATS_TEST_DESCRIPTION" >>"$SBFS_TEST_TIMES_FILE"
	elif [[ -n ${SBFS_TEST_T0:-} ]]; then
		printf 'end\t%s\t%s\t%s\n' "$id" "$(((now - SBFS_TEST_T0) / 1000))" "$BATS_TEST_DESCRIPTION" >>"$SBFS_TEST_TIMES_FILE"
	fi
}

sbfs_setup() {
	test_time_mark start
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
	export T
	# no config file of the machine's user changes what a test mounts
	export SBFS_CONFIG=${SBFS_CONFIG:-/dev/null}
	backend_test_setup
	SBFS_MOUNT_SEQ=0
}

# sbfs_opts NAME [EXTRA]: the -o string for a mount called NAME.
# SBFS_TEST_NO_LOG=1: without log=, so a daemon logs to syslog.
sbfs_opts() {
	local o="backend=$SBFS_TEST_BACKEND" b
	[[ -n ${SBFS_TEST_NO_LOG:-} ]] || o+=",log=$T/$1.log"
	b=$(backend_mount_opts)
	[[ -n $b ]] && o+=",$b"
	[[ -n $SBFS_TEST_OPTS ]] && o+=",$SBFS_TEST_OPTS"
	[[ -n ${2:-} ]] && o+=",$2"
	echo "$o"
}

# mount_sbfs [-n NAME] [-o EXTRA_OPTS] [-f|-d|-H]: mounts $T/NAME (default "mnt")
# and sets MNT to it. Records the daemon pid, the sandbox id and the
# daemon's descendant processes (the sandbox, for local) for teardown.
# With -f (or -d), runs `sbfs -f` (`sbfs -d`) in the background and polls for the mount;
# SBFS_FG_PID is then the foreground daemon's pid (wait for its status).
# With -H, mounts through mount.fuse3, the helper of mount(8) and fstab.
# SBFS_MOUNT_OUT holds what the mount command printed.
mount_sbfs() {
	local name=mnt extra="" fg=0 fgflag=-f opt helper=0
	OPTIND=1
	while getopts n:o:fdH opt; do
		case $opt in
		n) name=$OPTARG ;;
		o) extra=$OPTARG ;;
		f) fg=1 ;;
		d) fg=1 fgflag=-d ;;
		H) helper=1 ;;
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
	elif ((helper)); then
		# as mount -t fuse.sbfs and fstab run it: mount.fuse3 calls
		# `sbfs SOURCE MOUNTPOINT -o OPTIONS,dev,suid`
		local rc=0
		SBFS_MOUNT_OUT=$(timeout 60 env --default-signal=INT,TERM mount.fuse3 "$(backend_sbfs_name)" "$mnt" \
			-t fuse.sbfs -o "$(sbfs_opts "$name" "$extra")" 2>&1) || rc=$?
		if ((rc != 0)); then
			printf '%s\n' "$SBFS_MOUNT_OUT" >&2
			fail "mount.fuse3 $mnt failed with status $rc"
			return 1
		fi
		is_mounted "$mnt" || fail "mount.fuse3 returned 0 but $mnt is not mounted" || return 1
	else
		local rc=0
		SBFS_MOUNT_OUT=$(timeout 60 env --default-signal=INT,TERM sbfs -o "$(sbfs_opts "$name" "$extra")" "$mnt" 2>&1) || rc=$?
		if ((rc != 0)); then
			printf '%s\n' "$SBFS_MOUNT_OUT" >&2
			fail "sbfs $mnt failed with status $rc"
			return 1
		fi
		is_mounted "$mnt" || fail "sbfs returned 0 but $mnt is not mounted" || return 1
	fi
	# one status call names the daemon and its sandbox
	local st pid re='"sandbox":"([^"]*)"'
	st=$(status_json "$mnt" 2>/dev/null) || st=
	if ((!fg)); then
		pid=$(sbfs_daemon_pid "$mnt" "$st") || fail "cannot find the daemon serving $mnt" || return 1
		echo "$pid" >"$rec/pid"
	fi
	if [[ $st =~ $re ]]; then echo "${BASH_REMATCH[1]}"; fi >"$rec/sandbox"
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
# would (the backend's hook: SIGKILL its processes, docker kill, ...).
kill_sandbox() {
	backend_sandbox_kill "$SBFS_REC"
}

# sandbox_gone_check REC_DIR: 0 when the recorded sandbox no longer exists.
sandbox_gone_check() {
	backend_sandbox_gone "$1"
}

# workspaces_left_check: fails naming the host-side workspaces still there.
workspaces_left_check() {
	local left
	left=$(backend_workspaces_left)
	[[ -z $left ]] || fail "local workspace left behind: $left"
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
	workspaces_left_check
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
	workspaces_left_check
}

# fusermount_u MNT: `fusermount3 -u`, tried up to 5 times a second apart
# while the kernel says the mount is busy. With 16 test jobs creating
# containers and namespaces beside it, an unmount met EBUSY about once a
# suite with no process of the test's holding the mount; each retry is
# tallied, and a mount still busy names what holds it.
fusermount_u() {
	local mnt=$1 i out
	for i in 1 2 3 4 5; do
		out=$(timeout -k 5 30 fusermount3 -u "$mnt" 2>&1) && return 0
		[[ $out == *"Device or resource busy"* ]] || break
		echo "fusermount3 -u $mnt: busy (try $i); held by: $(mount_users "$mnt")" >&2
		[[ $i != 1 ]] || stuck_report "$mnt" >&2
		tally "unmounts retried after EBUSY" 1
		nap 1
	done
	printf '%s\n' "$out" >&2
	fail "fusermount3 -u $mnt failed; what held it then: $(mount_users "$mnt")
$(stuck_report "$mnt")"
}

# stuck_report MNT [PID]: what an unmount that fails or hangs waits for:
# the processes in uninterruptible sleep (a call stuck in the mount holds
# it) with their kernel stacks, and the daemon serving MNT: where each
# thread waits in the kernel and, where gdb is installed, each thread's
# stack (a daemon that stopped answering shows the lock or call it waits
# in). Bounded: it runs in a teardown.
stuck_report() {
	local pid t
	ps -eo pid=,stat=,wchan:32=,args= 2>/dev/null | awk '$2 ~ /^D/' |
		while read -r t _; do
			echo "  in D state: $(ps -o pid=,wchan:32=,args= -p "$t" 2>/dev/null)"
			sed 's/^/      /' "/proc/$t/stack" 2>/dev/null | head -n 12
		done
	pid=${2:-$(sbfs_daemon_pid "$1" 2>/dev/null)} || return 0
	[[ -n $pid ]] || return 0
	for t in /proc/"$pid"/task/*; do
		echo "  daemon $pid thread ${t##*/} ($(cat "$t/comm" 2>/dev/null)) waits in $(cat "$t/wchan" 2>/dev/null)"
	done
	if command -v gdb >/dev/null; then
		timeout -k 5 60 gdb -p "$pid" -batch -nx -ex 'thread apply all bt 20' 2>/dev/null |
			grep -E '^(Thread|#)' | sed 's/^/    /'
	fi
}

# unmount_sbfs [MNT]: `fusermount3 -u` and wait for the daemon to go.
unmount_sbfs() {
	local mnt=${1:-$MNT} rec pid
	rec=$(grep -lxF -- "$mnt" "$T"/.mounts/*/mnt | tail -n1)
	rec=${rec%/mnt}
	pid=$(cat "$rec/pid")
	fusermount_u "$mnt" || return 1
	poll 90 not_pid_alive "$pid" || fail "daemon $pid did not exit within 90 s of its unmount" || return 1
}

not_pid_alive() {
	! proc_starttime "$1" >/dev/null
}

# _teardown_mount REC_DIR: unmount one mount whatever state it is in.
# Returns 1 if it had to use force.
# figure TEXT: something a test measured (names tried, bytes verified...),
# shown in the TAP output and gathered by tests/run into its summary.
figure() {
	# named as the entry (local+writeback), not the backend alone
	echo "# $SBFS_TEST_BACKEND${SBFS_TEST_OPTS:++$SBFS_TEST_OPTS}: $*" >&3
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
		n=$(json_int "$st" "$k") || continue
		((n > 0)) && tally "$k" "$n"
	done
	return 0
}

# mount_users MNT: the processes whose cwd, root, open or mapped files are
# under MNT (what keeps an unmount busy), one "pid: args" line each. One
# find over /proc, bounded: a machine running a suite has many thousand
# file descriptors, and one readlink process each once outran bats'
# timeout of a test's teardown.
mount_users() {
	local p
	timeout -k 2 20 find /proc/[0-9]*/cwd /proc/[0-9]*/root /proc/[0-9]*/fd /proc/[0-9]*/map_files \
		-maxdepth 1 \( -lname "$1" -o -lname "$1/*" \) -printf '%p\n' 2>/dev/null |
		cut -d/ -f3 | sort -un |
		while read -r p; do
			# a process stuck in a page fault holds its memory's
			# lock, which reading its cmdline waits for
			echo "  busy: $p: $(timeout -k 1 2 sh -c 'tr "\0" " " <"$1"' sh "/proc/$p/cmdline" 2>/dev/null)"
		done
}

_teardown_mount() {
	local rec=$1 mnt pid forced=0
	mnt=$(cat "$rec/mnt")
	pid=$(cat "$rec/pid" 2>/dev/null || true)
	if is_mounted "$mnt"; then
		local i out
		for i in 1 2 3 4 5 6; do
			out=$(timeout -k 5 30 fusermount3 -u "$mnt" 2>&1) && break
			# what holds the mount, while it still does
			if ((i == 1)); then
				echo "teardown: fusermount3 -u $mnt: ${out:-no answer in 30 s}; what holds it:" >&2
				mount_users "$mnt" >&2
				stuck_report "$mnt" "$pid" >&2
			fi
			# only a busy mount may free itself; a hung or refused
			# unmount goes to force, within bats' timeout
			[[ $out == *"Device or resource busy"* ]] || break
			nap 1
		done
		if is_mounted "$mnt"; then
			echo "teardown: fusermount3 -u $mnt failed; killing the daemon" >&2
			forced=1
			[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
			fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
		fi
	fi
	# A hang guard, not a measure: on a loaded 2-core machine a daemon
	# was seen to take over 30 s to destroy its sandbox and exit (its
	# threads were finishing, not stuck).
	if [[ -n $pid ]] && ! poll 90 not_pid_alive "$pid"; then
		echo "teardown: daemon $pid still alive 90s after unmount; killing it" >&2
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
	local rc=0
	sbfs_unmount_all || rc=$?
	test_time_mark end
	return $rc
}

# sbfs_unmount_all: sbfs_teardown's work (its status is teardown's).
sbfs_unmount_all() {
	cd / || true
	caches_steady_end
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
	if awk -v t="$T/" 'index($5, t) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
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

# po ARGS...: tests/tools/posixop, one system call per step, each call's
# result or exact errno name a line (run in the current directory).
po() {
	local tool=$SBFS_BUILD/tests/tools/posixop
	[[ -x $tool ]] || fail "no posixop helper at $tool (build first)" || return 1
	"$tool" "$@"
}

# expect_po WANT ARGS...: posixop's whole output, one line per call.
expect_po() {
	local want=$1 got
	shift
	got=$(po "$@") || fail "posixop $* exited $?" || return 1
	assert_eq "$got" "$want" "posixop $*" || return 1
	tally "POSIX syscall results checked (errno exact)" "$(wc -l <<<"$want")"
}

# mount_source MNT: the source field of MNT's line in /proc/self/mountinfo,
# its octal escapes decoded (an sbfs mount's names its control socket).
mount_source() {
	local src
	src=$(awk -v m="$1" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 2); exit } }' \
		/proc/self/mountinfo)
	printf '%b' "$src"
}

# control_socket MNT: the control socket MNT's source names ("sbfs:PATH").
control_socket() {
	local src
	src=$(mount_source "$1")
	[[ $src == sbfs:/* ]] || return 1
	printf '%s' "${src#sbfs:}"
}

# sb: sbexec on the current mount, wherever the shell is.
sb() {
	sbexec -m "$MNT" "$@"
}

# The usual setup and teardown (a file defining its own replaces them).
setup() {
	sbfs_setup
	mount_sbfs
}
teardown() {
	sbfs_teardown
}
