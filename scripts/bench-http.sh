#!/usr/bin/env bash
# HTTP benchmarks as ratios against the thinnest possible handlers, measured in one run (these
# machines are shared and noisy; only same-run ratios mean anything). Starts its own
# redis-server, vcode (embedded and Redis, quotas off, warn logs) and examples/thin_verify.rs,
# drives each with wrk at fixed concurrency after a warm-up, and prints one table. Then measures
# memory per pending code (Redis MEMORY USAGE and used_memory growth, embedded RSS growth).
#
#   scripts/bench-http.sh            # full run: 10 s a row, 1,000,000 pending codes
#   SHORT=1 scripts/bench-http.sh    # CI: 1 s a row, 20,000 pending codes (proves it works)
#   ONLY='verify, (embedded|Redis)$' scripts/bench-http.sh   # only rows matching (and the
#                                    # references); the memory section needs its rows
set -euo pipefail
# Every instance of a run shares one key, as instances sharing a store must.
BENCH_SECRET_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
cd "$(dirname "$0")/.."

SHORT=${SHORT:-0}
ONLY=${ONLY:-}
CONNECTIONS=${CONNECTIONS:-64}
if [ "$SHORT" = 1 ]; then DURATION=${DURATION:-1s}; WARMUP=1s; MANY=20000; else DURATION=${DURATION:-10s}; WARMUP=3s; MANY=1000000; fi
FEW=1000

command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
command -v redis-server >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

cargo build --release --quiet --bin vcode --example thin_verify --example fill_codes
BIN=target/release

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PIDS=()
WORK=$(mktemp -d)
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

wait_for() { # url
  for _ in $(seq 100); do curl -fs -o /dev/null "$1" && return 0; sleep 0.1; done
  echo "no answer from $1" >&2; return 1
}

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --logfile "$WORK/redis.log" & PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
REDIS_URL=redis://127.0.0.1:$REDIS_PORT

THIN_PORT=$(free_port)
$BIN/examples/thin_verify "127.0.0.1:$THIN_PORT" "$REDIS_URL" >"$WORK/thin.log" 2>&1 & PIDS+=($!)
THIN=http://127.0.0.1:$THIN_PORT
wait_for "$THIN/constant"

declare -A URL PID
start_vcode() { # name [VAR=value ...]: sets URL[name] and PID[name]
  local name=$1; shift
  local port; port=$(free_port)
  env VCODE_BIND="127.0.0.1:$port" VCODE_ADMIN_BIND=127.0.0.1:0 RUST_LOG=warn VCODE_DEV_MODE=0 \
    VCODE_SECRET_KEY="$BENCH_SECRET_KEY" \
    VCODE_QUOTA_PHONE_HOUR=0 VCODE_QUOTA_PHONE_DAY=0 VCODE_QUOTA_IP_HOUR=0 \
    VCODE_QUOTA_PHONE_FAILS_DAY=0 VCODE_QUOTA_CLIENT_FAILS_DAY=0 VCODE_QUOTA_GLOBAL_MINUTE=0 \
    VCODE_QUOTA_CAPTCHA_IP_MINUTE=0 "$@" \
    $BIN/vcode >"$WORK/$name.log" 2>&1 &
  PID[$name]=$!; PIDS+=($!)
  URL[$name]=http://127.0.0.1:$port
  wait_for "${URL[$name]}/healthz"
}
restart_vcode() { # name [VAR=value ...]
  kill "${PID[$1]}"; wait "${PID[$1]}" 2>/dev/null || true
  start_vcode "$@"
}

start_vcode embedded
start_vcode redis VCODE_REDIS_URL="$REDIS_URL"

declare -A RPS P50 P99 NON2XX
ROWS=()
# measure NAME URL [wrk script] [VERIFY_PATH] [PHONES]: warm up, then one timed run; keeps
# req/s, p50, p99.
measure() {
  local name=$1 url=$2 script=${3:-} path=${4:-}
  [[ -z $ONLY || $name == thin* || $name =~ $ONLY ]] || return 0
  export PHONES=${5:-}
  local args=(-t1 -c"$CONNECTIONS" --latency)
  [ -n "$script" ] && args+=(-s "scripts/wrk/$script")
  VERIFY_PATH=$path wrk "${args[@]}" -d"$WARMUP" "$url" >/dev/null
  local out; out=$(VERIFY_PATH=$path wrk "${args[@]}" -d"$DURATION" "$url")
  RPS[$name]=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
  P50[$name]=$(awk '$1 == "50%" {print $2}' <<<"$out")
  P99[$name]=$(awk '$1 == "99%" {print $2}' <<<"$out")
  NON2XX[$name]=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  ROWS+=("$name")
}

measure "thin GET constant" "$THIN/constant"
measure "thin POST verify (1 EVALSHA)" "$THIN" verify.lua /verify
measure "verify, embedded" "${URL[embedded]}" verify.lua
measure "verify, Redis" "${URL[redis]}" verify.lua
measure "verify, embedded, 10k phones" "${URL[embedded]}" verify.lua "" 10000
measure "verify, Redis, 10k phones" "${URL[redis]}" verify.lua "" 10000
measure "send, embedded" "${URL[embedded]}" send.lua
measure "send, Redis" "${URL[redis]}" send.lua
measure "captcha create+fetch, embedded" "${URL[embedded]}" captcha.lua
measure "captcha create+fetch, Redis" "${URL[redis]}" captcha.lua

