# Shared by the fake `sbx` CLI and fake_ctl: where a fake sandbox lives and
# how its microVM (a bubblewrap process tree) is started and stopped.
#
# State, all under $SBX_FAKE_STATE:
#   policy               the global network policy (`sbx policy init`)
#   policy-allow         global allow rules
#   daemon-up            the fake sandboxd "runs" (its notice was printed)
#   calls.log            one line per invocation: the argv, %q-quoted
#   faults/NAME          fault injection (see fake_ctl)
#   boxes/NAME/          one sandbox: fs/ (its own root: /tmp, /root, ...),
#                        ws (its workspace paths), pid (the namespace's
#                        init, host pid), bwrap (bwrap's pid), status,
#                        allow (its network rules)

: "${SBX_FAKE_STATE:?the fake sbx needs SBX_FAKE_STATE (a state directory)}"
BOXES=$SBX_FAKE_STATE/boxes
# (no fork where none is needed: every exec of a test pays for them)
[[ -d $SBX_FAKE_STATE/faults && -d $BOXES ]] || mkdir -p "$BOXES" "$SBX_FAKE_STATE/faults"

die() { # STATUS MESSAGE
	printf 'Error: %s\n' "$2" >&2
	exit "$1"
}

box_dir() { echo "$BOXES/$1"; }
box_exists() { [[ -n $1 && -d $BOXES/$1 && -e $BOXES/$1/status ]]; }

# start_time PID: field 22 of its stat (ticks since boot); nothing for a
# process that is gone or a zombie.
start_time() {
	local s
	read -r s 2>/dev/null <"/proc/$1/stat" || return 0
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	[[ $1 != Z && $1 != X ]] && echo "${20}"
	return 0
}

# box_alive NAME: its init process still runs (the one we started: its
# start time is recorded too, a reused pid does not count).
box_alive() {
	local d=$BOXES/$1 pid st
	[[ -s $d/pid ]] || return 1
	read -r pid st <"$d/pid"
	[[ -r /proc/$pid/stat ]] || return 1
	local s
	read -r s <"/proc/$pid/stat" 2>/dev/null || return 1
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	[[ $1 != Z && ${20} == "$st" ]]
}

# box_start NAME: boot the "VM": a bwrap tree with its own pid, ipc, uts
# and network namespaces, its own root (host /usr and /etc read-only,
# like a template image), each workspace path bound at the same path.
box_start() {
	local name=$1 d=$BOXES/$1 a=() w
	mkdir -p "$d/fs/tmp" "$d/fs/root" "$d/fs/home/agent" "$d/fs/var/tmp"
	chmod 1777 "$d/fs/tmp" "$d/fs/var/tmp"
	a=(bwrap --unshare-pid --unshare-ipc --unshare-uts --unshare-net
		--hostname "$name" --bind "$d/fs" / --ro-bind /usr /usr --ro-bind /etc /etc)
	for w in /bin /sbin /lib /lib32 /lib64 /libx32; do
		# (a restart finds the links of the last boot in its disk)
		if [[ -L $w ]]; then rm -f "$d/fs$w"; a+=(--symlink "$(readlink "$w")" "$w")
		elif [[ -d $w ]]; then a+=(--ro-bind "$w" "$w"); fi
	done
	a+=(--proc /proc --dev /dev)
	while IFS= read -r w; do
		if [[ $w == *:ro ]]; then a+=(--ro-bind "${w%:ro}" "${w%:ro}"); elif [[ -n $w ]]; then a+=(--bind "$w" "$w"); fi
	done <"$d/ws"
	rm -f "$d/info"
	# the arguments through a file (--args), so that pid 1 of the VM shows
	# no host path in its command line; and no environment of the host
	a+=(--info-fd 3)
	printf '%s\0' "${a[@]:1}" >"$d/bwrap.args"
	# A session of its own: killing the CLI that started it (or its
	# process group) leaves the VM running, as with the real sbx. Booted
	# once the VM's first command runs (all its mounts are made): it says
	# so on fd 5, then becomes the VM's idle process.
	rm -f "$d/ready"
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin setsid bwrap --args 4 -- \
		/bin/sh -c 'echo ready >&5; exec 5>&-; exec sleep infinity' \
		3>"$d/info" 4<"$d/bwrap.args" 5>"$d/ready" </dev/null >/dev/null 2>"$d/boot.err" &
	local bw=$! i cpid=
	for ((i = 0; i < 3000; i++)); do
		[[ -s $d/ready ]] && break
		kill -0 "$bw" 2>/dev/null || break
		sleep 0.01
	done
	[[ -s $d/ready && $(cat "$d/info" 2>/dev/null) =~ \"child-pid\":\ *([0-9]+) ]] ||
		die 1 "failed to start VM for sandbox \"$name\": $(head -c 300 "$d/boot.err" 2>/dev/null)"
	cpid=${BASH_REMATCH[1]}
	local s
	read -r s <"/proc/$cpid/stat"
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	echo "$cpid ${20}" >"$d/pid"
	echo "$bw $(start_time "$bw")" >"$d/bwrap"
	echo running >"$d/status"
}

# box_stop NAME: the VM stops; its processes end, its disk stays.
box_stop() {
	local d=$BOXES/$1 pid st bw
	if box_alive "$1"; then
		read -r pid st <"$d/pid"
		kill -KILL "$pid" 2>/dev/null
	fi
	# bwrap itself only while it is the one we started: a pid it left
	# may since be another process's (another test's daemon)
	if [[ -s $d/bwrap ]]; then
		read -r bw st <"$d/bwrap"
		[[ -n $st && $(start_time "$bw") == "$st" ]] && kill -KILL "$bw" 2>/dev/null
	fi
	rm -f "$d/pid" "$d/bwrap"
	[[ -e $d/status ]] && echo stopped >"$d/status"
	return 0
}

# box_remove NAME: stopped and its state deleted.
box_remove() {
	box_stop "$1"
	rm -rf "${BOXES:?}/$1"
}

# fault NAME: the fault is set; one with a count in it is used up.
fault() {
	local f=$SBX_FAKE_STATE/faults/$1 n
	[[ -e $f ]] || return 1
	n=$(head -n1 "$f")
	if [[ $n =~ ^count=([0-9]+)$ ]]; then
		n=${BASH_REMATCH[1]}
		((n > 0)) || return 1
		echo "count=$((n - 1))" >"$f.new" && tail -n +2 "$f" >>"$f.new" && mv "$f.new" "$f"
	fi
	return 0
}

# fault_text NAME DEFAULT: the fault file's message line, or DEFAULT.
fault_text() {
	local t
	t=$(grep -v '^count=' "$SBX_FAKE_STATE/faults/$1" 2>/dev/null | head -n1)
	echo "${t:-$2}"
}
