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

NAME=redis-cluster
# shellcheck source-path=SCRIPTDIR source=redis-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis-lib.sh"

ports() { seq "$PORT" $((PORT + NODES - 1)); }

start_node() {
  local port=$1
  start_redis "$port" \
    --cluster-enabled yes --cluster-config-file "$STATE_DIR/nodes-$port.conf" \
    --cluster-node-timeout "$NODE_TIMEOUT_MS" --cluster-require-full-coverage no
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

start() {
  check_can_start
  local port
  for port in $(ports); do
    ((port != 6379)) || die "PORT=$PORT would use 6379; choose another PORT"
    # A node needs PORT and its cluster bus port, PORT+10000.
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
  echo "  export VCODE_REDIS_CLUSTER_NODES=$(urls ports)"
}

status() {
  require_running
  local port
  for port in $(ports); do node_status "$port"; done
}

stop() {
  [[ -d "$STATE_DIR" ]] || { echo "$NAME: not running"; return; }
  stop_pidfiles "$STATE_DIR"/redis-*.pid
  rm -rf "$STATE_DIR"
  echo "Redis Cluster on ports $PORT-$((PORT + NODES - 1)) stopped."
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: $0 start|status|stop" ;;
esac
