#!/bin/bash
# Tests the bash and zsh completions: bash through its completion function
# with COMP_WORDS split as readline splits them, zsh through its own
# completion system in a pseudo-terminal (zsh/zpty). A local sbfs mount
# (whose path holds a space) checks mountpoint completion.
#   SBFS_COMPLETION_BASH     bash file (default: completion/sbfs.bash here)
#   SBFS_COMPLETION_ZSH_DIR  directory holding _sbfs (default: completion/)
#   sbfs and sbexec are taken from PATH (SBFS_BUILD_DIR puts a build first).
# Prints "N passed, N failed"; exits non-zero on failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BASH_FILE=${SBFS_COMPLETION_BASH:-$here/sbfs.bash}
ZSH_DIR=${SBFS_COMPLETION_ZSH_DIR:-$here}
if [[ -n ${SBFS_BUILD_DIR:-} ]]; then
	SBFS_BUILD_DIR=$(cd "$SBFS_BUILD_DIR" && pwd)
	PATH=$SBFS_BUILD_DIR/daemon:$SBFS_BUILD_DIR/shim:$PATH
fi
passed=0 failed=0

T=$(mktemp -d "${TMPDIR:-/tmp}/sbfs-compl.XXXXXX")
M="$T/my box"
mkdir "$M"
cleanup() {
	grep -q " ${M// /\\\\040} fuse.sbfs " /proc/self/mounts &&
		fusermount3 -u -z "$M" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

ok() { passed=$((passed + 1)); echo "ok   $*"; }
not_ok() { failed=$((failed + 1)); echo "FAIL $*"; }

# ---- bash ----

# Splits $1 into COMP_WORDS as readline does: at blanks, and at the other
# COMP_WORDBREAKS characters, which form words of their own.
split_like_readline() {
	local line=$1 word= c i breaks=$' \t\n"\'><=;|&(:'
	COMP_WORDS=()
	for ((i = 0; i < ${#line}; i++)); do
		c=${line:i:1}
		if [[ $c == [[:blank:]] ]]; then
			[[ -n $word ]] && COMP_WORDS+=("$word")
			word=
		elif [[ $breaks == *"$c"* ]]; then
			[[ -n $word && $word != *[=:]* ]] && { COMP_WORDS+=("$word"); word=; }
			[[ -n $word && ${word: -1} != [=:] ]] && { COMP_WORDS+=("$word"); word=; }
			word+=$c
		else
			[[ -n $word && ${word: -1} == [=:] ]] && { COMP_WORDS+=("$word"); word=; }
			word+=$c
		fi
	done
	COMP_WORDS+=("$word")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
}

# bash_complete LINE: the replies, one a line, for the cursor at the end.
bash_complete() (
	# shellcheck disable=SC1090
	source "$BASH_FILE"
	COMP_WORDBREAKS=$' \t\n"\'><=;|&(:'
	COMP_LINE=$1
	COMP_POINT=${#1}
	split_like_readline "$1"
	local cmd=${COMP_WORDS[0]} fn
	fn=$(complete -p "$cmd" 2>/dev/null | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
	[[ -n $fn ]] || { echo "no completion for $cmd"; return; }
	compopt() { :; } # only valid inside real completion
	"$fn" "$cmd" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
	printf '%s\n' "${COMPREPLY[@]}"
)

# expect_bash LINE WORD...: every WORD is among the replies.
expect_bash() {
	local line=$1 w out missing=
	shift
	out=$(bash_complete "$line")
	for w in "$@"; do
		grep -qxF -- "$w" <<<"$out" || missing+=" '$w'"
	done
	if [[ -z $missing ]]; then
		ok "bash: '$line' offers $*"
	else
		not_ok "bash: '$line' lacks$missing; got: $(tr '\n' ' ' <<<"$out")"
	fi
}

# expect_bash_not LINE WORD: WORD is not among the replies.
expect_bash_not() {
	if bash_complete "$1" | grep -qxF -- "$2"; then
		not_ok "bash: '$1' offers '$2'"
	else
		ok "bash: '$1' does not offer '$2'"
	fi
}

# ---- zsh ----

# zsh_complete_all LINE...: what zsh's completion system lists for each
# LINE, into $T/zsh.1, $T/zsh.2...: one zsh in a pty, compinit loading
# _sbfs from ZSH_DIR once.
zsh_complete_all() {
	local IFS=$'\n'
	# In $T, so that file names in the caller's directory cannot match.
	cd "$T" || return
	SBFS_ZLINES="$*" SBFS_ZDIR=$ZSH_DIR SBFS_ZOUT=$T/zsh zsh -f <<'ZEOF'
zmodload zsh/zpty || exit 1
# read_until PATTERN: output until PATTERN shows, in $out (20 s at most).
read_until() {
	out=
	local chunk
	integer deadline=$(( SECONDS + 20 ))
	while (( SECONDS < deadline )); do
		zpty -r -t z chunk && out+=$chunk || sleep 0.05
		[[ $out == *$1* ]] && return 0
	done
	return 1
}
zpty z zsh -f -i
zpty -w z "bindkey -e; PS1='' PROMPT='' RPS1=''; unsetopt zle_bracketed_paste 2>/dev/null; fpath=(${(q)SBFS_ZDIR} \$fpath); autoload -Uz compinit; compinit -u -D; zstyle ':completion:*' menu no; LISTMAX=0"
zpty -w z 'print ZRE""ADY'
# Until zle reads the line, the tty driver would eat ^D and ^U.
read_until ZREADY
integer i=0
for line in "${(@f)SBFS_ZLINES}"; do
	(( i++ ))
	# ^D at the end of a line lists the choices without inserting any;
	# ^U then kills the line, and the marker's echo ends this case.
	zpty -n -w z "${line}"$'\C-d'
	zpty -n -w z $'\C-u''echo $((6*7))-DONE-'$i$'\n'
	read_until "42-DONE-$i"
	print -r -- "${out//$'\r'/}" >"$SBFS_ZOUT.$i"
done
zpty -d z
ZEOF
}

zsh_cases=()
zsh_expect=()
# expect_zsh LINE WORD...: queued; checked after one zsh session ran them.
expect_zsh() {
	zsh_cases+=("$1")
	shift
	local IFS=$'\n'
	zsh_expect+=("$*")
}

check_zsh() {
	zsh_complete_all "${zsh_cases[@]}"
	local i w out missing line
	for i in "${!zsh_cases[@]}"; do
		line=${zsh_cases[i]}
		out=$(cat "$T/zsh.$((i + 1))" 2>/dev/null)
		missing=
		# one expected word a line (a mount path holds a space)
		while IFS= read -r w; do
			grep -qF -- "$w" <<<"$out" || missing+=" '$w'"
		done <<<"${zsh_expect[i]}"
		if [[ -z $missing ]]; then
			ok "zsh: '$line' lists $(tr '\n' ' ' <<<"${zsh_expect[i]}")"
		else
			not_ok "zsh: '$line' lacks$missing; got: $(tr -s '\n' ' ' <<<"$out" | tail -c 600)"
		fi
	done
}

# ---- the mount ----

if ! sbfs -o "local_root=$T" "$M"; then
	not_ok "could not mount a local sandbox at '$M' (mountpoint tests need one)"
fi

expect_bash "sbfs st" status
expect_bash "sbfs s" status sync sweep
expect_bash "sbfs u" umount
expect_bash "sbfs l" list
expect_bash "sbfs d" destroy
expect_bash "sbfs umount --j" --json
expect_bash "sbfs -" -f -d -o --help
expect_bash "sbfs -o back" backend=
expect_bash "sbfs -o backend=" local docker modal
expect_bash "sbfs -o keep,backend=d" docker
expect_bash "sbfs -o writeback,att" writeback,attach=
expect_bash "sbfs -o egress_enforcement=" sni
expect_bash "sbfs -o backend=sbx,host_network_policy=d" deny-all
expect_bash "sbfs -o pi" pids=
expect_bash "sbfs -oback" backend=
expect_bash "sbfs sweep -o backend=m" modal
expect_bash "sbfs status --j" --json
expect_bash "sbfs status " "$M"
expect_bash "sbfs sync " "$M"
expect_bash "sbfs refresh " "$M"
expect_bash_not "sbfs status " /
expect_bash "sbfs sync --p" --progress
expect_bash "sbfs status --w" --watch
expect_bash "sbexec -m " "$M"
expect_bash "sbexec -" -m -t -T -e -w
expect_bash "sbexec --timeout 5 ech" echo
expect_bash "sbexec -T 5 -t ech" echo

expect_zsh "sbfs s" status sync sweep
expect_zsh "sbfs u" umount
expect_zsh "sbfs refresh " "$M"
expect_zsh "sbfs -o back" "sandbox backend"
expect_zsh "sbfs -o backend=" local docker modal
expect_zsh "sbfs -o keep,egress_enforcement=" sni
expect_zsh "sbfs -o host_network_policy=a" allow-all
expect_zsh "sbfs status " "$M"
expect_zsh "sbexec -m " "$M"
expect_zsh "sbexec -" --mount --timeout --tty

check_zsh

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
