#!/usr/bin/env bash
# What a change costs per request: the same sends and verifies against an older build and the
# current one, in one run, on one redis-server, alternating the two builds row by row. Reports
# the server's own CPU per request (utime + stime from /proc/<pid>/stat over the timed run,
# divided by the requests served), which a shared, busy machine disturbs far less than req/s,
# and req/s beside it; on the Redis and PostgreSQL rows also the server's own CPU per request.
#
#   scripts/bench-before-after.sh 7e7a6cf          # build 7e7a6cf (cached), 3 rounds of 10 s
#   BEFORE_BIN=path/to/vcode scripts/bench-before-after.sh label
#   ROUNDS=1 DURATION=3s scripts/bench-before-after.sh 7e7a6cf
#   DEFAULTS=1 scripts/bench-before-after.sh 7e7a6cf   # every default limit on, as bench-http.sh's
#                   "defaults" rows: clients spread over a million addresses behind a trusted
#                   proxy (loopback), so that no limit refuses the load
#   POSTGRES=1 scripts/bench-before-after.sh 7e7a6cf   # also "verify PostgreSQL", "send PostgreSQL"
#                   (a server of the script's own, Debian's postgresql with its durable
#                   defaults, a database per build; the rows count vcode's CPU, and below them
#                   the server's: all its processes', as redis-server's on the Redis rows)
#
# Both builds run with the quotas off (the load uses few addresses; DEFAULTS=1: on) and warn
# logs, as in bench-http.sh. AFTER_ENV (default: the fraud guard on, counting every send, its thresholds out
# of reach of a load that never verifies: a billion, see bench-http.sh) goes to the current
# build only: an older build refuses variables it does not know (and one from before
# 2026-12-07 any VCODE_FRAUD_EVIDENCE above 1000000). BEFORE_ENV (default none) goes to the older one: the same
# as AFTER_ENV for a build that has the guard, or, with BEFORE_BIN=target/release/vcode,
#   BEFORE_BIN=target/release/vcode BEFORE_ENV=VCODE_FRAUD_GUARD=off scripts/bench-before-after.sh 'guard off'
# measures the guard itself.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${1:?usage: scripts/bench-before-after.sh <git revision or label>}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
SECRET_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

# AFTER_BIN=path: a build of the current tree made beforehand (not rebuilt here).
if [ -z "${AFTER_BIN:-}" ]; then
  cargo build --release --quiet --bin vcode
  AFTER_BIN=target/release/vcode
fi
if [ -z "${BEFORE_BIN:-}" ]; then
  # A worktree of the older revision, built once and kept under target/ for the next run.
  tree=target/before-after/$BEFORE
  [ -d "$tree" ] || git worktree add --detach "$tree" "$BEFORE" >/dev/null
  (cd "$tree" && cargo build --release --quiet --bin vcode)
  BEFORE_BIN=$tree/target/release/vcode
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PIDS=()
WORK=$(mktemp -d)
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # The postmaster is no child of this shell: wait for it to have stopped writing its WAL.
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$WORK" || true
}
trap cleanup EXIT

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --logfile "$WORK/redis.log" & PIDS+=($!)
REDIS_PID=$!
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

if [ -n "${POSTGRES:-}" ]; then
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  pg_as_owner() { # PostgreSQL refuses root
    if [ "$(id -u)" = 0 ]; then setpriv --reuid postgres --regid postgres --init-groups "$@"; else "$@"; fi
  }
  mkdir -p "$WORK/pg"; [ "$(id -u)" = 0 ] && chown postgres:postgres "$WORK" "$WORK/pg"
  pg_as_owner "$PG_BIN/initdb" -D "$WORK/pg" -U vcode --auth=trust -E UTF8 --locale=C >/dev/null
  PG_PORT=$(free_port)
  pg_as_owner "$PG_BIN/postgres" -D "$WORK/pg" -p "$PG_PORT" -h 127.0.0.1 -k '' \
    -c shared_buffers=256MB >"$WORK/pg.log" 2>&1 & PIDS+=($!)
  for _ in $(seq 100); do "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break; sleep 0.1; done
  # The postmaster itself ($! is the subshell that runs pg_as_owner), for the cleanup.
  PG_PID=$(head -1 "$WORK/pg/postmaster.pid")
  PIDS+=("$PG_PID")
  for build in before after; do
    "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U vcode "vcode_$build"
  done
