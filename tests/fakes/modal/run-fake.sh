#!/bin/sh
# Starts the fake Modal on a free loopback port and prints its
# MODAL_SERVER_URL. Usage: run-fake.sh STATE_DIR [tls]  (pidfile: STATE_DIR/pid)
#   plain: http://127.0.0.1:PORT
#   tls:   https://localhost:PORT, every endpoint (control plane and task
#          router) over TLS with a server certificate of the fake's own CA,
#          STATE_DIR/tls/ca.pem, which a client must be given (-o ca_file=,
#          SSL_CERT_FILE or SSL_CERT_DIR)
# The credentials it accepts: MODAL_TOKEN_ID=ak-fake MODAL_TOKEN_SECRET=as-fake
# (or FAKE_MODAL_TOKEN_ID/SECRET). Needs python3-grpcio and bubblewrap, and
# openssl for tls.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
state=${1:?usage: run-fake.sh STATE_DIR [tls]}
tls=${2:-}
mkdir -p "$state"
state=$(cd "$state" && pwd)
rm -f "$state/url"
rm -rf "$state/tls"
# The server must not hold the caller's descriptors (bats waits for its fd 3
# to close before it finishes).
(
	for fd in 3 4 5 6 7 8 9; do eval "exec $fd>&-"; done
	exec env FAKE_MODAL_STATE="$state" FAKE_MODAL_TLS="$([ "$tls" = tls ] && echo 1 || echo 0)" \
		/usr/bin/python3 "$here/fake_modal.py" \
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
