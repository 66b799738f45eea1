#!/usr/bin/env bash
# A local Redis with Sentinel for trying vcode on Sentinel, for benchmarks and for failover
# drills: a primary, one replica and 3 sentinels (quorum 2) on loopback ports, nothing saved.
#
#   scripts/redis-sentinel.sh start      # starts it and prints the VCODE_REDIS_SENTINEL* settings
#   scripts/redis-sentinel.sh status     # which node is the primary
#   scripts/redis-sentinel.sh failover   # asks the sentinels to promote the replica
#   scripts/redis-sentinel.sh stop       # stops everything and removes the state directory
#
# Settings (environment): PORT (6390: primary PORT, replica PORT+1), SENTINEL_PORT (26390:
# sentinels SENTINEL_PORT..SENTINEL_PORT+2), MASTER (vcode: the name the sentinels monitor),
# DOWN_AFTER_MS (2000: a primary silent this long is failed over), STATE_DIR
# (${TMPDIR:-/tmp}/vcode-redis-sentinel-PORT: pid files, logs, sentinel configs).
set -euo pipefail

PORT=${PORT:-6390}
SENTINEL_PORT=${SENTINEL_PORT:-26390}
MASTER=${MASTER:-vcode}
DOWN_AFTER_MS=${DOWN_AFTER_MS:-2000}
STATE_DIR=${STATE_DIR:-${TMPDIR:-/tmp}/vcode-redis-sentinel-$PORT}
SENTINELS=3
READY_TIMEOUT_SECS=30

data_ports() { echo "$PORT" $((PORT + 1)); }
sentinel_ports() { seq "$SENTINEL_PORT" $((SENTINEL_PORT + SENTINELS - 1)); }

die() { echo "redis-sentinel: $*" >&2; exit 1; }

answers() { redis-cli -p "$1" ping >/dev/null 2>&1; }

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() {
  local what=$1; shift
  local deadline=$((SECONDS + READY_TIMEOUT_SECS))
  until "$@"; do
    ((SECONDS < deadline)) || die "timed out waiting until $what"
    sleep 0.1
  done
}

start_data_node() {
  local port=$1; shift
  redis-server --port "$port" --bind 127.0.0.1 --protected-mode yes \
    --save '' --appendonly no --repl-diskless-sync-delay 0 \
    --daemonize yes --dir "$STATE_DIR" \
    --pidfile "$STATE_DIR/redis-$port.pid" --logfile "$STATE_DIR/redis-$port.log" "$@"
}

# A sentinel rewrites its config file as it learns, so each gets its own.
start_sentinel() {
  local port=$1 config="$STATE_DIR/sentinel-$1.conf"
  cat >"$config" <<EOF
port $port
bind 127.0.0.1
daemonize yes
dir $STATE_DIR
pidfile $STATE_DIR/sentinel-$port.pid
logfile $STATE_DIR/sentinel-$port.log
sentinel monitor $MASTER 127.0.0.1 $PORT 2
sentinel down-after-milliseconds $MASTER $DOWN_AFTER_MS
sentinel failover-timeout $MASTER 10000
EOF
  redis-server "$config" --sentinel
}

replica_in_sync() {
  redis-cli -p $((PORT + 1)) info replication | grep -q '^master_link_status:up'
}

# Every sentinel knows the replica and the two other sentinels (needed for a failover).
sentinels_ready() {
  local port info
  for port in $(sentinel_ports); do
    info=$(redis-cli -p "$port" sentinel master "$MASTER" 2>/dev/null | paste -sd' ') || return 1
    [[ "$info" == *"num-slaves 1 "* && "$info" == *"num-other-sentinels $((SENTINELS - 1)) "* ]] || return 1
  done
}

sentinel_urls() {
  local port urls=()
  for port in $(sentinel_ports); do urls+=("redis://127.0.0.1:$port"); done
  (IFS=,; echo "${urls[*]}")
}

# A failed start shows the last log lines, then stops what it started.
abort_start() {
  echo "redis-sentinel: start failed; last log lines:" >&2
  tail -n 3 "$STATE_DIR"/*.log 2>/dev/null >&2 || true
  stop >/dev/null
}

start() {
  for tool in redis-server redis-cli; do
    command -v "$tool" >/dev/null || die "$tool is needed (Debian/Ubuntu: apt-get install redis-server)"
  done
  [[ -e "$STATE_DIR" ]] && die "$STATE_DIR exists: already running? ($0 stop)"
  local port
  for port in $(data_ports) $(sentinel_ports); do
    ((port != 6379)) || die "port 6379 is never used; choose another PORT"
    in_use "$port" && die "port $port is in use"
  done
  mkdir -p "$STATE_DIR"
  trap abort_start EXIT
  start_data_node "$PORT"
  start_data_node $((PORT + 1)) --replicaof 127.0.0.1 "$PORT"
  # Sentinels learn the replicas from the primary when they connect: sync first.
  wait_for "the replica is in sync" replica_in_sync
  for port in $(sentinel_ports); do start_sentinel "$port"; done
  wait_for "the sentinels know the replica and each other" sentinels_ready
  trap - EXIT
  echo "Redis with Sentinel up: primary 127.0.0.1:$PORT, replica 127.0.0.1:$((PORT + 1)),"
  echo "sentinels on ports $SENTINEL_PORT-$((SENTINEL_PORT + SENTINELS - 1)) (master name $MASTER)."
  echo "  export VCODE_REDIS_SENTINELS=$(sentinel_urls)"
  echo "  export VCODE_REDIS_SENTINEL_MASTER=$MASTER"
}

status() {
  [[ -d "$STATE_DIR" ]] || die "not running ($STATE_DIR does not exist)"
  local port
  for port in $(sentinel_ports); do
    if answers "$port"; then
      echo "sentinel 127.0.0.1:$port: primary $(redis-cli -p "$port" sentinel get-master-addr-by-name "$MASTER" | paste -sd:)"
    else
      echo "sentinel 127.0.0.1:$port down"
    fi
  done
  for port in $(data_ports); do
    if answers "$port"; then
      echo "127.0.0.1:$port $(redis-cli -p "$port" role | head -1)"
    else
      echo "127.0.0.1:$port down"
    fi
  done
}

failover() {
  [[ -d "$STATE_DIR" ]] || die "not running ($STATE_DIR does not exist)"
  redis-cli -p "$SENTINEL_PORT" sentinel failover "$MASTER"
}

stop() {
  [[ -d "$STATE_DIR" ]] || { echo "redis-sentinel: not running"; return; }
  local pidfile pid
  # Sentinels first, so that they do not fail over the data nodes being stopped.
  for pidfile in "$STATE_DIR"/sentinel-*.pid "$STATE_DIR"/redis-*.pid; do
    [[ -e "$pidfile" ]] || continue
    pid=$(cat "$pidfile")
    # A process a failover test paused (SIGSTOP) would never act on SIGTERM: wake it first.
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    # 5 s to exit, then SIGKILL, so the ports are free when this returns.
    local waited=0
    while kill -0 "$pid" 2>/dev/null; do
      if ((waited++ == 100)); then kill -KILL "$pid" 2>/dev/null || true; fi
      sleep 0.05
    done
  done
  rm -rf "$STATE_DIR"
  echo "Redis with Sentinel stopped."
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  failover) failover ;;
  *) die "usage: $0 start|status|failover|stop" ;;
esac
