#!/usr/bin/env bash
# What the event outbox costs the send and verify steps in the stores themselves, before (BASE,
# a commit without events) and after (the working tree), with no endpoint configured (events
# off: nothing written) and, for information, on. The service's own code adds one flag check
# per step when off; the steps' store-side work is what changed:
#   Redis: Redis's own time per EVALSHA (INFO commandstats usec_per_call) of issue.lua and
#          verify_id.lua with their preludes, N calls each on one connection, rows alternated;
#   PostgreSQL: microseconds per call of vcode_issue (a new verification) and
#          vcode_verify_by_id (a wrong code) in a PL/pgSQL loop, on migrations 1-3 vs 1-4.
#
#   BASE=8a434ea scripts/bench-events.sh        (N=200000 Redis calls, 5000 PostgreSQL calls)
# Needs redis-server, redis-benchmark and PostgreSQL's initdb (scripts/provision).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:?name a commit without events: BASE=<rev>}
N=${N:-200000}; PG_N=${PG_N:-5000}
work=$(mktemp -d); trap 'redis-cli -p $RP shutdown nosave >/dev/null 2>&1 || true; [ -n "${PGBIN:-}" ] && $AS "$PGBIN/pg_ctl -D $work/pg -m immediate stop" >/dev/null 2>&1; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "== Redis: usec per script call (Redis's own time)"
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes >/dev/null
sleep 0.5
cli() { redis-cli -p "$RP" "$@"; }
R=src/store/redis
before() { git show "$BASE:$R/quota.lua"; git show "$BASE:$R/$1"; }
after() { cat "$R/events.lua" "$R/quota.lua" "$R/$1"; }
sha() { cli script load "$(cat)"; }
issue_before=$(before issue.lua | sha); issue_after=$(after issue.lua | sha)
verify_before=$(before verify_id.lua | sha); verify_after=$(after verify_id.lua | sha)
T='{+8613800138000}'
IK="verify_code:$T:login verify_code:quota:$T:sends verify_code:$T:verification:abc verify_code:verification:{abc}"
VK="verify_code:$T:login verify_code:quota:$T:fails verify_code:quota:$T:fails:1.2.3.4 verify_code:$T:verification:abc"
# A resend (cooldown 0) of one pending code, no quota rules; a wrong code, attempts unlimited.
IA="aaaaaaaaaaaaaaaa 300000 0 reuse 1 99999999999999 3600000 +8613800138000_login 0 2"
VA="1000000000 7 0 | bbbbbbbbbbbbbbbb"
OK="verify_code:events:{events}:entries verify_code:events:{events}:pending"
OA="abc +8613800138000 login x outbox"
row() { # label sha numkeys keys args
  cli config resetstat >/dev/null
  # shellcheck disable=SC2086
  redis-benchmark -p "$RP" -n "$N" -c 1 -q evalsha "$2" "$3" $4 $5 >/dev/null
  printf '%-28s %s\n' "$1" "$(cli info commandstats | grep '^cmdstat_evalsha:' | grep -o 'usec_per_call=[0-9.]*')"
}
for round in 1 2 3; do
  row "send, before" "$issue_before" 4 "$IK" "$IA"
  row "send, after (events off)" "$issue_after" 4 "$IK" "$IA"
  row "verify, before" "$verify_before" 4 "$VK" "$VA"
  row "verify, after (events off)" "$verify_after" 4 "$VK" "$VA"
done
row "send, after (events on)" "$issue_after" 6 "$IK $OK" "$IA $OA"
cli del verify_code:events:{events}:entries verify_code:events:{events}:pending >/dev/null
row "verify, after (events on)" "$verify_after" 6 "$VK $OK" "$VA $OA"

echo "== PostgreSQL: usec per call (issue | verify), $PG_N calls"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
AS="bash -c"; if [ "$(id -u)" = 0 ]; then chown -R postgres "$work"; AS="su postgres -c"; fi
PP=$(free_port)
$AS "$PGBIN/initdb -D $work/pg -U postgres --auth=trust >/dev/null && $PGBIN/pg_ctl -D $work/pg -o '-p $PP -k $work -c listen_addresses=127.0.0.1 -c fsync=off' -l $work/pg.log start >/dev/null"
sleep 1
P="psql -h 127.0.0.1 -p $PP -U postgres -q -v ON_ERROR_STOP=1"
M=src/store/postgres/migrations
for db in before after; do
  $P -c "create database $db"
  for f in 0001_store 0002_verifications 0003_fraud; do git show "$BASE:$M/$f.sql" | $P -d $db >/dev/null; done
  $P -d $db -f scripts/bench-events.sql >/dev/null
done
$P -d after -f $M/0004_events.sql >/dev/null
$P -d after -f scripts/bench-events.sql >/dev/null
for round in 1 2 3; do
  for db in before after; do printf '%-28s %s\n' "$db (events off)" "$($P -d $db -tA -c "select * from bench($PG_N)")"; done
done
$P -d after -tA -c "select vcode_events_record()" >/dev/null
printf '%-28s %s\n' "after (events on)" "$($P -d after -tA -c "select * from bench($PG_N)")"
