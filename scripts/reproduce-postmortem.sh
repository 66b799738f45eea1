#!/usr/bin/env bash
# Reproduces the postmortem with numbers. For each verify strategy (atomic, legacy-original,
# legacy-postmortem-fix) it starts INSTANCES vcode instances (dev mode, loopback, quotas off)
# on one redis-server of its own, runs the same `vcode loadtest` against all of them, stops
# them, and finally prints one comparison table. Everything it starts is stopped on exit.
#
#   scripts/reproduce-postmortem.sh [more `vcode loadtest` flags]
#
# Settings (environment): DURATION (15s per strategy), USERS (200), CONCURRENCY (32),
# SEED (42), SCENARIO (mixed), INSTANCES (4, as in the postmortem), and the legacy verifies'
# pause between their GET and their DEL (VCODE_LEGACY_GAP_MS): ORIGINAL_GAP_MS (5: the login's
# own work, which the original did before its DEL) and FIX_GAP_MS (0: the fix DELs right after
# the compare, so only the round trip itself is left between them).
set -euo pipefail
# The instances share one Redis, so they share one key.
SECRET_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
cd "$(dirname "$0")/.."

DURATION=${DURATION:-15s}
USERS=${USERS:-200}
CONCURRENCY=${CONCURRENCY:-32}
SEED=${SEED:-42}
SCENARIO=${SCENARIO:-mixed}
ORIGINAL_GAP_MS=${ORIGINAL_GAP_MS:-5}
FIX_GAP_MS=${FIX_GAP_MS:-0}
INSTANCES=${INSTANCES:-4}
# STRATEGIES='atomic' runs only those; REQUESTS=n stops each after n API requests instead of
# DURATION (the 1M-operation correctness run: STRATEGIES=atomic REQUESTS=1000000).
read -r -a STRATEGIES <<<"${STRATEGIES:-atomic legacy-original legacy-postmortem-fix}"
REQUESTS=${REQUESTS:-}
READY_TIMEOUT_SECS=15

for tool in redis-server redis-cli curl cargo; do
  command -v "$tool" >/dev/null || { echo "reproduce-postmortem: $tool is needed" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()

cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "== $*" >&2; }

