#!/bin/sh
# Stops the fake E2B started by run-fake.sh STATE_DIR (killing every
# sandbox it ran) and removes its sandboxes' directories.
set -u
state=${1:?usage: stop-fake.sh STATE_DIR}
[ -s "$state/pid" ] || exit 0
pid=$(cat "$state/pid")
kill -TERM "$pid" 2>/dev/null || exit 0
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
	i=$((i + 1))
	sleep 0.1
done
kill -KILL "$pid" 2>/dev/null || true
rm -f "$state/pid"
rm -rf "$state/sandboxes"
