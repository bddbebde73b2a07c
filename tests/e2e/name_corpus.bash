# The hostile name corpus for name_corpus.bats: name_corpus fills the
# array NAMES with distinct valid file names (1..255 bytes, no "/" or NUL,
# not "." or "..") that have broken file systems, shells and protocols:
# whitespace and control bytes, quotes, shell syntax, globs, option-like
# and sbfs-like names, unicode (combining, bidi, emoji, noncharacters),
# invalid UTF-8 and names of exactly 255 bytes.

name_corpus() {
	NAMES=()
	local c k
	# Every special byte or sequence alone, inside, leading and trailing.
	local specials=(
		' ' $'\t' $'\n' $'\r' $'\v' $'\f' $'\e' $'\x7f' '"' "'" '\' '$' '`'
		';' '|' '&' '*' '?' '[' ']' '{' '}' '(' ')' '<' '>' '#' '~' '%' '!'
		'=' ',' ':' '@' '^' '+' $'\xff' $'\x80' $'\xc2\xa0'
	)
	for c in "${specials[@]}"; do
		NAMES+=("$c" "a${c}b" "${c}lead" "trail${c}")
	done
	# Each C0 control byte on its own.
	for ((k = 1; k < 32; k++)); do
		NAMES+=("ctl$(printf "\\x$(printf %02x "$k")")end")
	done
	NAMES+=(
		# shell and command injection
		'$(touch pwned_a)' '`touch pwned_b`' 'x;touch pwned_c' 'x|touch pwned_d'
		'x&&touch pwned_e' '$(touch${IFS}pwned_f)' "'; touch pwned_g; '"
		'"; touch pwned_h; "' ' -exec touch pwned_i ;' $'x\ntouch pwned_j'
		'$HOME' '${IFS}' '$((1+1))' '!!' '$0' '$@' '>out' '2>&1' '<<EOF'
		# printf, escapes and data formats taken literally
		'%s%n%x' '%%' '\n' '\x41' '\0' '\u0000' '{"a":1}' 'a\"b' '<?xml?>'
		'null' 'true' 'NaN' '0' '-1' '1e309'
		# globs and brace expansion
		'[a-z]' '[!x]' '**' '{a,b}' '~root' '*.*' '?*' '[[:alpha:]]'
		# option-like
		'-rf' '--help' '-' '--' '-n' '-e' '-- -x' '--version' '-o allow_other'
		'-delete' '-print0' '+x'
		# sbfs and FUSE control-like names
		'.sbfs' '.sbfs.sock' 'user.sbfs.control' '.fuse_hidden0000000100000001'
		'.nfs000000001' '.sbfs-spool' 'sbfs-control' '.Trash-1000' 'workspace'
		'.git' '.gitignore'
		# dots
		'...' '.hidden' '..hidden' '. ' ' .' '.. ' '. .' $'.\n' '....' '.-'
		# case and reserved names elsewhere
		'Case' 'case' 'CASE' 'CON' 'nul' 'aux.txt' 'COM1' 'trailing.'
		# unicode: precomposed and combining (two distinct names), bidi,
		# scripts, emoji with ZWJ, BOM, zero-width, look-alike slashes,
		# separators, replacement char, noncharacters, the last code point
		$'caf\xc3\xa9' $'cafe\xcc\x81' $'\xe2\x80\xaeevil.txt' $'\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d'
		$'\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7' $'\xf0\x9f\x98\x80'
		$'\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7'
		$'\xef\xbb\xbfbom' $'zero\xe2\x80\x8bwidth' $'a\xef\xbc\x8fb' $'a\xe2\x88\x95b'
		$'\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e' $'\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80'
		$'ls\xe2\x80\xa8x' $'ps\xe2\x80\xa9x' $'\xef\xbf\xbd' $'\xef\xbf\xbf' $'\xf4\x8f\xbf\xbf'
		$'e\xcc\x81\xcc\x82\xcc\x83\xcc\x84' $'\xe1\x84\x80\xe1\x85\xa1'
		# invalid UTF-8: lone bytes, overlong, surrogate, truncated, 5-byte
		$'\xfe\xff' $'\xc0\x80' $'\xed\xa0\x80' $'\xe2\x82' $'\xf8\x88\x80\x80\x80'
		$'\xc3' $'ok\xc3(' $'\xf0\x9f\x98' $'mid\xa0dle'
		# exactly 255 bytes: ASCII, 3-byte characters, 4-byte plus ASCII,
		# and ending in a space or a newline
		"$(printf 'n%.0s' {1..255})"
		"$(printf '\xe6\x97\xa5%.0s' {1..85})"
		"$(printf '\xf0\x9f\x98\x80%.0s' {1..63})abc"
		"$(printf 's%.0s' {1..254}) "
		"$(printf 'l%.0s' {1..254})"$'\n'
	)
	# refuse a corpus that breaks its own rules
	local -A seen=()
	local n len
	for n in "${NAMES[@]}"; do
		len=$(LC_ALL=C; echo "${#n}")
		if [[ -z $n || $n == . || $n == .. || $n == */* ]] || ((len > 255)); then
			printf 'name_corpus: invalid name %q\n' "$n" >&2
			return 1
		fi
		[[ -z ${seen[$n]:-} ]] || { printf 'name_corpus: duplicate %q\n' "$n" >&2; return 1; }
		seen[$n]=1
	done
}
