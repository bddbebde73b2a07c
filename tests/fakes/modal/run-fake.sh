#!/bin/sh
# Starts the fake Modal on a free loopback port and prints its
# MODAL_SERVER_URL. Usage: run-fake.sh STATE_DIR  (pidfile: STATE_DIR/pid)
# The credentials it accepts: MODAL_TOKEN_ID=ak-fake MODAL_TOKEN_SECRET=as-fake
# (or FAKE_MODAL_TOKEN_ID/SECRET). Needs python3-grpcio and bubblewrap.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
state=${1:?usage: run-fake.sh STATE_DIR}
mkdir -p "$state"
state=$(cd "$state" && pwd)
rm -f "$state/url"
# The server must not hold the caller's descriptors (bats waits for its fd 3
# to close before it finishes).
(
	for fd in 3 4 5 6 7 8 9; do eval "exec $fd>&-"; done
	exec env FAKE_MODAL_STATE="$state" /usr/bin/python3 "$here/fake_modal.py" \
		</dev/null >"$state/fake.log" 2>&1
) &
echo $! >"$state/pid"
i=0
while [ ! -s "$state/url" ]; do
	if ! kill -0 "$(cat "$state/pid")" 2>/dev/null || [ $i -ge 100 ]; then
		echo "fake Modal did not start; see $state/fake.log" >&2
		cat "$state/fake.log" >&2
		exit 1
	fi
	i=$((i + 1))
	sleep 0.1
done
cat "$state/url"
