# Sourced by scripts/bench-http.sh (uses its BIN, WORK, PIDS, free_port, start_vcode, row,
# QUOTAS_OFF, THIN_VERIFY,
# ONLY, SHORT and MANY): PostgreSQL rows in the same run as the Redis and thin ones, bytes per
# pending code, and the cleanup's cost at $MANY pending codes. The server is Debian's
# postgresql with its durable defaults (fsync, synchronous_commit on), as the store would run.
#
#   bench_postgres     # adds the rows "verify, PostgreSQL" and "send, PostgreSQL"
#   postgres_summary   # prints the size and cleanup lines (after the table)

PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

pg_as_owner() { # command...: as the postgres user when root (PostgreSQL refuses root)
  if [ "$(id -u)" = 0 ]; then setpriv --reuid postgres --regid postgres --init-groups "$@"; else "$@"; fi
}

# Sum of user+system CPU ticks of the postmaster and all its processes.
pg_cpu_ticks() {
  local total=0 pid
  for pid in $PG_PID $(pgrep -P "$PG_PID"); do
    [ -r "/proc/$pid/stat" ] || continue
    total=$(( total + $(awk '{print $14 + $15}' "/proc/$pid/stat") ))
  done
  echo "$total"
}

pg_sql() { "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U vcode "$@"; }

bench_postgres() {
  [[ -z $ONLY || "verify, PostgreSQL" =~ $ONLY || "send, PostgreSQL" =~ $ONLY ]] || return 0
  if [ -z "$PG_BIN" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  local data=$WORK/pg
  mkdir -p "$data"; [ "$(id -u)" = 0 ] && chown postgres:postgres "$WORK" "$data"
  pg_as_owner "$PG_BIN/initdb" -D "$data" -U vcode --auth=trust -E UTF8 --locale=C >/dev/null
  PG_PORT=$(free_port)
  pg_as_owner "$PG_BIN/postgres" -D "$data" -p "$PG_PORT" -h 127.0.0.1 -k '' \
    -c shared_buffers=256MB -c max_connections=100 >"$WORK/pg.log" 2>&1 & PG_PID=$!; PIDS+=($PG_PID)
  for _ in $(seq 100); do "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break; sleep 0.1; done
  # The postmaster itself ($! is the subshell that runs pg_as_owner): its processes' CPU is summed.
  PG_PID=$(head -1 "$data/postmaster.pid")
  pg_sql -d postgres -c 'CREATE DATABASE vcode'
  start_vcode postgres VCODE_DATABASE_URL="postgres://vcode@127.0.0.1:$PG_PORT/vcode" "${QUOTAS_OFF[@]}"
  row "verify, PostgreSQL" postgres script=verify.lua ref="$THIN_VERIFY"
  row "send, PostgreSQL" postgres script=send.lua ref="$THIN_VERIFY"
  kill "${PID[postgres]}"; wait "${PID[postgres]}" 2>/dev/null || true

  # Bytes per pending code: the table and its indexes' growth over $MANY codes written by the
  # store's own function (as a send would, with a sealed copy the size of a real one).
  local sealed_len
  sealed_len=$(pg_sql -d vcode -c "SELECT coalesce(max(octet_length(sealed)), 6) FROM vcode_codes")
  pg_sql -d vcode -c "TRUNCATE vcode_codes, vcode_quota_events" -c "VACUUM FULL vcode_codes"
  local before after
  before=$(pg_sql -d vcode -c "SELECT pg_total_relation_size('vcode_codes')")
  pg_fill "$MANY" 3600000 "$sealed_len"
  after=$(pg_sql -d vcode -c "SELECT pg_total_relation_size('vcode_codes')")
  PG_BYTES=$(( (after - before) / MANY ))
  PG_SEALED=$sealed_len

  # The cleanup's cost: $MANY expired codes deleted in batches of 1000, each its own
  # transaction, with the statement of src/store/postgres/sweep.rs.
  pg_sql -d vcode -c "TRUNCATE vcode_codes" -c "VACUUM FULL vcode_codes"
  pg_fill "$MANY" 1 "$sealed_len"
  sleep 0.1
  local batch="DELETE FROM vcode_codes WHERE ctid = ANY (ARRAY(SELECT ctid FROM vcode_codes WHERE expires_at_ms <= vcode_now_ms() LIMIT 1000 FOR UPDATE SKIP LOCKED)) AND expires_at_ms <= vcode_now_ms();"
  local cpu_before cpu_after started ended
  started=$(date +%s%N)
  {
    echo "\\! bash -c 'source scripts/bench-postgres.sh; PG_PID=$PG_PID pg_cpu_ticks' > $WORK/pg_cpu_before"
    for _ in $(seq $(( MANY / 1000 + 1 ))); do echo "$batch"; done
    echo "\\! bash -c 'source scripts/bench-postgres.sh; PG_PID=$PG_PID pg_cpu_ticks' > $WORK/pg_cpu_after"
  } | pg_sql -d vcode >/dev/null
  ended=$(date +%s%N)
  cpu_before=$(cat "$WORK/pg_cpu_before"); cpu_after=$(cat "$WORK/pg_cpu_after")
  PG_SWEEP_LEFT=$(pg_sql -d vcode -c "SELECT count(*) FROM vcode_codes")
  PG_SWEEP_SECS=$(awk -v ns=$(( ended - started )) 'BEGIN { printf "%.1f", ns / 1e9 }')
  PG_SWEEP_CPU=$(awk -v t=$(( cpu_after - cpu_before )) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }')
}

# pg_fill COUNT TTL_MS SEALED_BYTES: COUNT pending codes through vcode_issue (each with its
# verification), 10,000 a statement.
pg_fill() {
  local count=$1 ttl=$2 sealed=$3 from=0 step=10000
  while [ "$from" -lt "$count" ]; do
    local to=$(( from + step < count ? from + step : count ))
    pg_sql -d vcode -c "SELECT count(*) FROM generate_series($from + 1, $to) AS i,
      LATERAL vcode_issue('+86138' || lpad(i::text, 8, '0'), 'login',
        decode(md5(i::text), 'hex'), substr(decode(md5('s' || i), 'hex'), 1, $sealed),
        $ttl, 0, false, i, 9000000000000000, '{}', '{}',
        substr(md5(random()::text || i), 1, 22), 600000)" >/dev/null
    from=$to
  done
}

postgres_summary() {
  [ -n "${PG_BYTES:-}" ] || return 0
  printf 'PostgreSQL: %s bytes per pending code (pg_total_relation_size growth of vcode_codes with its indexes / %s codes, %s-byte sealed copy); cleanup of %s expired codes in batches of 1000: %s s, %s s of database CPU (%s left)\n' \
    "$PG_BYTES" "$MANY" "$PG_SEALED" "$MANY" "$PG_SWEEP_SECS" "$PG_SWEEP_CPU" "$PG_SWEEP_LEFT"
}
