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

NAME=redis-sentinel
# shellcheck source-path=SCRIPTDIR source=redis-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis-lib.sh"

data_ports() { echo "$PORT" $((PORT + 1)); }
sentinel_ports() { seq "$SENTINEL_PORT" $((SENTINEL_PORT + SENTINELS - 1)); }

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

start() {
  check_can_start
  local port
  for port in $(data_ports) $(sentinel_ports); do
    ((port != 6379)) || die "port 6379 is never used; choose another PORT"
    in_use "$port" && die "port $port is in use"
  done
  mkdir -p "$STATE_DIR"
  trap abort_start EXIT
  start_redis "$PORT"
  start_redis $((PORT + 1)) --replicaof 127.0.0.1 "$PORT"
  # Sentinels learn the replicas from the primary when they connect: sync first.
  wait_for "the replica is in sync" replica_in_sync
  for port in $(sentinel_ports); do start_sentinel "$port"; done
  wait_for "the sentinels know the replica and each other" sentinels_ready
  trap - EXIT
  echo "Redis with Sentinel up: primary 127.0.0.1:$PORT, replica 127.0.0.1:$((PORT + 1)),"
  echo "sentinels on ports $SENTINEL_PORT-$((SENTINEL_PORT + SENTINELS - 1)) (master name $MASTER)."
  echo "  export VCODE_REDIS_SENTINELS=$(urls sentinel_ports)"
  echo "  export VCODE_REDIS_SENTINEL_MASTER=$MASTER"
}

status() {
  require_running
  local port
  for port in $(sentinel_ports); do
    if answers "$port"; then
      echo "sentinel 127.0.0.1:$port: primary $(redis-cli -p "$port" sentinel get-master-addr-by-name "$MASTER" | paste -sd:)"
    else
      echo "sentinel 127.0.0.1:$port down"
    fi
  done
  for port in $(data_ports); do node_status "$port"; done
}

failover() {
  require_running
  redis-cli -p "$SENTINEL_PORT" sentinel failover "$MASTER"
}

stop() {
  [[ -d "$STATE_DIR" ]] || { echo "$NAME: not running"; return; }
  # Sentinels first, so that they do not fail over the data nodes being stopped.
  stop_pidfiles "$STATE_DIR"/sentinel-*.pid "$STATE_DIR"/redis-*.pid
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
