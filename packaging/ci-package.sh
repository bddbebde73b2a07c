#!/bin/sh
# CI stage: build the Debian package from a copy of the tree, run lintian
# (errors and warnings fail), install the .deb, run the autopkgtest smoke
# and the completion tests against the installed files. Prints each step's
# duration and ends with "N passed, N failed"; exits non-zero on failure.
# Run as root from the top of a checkout: packaging/ci-package.sh [WORKDIR]
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/sbfs-pkg.XXXXXX")}
mkdir -p "$WORK"
passed=0
failed=0
failed_steps=

now() { date +%s.%N; }

# step NAME CMD...: runs CMD with its output in $WORK/NAME.log, shown on
# failure; counts the result and prints the duration.
step() {
	name=$1
	shift
	t0=$(now)
	if ("$@") >"$WORK/$name.log" 2>&1; then
		passed=$((passed + 1))
		result=ok
	else
		failed=$((failed + 1))
		failed_steps="$failed_steps $name"
		result=FAILED
		tail -n 40 "$WORK/$name.log" | sed "s/^/  $name| /"
	fi
	printf '%-14s %-6s %6.1f s  (log: %s)\n' "$name" "$result" \
		"$(awk -v a="$t0" -v b="$(now)" "BEGIN { print b - a }")" "$WORK/$name.log"
}

# needrestart's scan after every install adds a minute and restarts nothing
# a CI stage needs.
export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1

install_tools() {
	apt-get install -y --no-install-recommends devscripts debhelper lintian \
		scdoc dpkg-dev fakeroot zsh bash-completion man-db \
		meson ninja-build pkg-config gcc libfuse3-dev libcurl4-openssl-dev \
		libjansson-dev fuse3 bubblewrap
}

# A copy of the tree (tracked files as they are in the work tree), with
# packaging/debian as debian/: the checkout stays clean.
copy_tree() {
	rm -rf "$WORK/src" && mkdir -p "$WORK/src/sbfs-0"
	(cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 tar cf - --no-recursion) | tar xf - -C "$WORK/src/sbfs-0"
	cp -r "$WORK/src/sbfs-0/packaging/debian" "$WORK/src/sbfs-0/debian"
}

build_package() {
	# One compile job per core (dpkg-buildpackage runs one by default).
	export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$(nproc)}"
	# Source and binary, unsigned: lintian checks both.
	cd "$WORK/src/sbfs-0" && dpkg-buildpackage -us -uc
}

run_lintian() {
	# --fail-on warning: errors and warnings fail; info and pedantic do not.
	lintian --fail-on error,warning --display-info "$WORK"/src/sbfs_*.changes
}

install_package() {
	apt-get install -y --no-install-recommends "$WORK"/src/sbfs_*.deb &&
		test -x /usr/bin/sbfs && man -w sbfs && man -w sbexec
}

# The package's binaries, not a source install's in /usr/local/bin.
PKG_PATH=/usr/bin:/bin:/usr/sbin:/sbin

run_smoke() {
	PATH=$PKG_PATH AUTOPKGTEST_TMP=$WORK "$WORK/src/sbfs-0/debian/tests/smoke"
}

run_completion_tests() {
	PATH=$PKG_PATH SBFS_COMPLETION_BASH=/usr/share/bash-completion/completions/sbfs \
	SBFS_COMPLETION_ZSH_DIR=/usr/share/zsh/vendor-completions \
		"$WORK/src/sbfs-0/completion/test-completion.sh"
}

step apt-get install_tools
step copy-tree copy_tree
step build build_package
step lintian run_lintian
step install install_package
step smoke run_smoke
step completion run_completion_tests

[ -n "$failed_steps" ] && echo "failed:$failed_steps"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