used_ports=" "
# Sets `port` to a loopback port below the kernel's ephemeral range (outgoing connections take
# those) that nothing listens on and that this script has not handed out yet.
free_port() {
  local low=32768
  if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
    read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  fi
  for _ in $(seq 200); do
    if ((low > 11000)); then
      port=$((10000 + RANDOM % (low - 10000)))
    else # an unusual range: take ports above the usual one instead
      port=$((61000 + RANDOM % 4000))
    fi
    [[ $used_ports == *" $port "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      used_ports+="$port "
      return 0
    fi
  done
  echo "reproduce-postmortem: no free loopback port" >&2
  return 1
}

# Waits until `check` succeeds while process `pid` lives, READY_TIMEOUT_SECS at most. Returns 2
# if the process exited (e.g. its port was taken after all), 1 on timeout.
wait_until() {
  local pid=$1 what=$2
  shift 2
  local deadline=$((SECONDS + READY_TIMEOUT_SECS))
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      return 2
    fi
    if ((SECONDS >= deadline)); then
      echo "reproduce-postmortem: $what not ready after ${READY_TIMEOUT_SECS}s" >&2
      return 1
    fi
    sleep 0.1
  done
}

# Runs `launch PORT` on free ports until the process it starts answers `probe PORT`; sets
# `started_pid` and `started_port`. A process that exits at once (port taken) is retried.
start_on_free_port() {
  local what=$1 launch=$2 probe=$3 status
  for _ in 1 2 3 4 5; do
    free_port
    started_port=$port
    "$launch" "$started_port" >"$work/$what.log" 2>&1 &
    started_pid=$!
    pids+=("$started_pid")
    status=0
    wait_until "$started_pid" "$what" "$probe" "$started_port" || status=$?
    ((status == 0)) && return 0
    ((status == 2)) || return 1
  done
  echo "reproduce-postmortem: $what did not start; its log:" >&2
  cat "$work/$what.log" >&2 || true
  return 1
}

say "building (release)"
cargo build --release --quiet
bin=target/release/vcode

launch_redis() {
  exec redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --dir "$work"
}
redis_answers() { [[ $(redis-cli -p "$1" ping) == PONG ]]; }
start_on_free_port redis launch_redis redis_answers
redis_port=$started_port
say "redis-server on 127.0.0.1:$redis_port"

launch_vcode() {
  exec env VCODE_BIND="127.0.0.1:$1" VCODE_ADMIN_BIND=127.0.0.1:0 VCODE_DEV_MODE=1 \
    VCODE_SECRET_KEY="$SECRET_KEY" \
    VCODE_REDIS_URL="redis://127.0.0.1:$redis_port" \
    VCODE_VERIFY_STRATEGY="$strategy" VCODE_LEGACY_GAP_MS="$gap_ms" \
    VCODE_QUOTA_PHONE_HOUR=0 VCODE_QUOTA_PHONE_DAY=0 VCODE_QUOTA_IP_HOUR=0 \
    VCODE_QUOTA_PHONE_FAILS_DAY=0 VCODE_QUOTA_CLIENT_FAILS_DAY=0 VCODE_QUOTA_GLOBAL_MINUTE=0 \
    RUST_LOG=warn,tracing_actix_web=off "$bin" serve
}
vcode_ready() { curl -fsS --max-time 1 "http://127.0.0.1:$1/readyz"; }

# Starts the instances of `strategy`: their pids go to `instance_pids`, their URLs to
# `targets` (as --target flags).
start_instances() {
  local i
  instance_pids=()
  targets=()
  for i in $(seq "$INSTANCES"); do
    start_on_free_port "$strategy-$i" launch_vcode vcode_ready
    instance_pids+=("$started_pid")
    targets+=(--target "http://127.0.0.1:$started_port")
  done
}

stop_instances() {
  local pid
  for pid in "${instance_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${instance_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}

# The legacy pause of a strategy, and its name in the table.
gap_of() {
  case $1 in
    legacy-original) echo "$ORIGINAL_GAP_MS" ;;
    legacy-postmortem-fix) echo "$FIX_GAP_MS" ;;
    *) echo 0 ;;
  esac
}
label_of() {
  case $1 in
    atomic) echo atomic ;;
    *) echo "$1 (gap $(gap_of "$1") ms)" ;;
  esac
}

for strategy in "${STRATEGIES[@]}"; do
  gap_ms=$(gap_of "$strategy")
  # Each strategy starts from an empty Redis: no codes, cooldowns or outboxes of the last.
  redis-cli -p "$redis_port" flushall >/dev/null
  start_instances
  length=(--duration "$DURATION")
  [ -n "$REQUESTS" ] && length=(--requests "$REQUESTS")
  say "$(label_of "$strategy"): $INSTANCES instances up, loadtest for ${length[*]}"
  "$bin" loadtest "${targets[@]}" --scenario "$SCENARIO" --users "$USERS" \
    --concurrency "$CONCURRENCY" "${length[@]}" --seed "$SEED" \
    --label "$(label_of "$strategy")" --json "$@" >"$work/$strategy.json"
  stop_instances
done

echo "SCENARIO=$SCENARIO DURATION=$DURATION REQUESTS=${REQUESTS:--} USERS=$USERS CONCURRENCY=$CONCURRENCY SEED=$SEED" \
  "INSTANCES=$INSTANCES ORIGINAL_GAP_MS=$ORIGINAL_GAP_MS FIX_GAP_MS=$FIX_GAP_MS"
echo
reports=()
for strategy in "${STRATEGIES[@]}"; do reports+=("$work/$strategy.json"); done
"$bin" loadtest-table "${reports[@]}"