# The cost of the abuse checks: the same sends and verifies with every quota on (client and
# global limits raised so that nothing is refused; the per-phone logs and checks run as usual).
QUOTAS_ON=(VCODE_QUOTA_PHONE_HOUR=5 VCODE_QUOTA_PHONE_DAY=10 VCODE_QUOTA_PHONE_FAILS_DAY=100
  VCODE_QUOTA_CLIENT_FAILS_DAY=1000000
  VCODE_QUOTA_IP_HOUR=1000000 VCODE_QUOTA_GLOBAL_MINUTE=1000000)
restart_vcode embedded "${QUOTAS_ON[@]}"
restart_vcode redis VCODE_REDIS_URL="$REDIS_URL" "${QUOTAS_ON[@]}"
measure "verify, embedded, quotas on" "${URL[embedded]}" verify.lua
measure "verify, Redis, quotas on" "${URL[redis]}" verify.lua
measure "send, embedded, quotas on" "${URL[embedded]}" send.lua
measure "send, Redis, quotas on" "${URL[redis]}" send.lua

# The same verify load against stores holding few and many pending codes.
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/${PID[$1]}/status"; }
used_memory() { redis-cli -p "$REDIS_PORT" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }
selected() { [[ -z $ONLY || $1 =~ $ONLY ]]; }
for count in $FEW $MANY; do
  selected "verify, embedded, $MANY pending" || selected "verify, Redis, $MANY pending" || continue
  redis-cli -p "$REDIS_PORT" flushall >/dev/null
  restart_vcode embedded
  restart_vcode redis VCODE_REDIS_URL="$REDIS_URL"
  before_kb=$(rss_kb embedded)
  $BIN/examples/fill_codes "${URL[embedded]}" "$count"
  after_kb=$(rss_kb embedded)
  measure "verify, embedded, $count pending" "${URL[embedded]}" verify.lua
  # An empty embedded instance from here on: its expiry sweep over the codes would take CPU
  # from the Redis rows.
  restart_vcode embedded
  used_before=$(used_memory)
  $BIN/examples/fill_codes "${URL[redis]}" "$count"
  used_after=$(used_memory)
  measure "verify, Redis, $count pending" "${URL[redis]}" verify.lua
  # The same script with no vcode around it, on the same Redis: what Redis itself does at this size.
  measure "thin POST verify, $count pending" "$THIN" verify.lua /verify
  if [ "$count" = "$MANY" ]; then
    EMBEDDED_BYTES=$(( (after_kb - before_kb) * 1024 / count ))
    REDIS_KEYS=$(redis-cli -p "$REDIS_PORT" dbsize)
    sample=0; total=0
    for key in $(redis-cli -p "$REDIS_PORT" --scan --pattern 'verify_code:{*}:login' | head -200); do
      total=$(( total + $(redis-cli -p "$REDIS_PORT" memory usage "$key") )); sample=$((sample + 1))
    done
    REDIS_BYTES=$(( total / sample ))
    REDIS_USED_BYTES=$(( (used_after - used_before) / count ))
  fi
done

# PostgreSQL rows, bytes per code and the cleanup's cost (scripts/bench-postgres.sh).
source scripts/bench-postgres.sh; bench_postgres

ratio() { awk -v a="${RPS[$1]:-}" -v b="${RPS[$2]:-}" 'BEGIN { if (a && b) printf "%.2fx", a / b; else printf "-" }'; }
printf '\n%-34s %10s %9s %9s %8s  %s\n' "row ($CONNECTIONS connections, $DURATION)" "req/s" "p50" "p99" "non-2xx" "ratio"
for name in "${ROWS[@]}"; do
  case $name in
    "verify, embedded"*) against="thin GET constant" ;;
    "verify, Redis, "*" pending") against="thin POST verify, ${name#verify, Redis, }" ;;
    "send, embedded"*|"captcha create+fetch"*) against="thin GET constant" ;;
    *Redis*) against="thin POST verify (1 EVALSHA)" ;;
    *) against="" ;;
  esac
  r=""; [ -n "$against" ] && r="$(ratio "$name" "$against") of ${against%% (*}"
  printf '%-34s %10s %9s %9s %8s  %s\n' "$name" "${RPS[$name]}" "${P50[$name]}" "${P99[$name]}" "${NON2XX[$name]:-0}" "$r"
done
printf '\nverify throughput, %s vs %s pending codes: embedded %s, Redis %s (thin EVALSHA on that Redis: %s)\n' \
  "$MANY" "$FEW" \
  "$(ratio "verify, embedded, $MANY pending" "verify, embedded, $FEW pending")" \
  "$(ratio "verify, Redis, $MANY pending" "verify, Redis, $FEW pending")" \
  "$(ratio "thin POST verify, $MANY pending" "thin POST verify, $FEW pending")"
printf 'abuse checks on vs off: send embedded %s, send Redis %s, verify embedded %s, verify Redis %s\n' \
  "$(ratio "send, embedded, quotas on" "send, embedded")" "$(ratio "send, Redis, quotas on" "send, Redis")" \
  "$(ratio "verify, embedded, quotas on" "verify, embedded")" "$(ratio "verify, Redis, quotas on" "verify, Redis")"
printf 'memory per pending code: Redis %s bytes (MEMORY USAGE, mean of 200 keys; %s keys), %s bytes (used_memory growth / %s codes), embedded %s bytes (RSS growth / %s codes)\n' \
  "${REDIS_BYTES:--}" "${REDIS_KEYS:--}" "${REDIS_USED_BYTES:--}" "$MANY" "${EMBEDDED_BYTES:--}" "$MANY"
postgres_summary
printf 'machine: %s, %s cores; %s\n' "$(uname -m)" "$(nproc)" "$(date -u +%Y-%m-%d)"
