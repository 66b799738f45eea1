#!/usr/bin/env bash
# Two builds measured at once: both serve on CPU 0, each driven by its own `wrk -t1` on CPU 1, in
# the same timed windows; each build's CPU per request from /proc/<pid>/stat. Rounds of one build
# measured one after the other drift by 10-25 % on these shared VMs, more than most changes;
# measured together, the drift is the same for both. The second instance on the core pays a
# little more than the first (the same build against itself: 1.02-1.04x), so the builds run once
# in each order and the estimate is the square root of the two orders' medians' quotient.
#
#   scripts/bench-at-once.sh OLD_BIN NEW_BIN     # sends, every default limit on (embedded store)
#   SCRIPT=verify.lua ENV='VCODE_VERIFY_BY=phone VCODE_FRAUD_GUARD=off ...' scripts/bench-at-once.sh A B
#   ROUNDS=3 WARM=20 DURATION=10 (seconds) are the defaults.
#
# The defaults are bench-http.sh's "defaults" rows: clients spread over a million addresses
# behind a trusted proxy (loopback), the guard's thresholds out of a sending load's reach. ENV
# replaces them (both builds get it).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: scripts/bench-at-once.sh OLD_BIN NEW_BIN}
NEW=${2:?usage: scripts/bench-at-once.sh OLD_BIN NEW_BIN}
ROUNDS=${ROUNDS:-3}
WARM=${WARM:-20}
DURATION=${DURATION:-10}
SCRIPT=${SCRIPT:-send.lua}
read -r -a SETTINGS <<<"${ENV:-VCODE_TRUSTED_PROXIES=127.0.0.1 VCODE_FRAUD_EVIDENCE=1000000000}"
export PHONES=100000000 CLIENTS=${CLIENTS:-1000000}

command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
[ "$(nproc)" -ge 2 ] || { echo "needs two cores: the servers on one, the load on the other" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

start() { # bin port: the instance's pid
  env VCODE_BIND="127.0.0.1:$2" VCODE_ADMIN_BIND=127.0.0.1:0 RUST_LOG=warn VCODE_DEV_MODE=0 \
    VCODE_SECRET_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" "${SETTINGS[@]}" \
    taskset -c 0 "$1" >"$WORK/vcode-$2.log" 2>&1 &
  echo $!
}
ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
load() { # port seconds out
  taskset -c 1 wrk -t1 -c64 -d"$2s" -s "scripts/wrk/$SCRIPT" "http://127.0.0.1:$1" >"$3"
}
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# order FIRST_BIN SECOND_BIN: ROUNDS ratios (second / first, CPU per request), one a line.
order() {
  local first_port second_port first second
  first_port=$(free_port); second_port=$(free_port)
  first=$(start "$1" "$first_port"); PIDS+=("$first")
  second=$(start "$2" "$second_port"); PIDS+=("$second")
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$first_port/healthz" >/dev/null &&
      curl -fs "http://127.0.0.1:$second_port/healthz" >/dev/null && break
    sleep 0.1
  done
  load "$first_port" "$WARM" /dev/null & load "$second_port" "$WARM" /dev/null; wait
  for _ in $(seq "$ROUNDS"); do
    local a0 b0 a1 b1
    a0=$(ticks "$first"); b0=$(ticks "$second")
    load "$first_port" "$DURATION" "$WORK/first.out" & load "$second_port" "$DURATION" "$WORK/second.out"; wait
    a1=$(ticks "$first"); b1=$(ticks "$second")
    local na nb
    na=$(awk '/requests in/ {print $1}' "$WORK/first.out"); nb=$(awk '/requests in/ {print $1}' "$WORK/second.out")
    awk -v a=$(((a1 - a0) * TICK_US)) -v b=$(((b1 - b0) * TICK_US)) -v na="$na" -v nb="$nb" \
      'BEGIN { printf "%.4f %.2f %.2f\n", (b / nb) / (a / na), a / na, b / nb }'
    grep -h 'Non-2xx' "$WORK/first.out" "$WORK/second.out" >&2 || true
  done
  kill "$first" "$second"; wait "$first" "$second" 2>/dev/null || true
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "$SCRIPT, ${ROUNDS} rounds of ${DURATION}s after ${WARM}s, each order (CPU µs a request)"
order "$OLD" "$NEW" >"$WORK/new-second"
order "$NEW" "$OLD" >"$WORK/old-second"
awk '{ printf "  old %s µs, new %s µs: new/old %s\n", $2, $3, $1 }' "$WORK/new-second"
awk '{ printf "  new %s µs, old %s µs: old/new %s\n", $2, $3, $1 }' "$WORK/old-second"
new_second=$(cut -d' ' -f1 "$WORK/new-second" | median)
old_second=$(cut -d' ' -f1 "$WORK/old-second" | median)
awk -v n="$new_second" -v o="$old_second" \
  'BEGIN { printf "new / old, CPU per request: %.3fx (medians: %.3f with the new build second, %.3f with the old one second)\n", sqrt(n / o), n, o }'
