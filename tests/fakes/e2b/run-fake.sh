#!/bin/sh
# Starts the fake E2B on a free loopback port. Usage: run-fake.sh STATE_DIR
# [tls]. Prints the environment a client needs, one VAR=value a line:
#   plain: E2B_API_URL and E2B_SANDBOX_URL (envd routed by headers)
#   tls:   E2B_DOMAIN=e2b.localhost:PORT (api.<domain>, 49983-<id>.<domain>,
#          which libcurl resolves to loopback), and FAKE_E2B_CA, the CA
#          file a client must be given (-o ca_file= or SSL_CERT_FILE)
# plus E2B_API_KEY. Needs python3, bubblewrap, nsenter, openssl (tls).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
state=${1:?usage: run-fake.sh STATE_DIR [tls]}
tls=${2:-}
mkdir -p "$state"
state=$(cd "$state" && pwd)
rm -f "$state/url" "$state/faults.json"
# The server must not hold the caller's descriptors (bats waits for its fd 3
# to close before it finishes).
(
	for fd in 3 4 5 6 7 8 9; do eval "exec $fd>&-"; done
	exec env FAKE_E2B_STATE="$state" FAKE_E2B_TLS="$([ "$tls" = tls ] && echo 1 || echo 0)" \
		/usr/bin/python3 "$here/fake_e2b.py" </dev/null >"$state/fake.log" 2>&1
) &
echo $! >"$state/pid"
i=0
while [ ! -s "$state/url" ]; do
	if ! kill -0 "$(cat "$state/pid")" 2>/dev/null || [ $i -ge 150 ]; then
		echo "fake E2B did not start; see $state/fake.log" >&2
		cat "$state/fake.log" >&2
		exit 1
	fi
	i=$((i + 1))
	sleep 0.1
done
echo "E2B_API_KEY=${FAKE_E2B_API_KEY:-e2b_fake_key}"
if [ "$tls" = tls ]; then
	echo "E2B_DOMAIN=$(cat "$state/url")"
	echo "FAKE_E2B_CA=$state/tls/ca.pem"
else
	set -- $(cat "$state/url")
	echo "E2B_API_URL=$1"
	echo "E2B_SANDBOX_URL=$2"
fi
