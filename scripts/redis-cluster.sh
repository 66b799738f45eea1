#!/usr/bin/env bash
# A local Redis Cluster for trying vcode on Cluster, for benchmarks and for failover drills:
# 3 primaries and 3 replicas on loopback ports, nothing saved to disk.
#
#   scripts/redis-cluster.sh start    # starts it and prints VCODE_REDIS_CLUSTER_NODES
#   scripts/redis-cluster.sh status   # the nodes and their roles
#   scripts/redis-cluster.sh stop     # stops every node and removes the state directory
#
# Settings (environment): PORT (7000: the nodes use PORT..PORT+5), NODE_TIMEOUT_MS (2000: a
# primary silent this long is failed over), STATE_DIR (${TMPDIR:-/tmp}/vcode-redis-cluster-PORT:
# pid files, logs, node configs).
set -euo pipefail

PORT=${PORT:-7000}
NODE_TIMEOUT_MS=${NODE_TIMEOUT_MS:-2000}
STATE_DIR=${STATE_DIR:-${TMPDIR:-/tmp}/vcode-redis-cluster-$PORT}
NODES=6
READY_TIMEOUT_SECS=30

ports() { seq "$PORT" $((PORT + NODES - 1)); }

die() { echo "redis-cluster: $*" >&2; exit 1; }

answers() { redis-cli -p "$1" ping >/dev/null 2>&1; }

# Something listens on the port (a node needs PORT and its cluster bus port, PORT+10000).
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_node() {
  local port=$1
  redis-server --port "$port" --bind 127.0.0.1 --protected-mode yes \
    --save '' --appendonly no --repl-diskless-sync-delay 0 \
    --cluster-enabled yes --cluster-config-file "$STATE_DIR/nodes-$port.conf" \
    --cluster-node-timeout "$NODE_TIMEOUT_MS" --cluster-require-full-coverage no \
    --daemonize yes --dir "$STATE_DIR" \
    --pidfile "$STATE_DIR/redis-$port.pid" --logfile "$STATE_DIR/redis-$port.log"
}

wait_for() {
  local what=$1; shift
  local deadline=$((SECONDS + READY_TIMEOUT_SECS))
  until "$@"; do
    ((SECONDS < deadline)) || die "timed out waiting until $what"
    sleep 0.1
  done
}

all_answer() {
  local port
  for port in $(ports); do answers "$port" || return 1; done
}

all_ok() {
  local port
  for port in $(ports); do
    redis-cli -p "$port" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  done
}

seed_urls() {
  local port urls=()
  for port in $(ports); do urls+=("redis://127.0.0.1:$port"); done
  (IFS=,; echo "${urls[*]}")
}

# A failed start shows the last log lines, then stops what it started.
abort_start() {
  echo "redis-cluster: start failed; last log lines:" >&2
  tail -n 3 "$STATE_DIR"/*.log 2>/dev/null >&2 || true
  stop >/dev/null
}

start() {
  for tool in redis-server redis-cli; do
    command -v "$tool" >/dev/null || die "$tool is needed (Debian/Ubuntu: apt-get install redis-server)"
  done
  [[ -e "$STATE_DIR" ]] && die "$STATE_DIR exists: already running? ($0 stop)"
  local port
  for port in $(ports); do
    ((port != 6379)) || die "PORT=$PORT would use 6379; choose another PORT"
    in_use "$port" && die "port $port is in use"
    in_use $((port + 10000)) && die "port $((port + 10000)) (cluster bus of $port) is in use"
  done
  mkdir -p "$STATE_DIR"
  trap abort_start EXIT
  for port in $(ports); do start_node "$port"; done
  wait_for "every node answers" all_answer
  local addresses=()
  for port in $(ports); do addresses+=("127.0.0.1:$port"); done
  redis-cli --cluster create "${addresses[@]}" --cluster-replicas 1 --cluster-yes >"$STATE_DIR/create.log"
  wait_for "every node serves every slot" all_ok
  trap - EXIT
  echo "Redis Cluster up: 3 primaries, 3 replicas on ports $PORT-$((PORT + NODES - 1))."
  echo "  export VCODE_REDIS_CLUSTER_NODES=$(seed_urls)"
}

status() {
  [[ -d "$STATE_DIR" ]] || die "not running ($STATE_DIR does not exist)"
  local port
  for port in $(ports); do
    if answers "$port"; then
      echo "127.0.0.1:$port $(redis-cli -p "$port" role | head -1)"
    else
      echo "127.0.0.1:$port down"
    fi
  done
}

stop() {
  [[ -d "$STATE_DIR" ]] || { echo "redis-cluster: not running"; return; }
  local pidfile pid
  for pidfile in "$STATE_DIR"/redis-*.pid; do
    [[ -e "$pidfile" ]] || continue
    pid=$(cat "$pidfile")
    # A node a failover test paused (SIGSTOP) would never act on SIGTERM: wake it first.
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    # Wait for it to exit, so the ports are free when this returns; 5 s, then SIGKILL.
    local waited=0
    while kill -0 "$pid" 2>/dev/null; do
      if ((waited++ == 100)); then kill -KILL "$pid" 2>/dev/null || true; fi
      sleep 0.05
    done
  done
  rm -rf "$STATE_DIR"
  echo "Redis Cluster on ports $PORT-$((PORT + NODES - 1)) stopped."
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: $0 start|status|stop" ;;
esac