fi

declare -A URL PID
LIMITS=(VCODE_QUOTA_PHONE_HOUR=0 VCODE_QUOTA_PHONE_DAY=0 VCODE_QUOTA_IP_HOUR=0
  VCODE_QUOTA_PHONE_FAILS_DAY=0 VCODE_QUOTA_CLIENT_FAILS_DAY=0 VCODE_QUOTA_GLOBAL_MINUTE=0
  VCODE_QUOTA_CAPTCHA_IP_MINUTE=0)
if [ -n "${DEFAULTS:-}" ]; then
  LIMITS=(VCODE_TRUSTED_PROXIES=127.0.0.1)
  export CLIENTS=1000000 # scripts/wrk/common.lua: X-Forwarded-For from that many addresses
fi
start() { # name binary [VAR=value ...]
  local name=$1 bin=$2; shift 2
  local port; port=$(free_port)
  env VCODE_BIND="127.0.0.1:$port" VCODE_ADMIN_BIND=127.0.0.1:0 RUST_LOG=warn \
    VCODE_SECRET_KEY="$SECRET_KEY" "${LIMITS[@]}" "$@" "$bin" >"$WORK/$name.log" 2>&1 &
  PID[$name]=$!; PIDS+=($!)
  URL[$name]=http://127.0.0.1:$port
  for _ in $(seq 100); do curl -fs -o /dev/null "${URL[$name]}/healthz" && return 0; sleep 0.1; done
  echo "$name did not start:" >&2; cat "$WORK/$name.log" >&2; return 1
}
read -r -a AFTER_VARS <<<"${AFTER_ENV-VCODE_FRAUD_EVIDENCE=1000000000}"
read -r -a BEFORE_VARS <<<"${BEFORE_ENV-}"
for build in before after; do
  bin=$BEFORE_BIN; extra=("${BEFORE_VARS[@]}")
  [ $build = after ] && bin=$AFTER_BIN && extra=("${AFTER_VARS[@]}")
  start "$build embedded" "$bin" "${extra[@]}"
  start "$build Redis" "$bin" VCODE_REDIS_URL="redis://127.0.0.1:$REDIS_PORT" "${extra[@]}"
  if [ -n "${POSTGRES:-}" ]; then
    start "$build PostgreSQL" "$bin" \
      VCODE_DATABASE_URL="postgres://vcode@127.0.0.1:$PG_PORT/vcode_$build" "${extra[@]}"
  fi
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The kernel's share and its cause, per request: system ticks, system calls, context
# switches and page faults (perf's software counters, every thread of the server, only while wrk runs; no
# hardware counter is needed). Callgrind counts user-space instructions only; where CPU and
# instructions disagree, these say whether the difference is the kernel's (more, smaller reads
# and writes when the store answers later and fewer requests share a wake-up).
sys_ticks() { awk '{print $15}' "/proc/$1/stat"; }
KERNEL_COUNTS=$(command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1 && echo 1 || true)
# The PostgreSQL server's CPU: the postmaster's and its children's (the backends, which the
# builds' pools keep open across the rows; one that ends within a timed run is not counted).
server_ticks() { # store
  case $1 in
    Redis) cpu_ticks "$REDIS_PID" ;;
    PostgreSQL) for pid in "$PG_PID" $(pgrep -P "$PG_PID"); do cpu_ticks "$pid" 2>/dev/null || true; done |
      awk '{s += $1} END {print s + 0}' ;;
    *) echo 0 ;;
  esac
}
TICK=$(getconf CLK_TCK)
declare -A CPU RPS SERVER_CPU SYS SYSCALLS SWITCHES FAULTS
# run ROW BUILD: one warm-up and one timed wrk run; adds CPU µs per request and req/s, and on
# the Redis and PostgreSQL rows the server's own CPU µs per request (the scripts' and the
# statements' cost on the one shared server).
run() {
  local row=$1 build=$2 store=${1#* } script=${1%% *}.lua
  local name="$build $store" before after out server_before server_after
  wrk -t2 -c"$CONNECTIONS" -d2s -s "scripts/wrk/$script" "${URL[$name]}" >/dev/null
  local sys_before sys_after perf_pid=""
  before=$(cpu_ticks "${PID[$name]}"); server_before=$(server_ticks "$store")
  sys_before=$(sys_ticks "${PID[$name]}")
  if [ -n "$KERNEL_COUNTS" ]; then
    perf stat -x, -e raw_syscalls:sys_enter,context-switches,page-faults -p "${PID[$name]}" -o "$WORK/perf" &
    perf_pid=$!
  fi
  out=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" -s "scripts/wrk/$script" "${URL[$name]}")
  after=$(cpu_ticks "${PID[$name]}"); server_after=$(server_ticks "$store")
  sys_after=$(sys_ticks "${PID[$name]}")
  [ -n "$perf_pid" ] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
  local requests; requests=$(awk '/requests in/ {print $1}' <<<"$out")
  per_request() { awk -v t="$1" -v hz="$TICK" -v n="$requests" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }'; }
  CPU[$row/$build]+=" $(per_request $((after - before)))"
  SYS[$row/$build]+=" $(per_request $((sys_after - sys_before)))"
  if [ -n "$perf_pid" ]; then
    count() { awk -F, -v e="$1" -v n="$requests" '$3 == e {printf "%.2f", $1 / n}' "$WORK/perf"; }
    SYSCALLS[$row/$build]+=" $(count raw_syscalls:sys_enter)"
    SWITCHES[$row/$build]+=" $(count context-switches)"
    FAULTS[$row/$build]+=" $(count page-faults)"
  fi
  [ "$store" != embedded ] && SERVER_CPU[$row/$build]+=" $(per_request $((server_after - server_before)))"
  RPS[$row/$build]+=" $(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")"
}

