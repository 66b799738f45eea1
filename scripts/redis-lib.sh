# Process helpers for redis-cluster.sh and redis-sentinel.sh, which set NAME and STATE_DIR first:
# starting redis-server daemons in STATE_DIR, waiting until they answer, stopping them by pid file.
# shellcheck shell=bash

READY_TIMEOUT_SECS=30

die() { echo "$NAME: $*" >&2; exit 1; }

answers() { redis-cli -p "$1" ping >/dev/null 2>&1; }

# Something listens on the port.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() {
  local what=$1; shift
  local deadline=$((SECONDS + READY_TIMEOUT_SECS))
  until "$@"; do
    ((SECONDS < deadline)) || die "timed out waiting until $what"
    sleep 0.1
  done
}

# Before a start: the tools are installed, and nothing runs in STATE_DIR yet.
check_can_start() {
  local tool
  for tool in redis-server redis-cli; do
    command -v "$tool" >/dev/null || die "$tool is needed (Debian/Ubuntu: apt-get install redis-server)"
  done
  [[ ! -e "$STATE_DIR" ]] || die "$STATE_DIR exists: already running? ($0 stop)"
}

require_running() { [[ -d "$STATE_DIR" ]] || die "not running ($STATE_DIR does not exist)"; }

# A data node on port $1 that saves nothing, its pid file and log in STATE_DIR; further
# arguments go to redis-server.
start_redis() {
  local port=$1; shift
  redis-server --port "$port" --bind 127.0.0.1 --protected-mode yes \
    --save '' --appendonly no --repl-diskless-sync-delay 0 \
    --daemonize yes --dir "$STATE_DIR" \
    --pidfile "$STATE_DIR/redis-$port.pid" --logfile "$STATE_DIR/redis-$port.log" "$@"
}

# The role of the node on port $1 (master, slave), or down.
node_status() {
  if answers "$1"; then
    echo "127.0.0.1:$1 $(redis-cli -p "$1" role | head -1)"
  else
    echo "127.0.0.1:$1 down"
  fi
}

# redis://127.0.0.1:PORT for each port the function named $1 prints, comma-separated.
urls() {
  local port urls=()
  for port in $("$1"); do urls+=("redis://127.0.0.1:$port"); done
  (IFS=,; echo "${urls[*]}")
}

# A failed start shows the last log lines, then stops what it started (the script's stop).
abort_start() {
  echo "$NAME: start failed; last log lines:" >&2
  tail -n 3 "$STATE_DIR"/*.log 2>/dev/null >&2 || true
  stop >/dev/null
}

# Stops the process of each pid file given, in order, and waits for it to exit, so that its
# ports are free when this returns.
stop_pidfiles() {
  local pidfile pid waited
  for pidfile in "$@"; do
    [[ -e "$pidfile" ]] || continue
    pid=$(cat "$pidfile")
    # A process a failover test paused (SIGSTOP) would never act on SIGTERM: wake it first.
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    # 5 s to exit, then SIGKILL.
    waited=0
    while kill -0 "$pid" 2>/dev/null; do
      if ((waited++ == 100)); then kill -KILL "$pid" 2>/dev/null || true; fi
      sleep 0.05
    done
  done
}