ROWS=("verify embedded" "verify Redis" "send embedded" "send Redis")
[ -n "${POSTGRES:-}" ] && ROWS+=("verify PostgreSQL" "send PostgreSQL")
for round in $(seq "$ROUNDS"); do
  for row in "${ROWS[@]}"; do
    # Alternate which build goes first, so that drift in the machine's load hits both alike.
    if (( round % 2 )); then run "$row" before; run "$row" after; else run "$row" after; run "$row" before; fi
  done
done

median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}'; }
printf '\n%-16s %22s %22s %8s   %s\n' "row ($DURATION x$ROUNDS)" "CPU µs/req before" "after" "ratio" "req/s before / after (median)"
for row in "${ROWS[@]}"; do
  b=$(median "${CPU[$row/before]}"); a=$(median "${CPU[$row/after]}")
  printf '%-16s %22s %22s %7.2fx   %s / %s\n' "$row" "$b (${CPU[$row/before]# })" "$a (${CPU[$row/after]# })" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')" "$(median "${RPS[$row/before]}")" "$(median "${RPS[$row/after]}")"
done
for row in "${ROWS[@]}"; do
  [ -n "${SERVER_CPU[$row/before]:-}" ] || continue
  server=redis-server; [ "${row#* }" = PostgreSQL ] && server=postgres
  b=$(median "${SERVER_CPU[$row/before]}"); a=$(median "${SERVER_CPU[$row/after]}")
  printf '%-16s %22s %22s %7.2fx   (%s CPU µs/req)\n' "$row" "$b (${SERVER_CPU[$row/before]# })" \
    "$a (${SERVER_CPU[$row/after]# })" "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')" "$server"
done
# vcode's kernel side per request (medians): system CPU µs, system calls, context switches,
# page faults.
printf '\n%-16s %34s %34s\n' "vcode's kernel" "sys µs / calls / switches / faults before" "after"
for row in "${ROWS[@]}"; do
  side() { echo "$(median "${SYS[$row/$1]}") / $(median "${SYSCALLS[$row/$1]:-}") / $(median "${SWITCHES[$row/$1]:-}") / $(median "${FAULTS[$row/$1]:-}")"; }
  printf '%-16s %34s %34s\n' "$row" "$(side before)" "$(side after)"
done
printf 'before: %s; after: %s; %s, %s cores, wrk -t2 -c%s%s\n' "$BEFORE" "$(git rev-parse --short HEAD)" \
  "$(date -u +%Y-%m-%d)" "$(nproc)" "$CONNECTIONS" "${DEFAULTS:+, every default limit on}"
