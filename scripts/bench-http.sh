#!/usr/bin/env bash
# HTTP benchmarks against the thinnest possible handlers, measured in one run. Starts its own
# redis-server, vcode (embedded and Redis) and examples/thin_verify.rs, drives each row with wrk
# (-t2 -c64) after a warm-up, and prints one table. The figure that counts is the server's own
# CPU per request (utime + stime of the server process from /proc/<pid>/stat over the timed run,
# divided by the requests answered): on a shared 2-core machine req/s mostly measures who else
# runs, and wrk itself is often the bottleneck (its own CPU per request is shown beside it, and
# Redis's). Ratios are CPU per request against the row's reference, measured in the same run.
# Then measures memory per pending code (Redis MEMORY USAGE and used_memory growth, embedded RSS).
#
#   scripts/bench-http.sh            # full run: 10 s a row, 1,000,000 pending codes
#   SHORT=1 scripts/bench-http.sh    # CI: 1 s a row, 5,000 pending codes, the dev build the
#                                    # tests use (proves it works; its figures mean nothing)
#   DURATION=5s MANY=200000 scripts/bench-http.sh   # shorter rows, fewer pending codes
#   ONLY='verify, (embedded|Redis)$' scripts/bench-http.sh   # only rows matching (and the
#                                    # references); the memory section needs its rows
#   BUILT=dir scripts/bench-http.sh  # binaries built beforehand, nothing built: dir/vcode and
#                                    # dir/examples/{thin_verify,fill_codes} (another build's,
#                                    # copied out; a target/ symlinked elsewhere would be rebuilt
#                                    # from this tree)
#
# A row is one call: `row NAME INSTANCE [script=verify.lua] [path=/verify] [phones=N]
# [clients=N] [ref=ROW]` (see `row` below); an instance is started with `start_vcode`.
set -euo pipefail
# Every instance of a run shares one key, as instances sharing a store must.
BENCH_SECRET_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
cd "$(dirname "$0")/.."

SHORT=${SHORT:-0}
ONLY=${ONLY:-}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
# (SHORT proves the script runs, so it warms nothing up.)
if [ "$SHORT" = 1 ]; then DURATION=${DURATION:-1s}; WARMUP=""; MANY=${MANY:-5000}; PAIRS=${PAIRS:-1}; else DURATION=${DURATION:-10s}; WARMUP=3s; MANY=${MANY:-1000000}; PAIRS=${PAIRS:-3}; fi
FEW=1000
TICK_US=$((1000000 / $(getconf CLK_TCK)))

command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
command -v redis-server >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

# The short mode proves the script runs, so it takes the dev build the tests share (a release
# build was 9 of a clean CI run's 19 minutes on 2026-12-02); figures come from release builds.
PROFILE=release; [ "$SHORT" = 1 ] && PROFILE=dev
if [ -n "${BUILT:-}" ]; then
  BIN=$BUILT
else
  cargo build --profile "$PROFILE" --quiet --bin vcode --example thin_verify --example fill_codes
  BIN=${CARGO_TARGET_DIR:-target}/$([ "$PROFILE" = dev ] && echo debug || echo release)
fi

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
  --logfile "$WORK/redis-server.log" & REDIS_PID=$!; PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
REDIS_URL=redis://127.0.0.1:$REDIS_PORT

declare -A URL PID
THIN_PORT=$(free_port)
$BIN/examples/thin_verify "127.0.0.1:$THIN_PORT" "$REDIS_URL" >"$WORK/thin.log" 2>&1 & PID[thin]=$!; PIDS+=($!)
URL[thin]=http://127.0.0.1:$THIN_PORT
wait_for "${URL[thin]}/constant"

# Quotas and the fraud guard off unless a row's instance turns them on: these rows measure the
# service, not its brakes (the "defaults" rows below run every default limit).
QUOTAS_OFF=(VCODE_QUOTA_PHONE_HOUR=0 VCODE_QUOTA_PHONE_DAY=0 VCODE_QUOTA_IP_HOUR=0
  VCODE_QUOTA_PHONE_FAILS_DAY=0 VCODE_QUOTA_CLIENT_FAILS_DAY=0 VCODE_QUOTA_GLOBAL_MINUTE=0
  VCODE_QUOTA_CAPTCHA_IP_MINUTE=0 VCODE_QUOTA_TENANT_HOUR=0 VCODE_QUOTA_TENANT_DAY=0
  VCODE_FRAUD_GUARD=off)
start_vcode() { # name [VAR=value ...]: sets URL[name] and PID[name]; stops a previous one
  local name=$1; shift
  if [ -n "${PID[$name]:-}" ]; then kill "${PID[$name]}"; wait "${PID[$name]}" 2>/dev/null || true; fi
  local port; port=$(free_port)
  env VCODE_BIND="127.0.0.1:$port" VCODE_ADMIN_BIND=127.0.0.1:0 RUST_LOG=warn VCODE_DEV_MODE=0 \
    VCODE_SECRET_KEY="$BENCH_SECRET_KEY" "$@" \
    $BIN/vcode >"$WORK/$name.log" 2>&1 &
  PID[$name]=$!; PIDS+=($!)
  URL[$name]=http://127.0.0.1:$port
  wait_for "${URL[$name]}/healthz"
}

cpu_ticks() { # pid: utime + stime, all threads (fields 14 and 15; the name may hold spaces)
  sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}

declare -A RPS P50 P99 NON2XX CPU WRK_CPU REDIS_CPU REF SETUP PAIRED PAIRED_ALSO
ROWS=()
# measure INSTANCE SCRIPT PATH PHONES CLIENTS: warms up, then one timed wrk run against
# INSTANCE; sets M_RPS, M_P50, M_P99, M_NON2XX and M_CPU, M_WRK_CPU, M_REDIS_CPU (µs of CPU per
# request of the server, wrk and Redis).
measure() {
  local instance=$1 script=$2 path=$3 phones=$4 clients=$5
  local url=${URL[$instance]} pid=${PID[$instance]}
  local args=(-t"$THREADS" -c"$CONNECTIONS" --latency)
  if [ -n "$script" ]; then args+=(-s "scripts/wrk/$script"); else url+=$path; fi
  export PHONES=$phones CLIENTS=$clients VERIFY_PATH=$path SEND_PATH=$path
  if [ -n "$WARMUP" ]; then wrk "${args[@]}" -d"$WARMUP" "$url" >/dev/null; fi
  local server0 redis0 server1 redis1 out
  server0=$(cpu_ticks "$pid"); redis0=$(cpu_ticks "$REDIS_PID")
  local TIMEFORMAT='%3U %3S'
  { time wrk "${args[@]}" -d"$DURATION" "$url" >"$WORK/wrk.out"; } 2>"$WORK/wrk.time"
  server1=$(cpu_ticks "$pid"); redis1=$(cpu_ticks "$REDIS_PID")
  out=$(cat "$WORK/wrk.out")
  local requests; requests=$(awk '/requests in/ {print $1}' <<<"$out")
  M_RPS=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
  M_P50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  M_P99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  M_NON2XX=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  # A send row whose sends were refused times refusals, which cost less than a send: said at
  # once (also from `paired`, whose output is not kept), so that no figure hides it. A few
  # refusals are the cooldowns of numbers drawn twice.
  if [[ $script == send.lua || $script == twilio_start.lua ]] &&
    awk -v bad="${M_NON2XX:-0}" -v n="$requests" 'BEGIN { exit !(n > 0 && bad > 0.05 * n) }'; then
    echo "WARNING: $instance $script${path:+ $path}: ${M_NON2XX} of $requests answers were not 2xx: this measurement timed refusals" >&2
  fi
  per_request() { awk -v t="$1" -v n="$requests" 'BEGIN { if (n > 0) printf "%.1f", t / n; else printf "-" }'; }
  M_CPU=$(per_request $(( (server1 - server0) * TICK_US )))
  M_REDIS_CPU=$(per_request $(( (redis1 - redis0) * TICK_US )))
  M_WRK_CPU=$(per_request "$(awk '{printf "%.0f", ($1 + $2) * 1000000}' "$WORK/wrk.time")")
}

# row NAME INSTANCE [key=value ...]: one measurement of INSTANCE, kept as a row of the table.
#   script=F   wrk script in scripts/wrk/ (none: GET the URL as is)
#   path=P     the request path (VERIFY_PATH for verify.lua; GET path without a script)
#   phones=N   draw phones from N numbers (default 10^8)
#   clients=N  send X-Forwarded-For from N client addresses (the instance must trust loopback)
#   ref=ROW    the row whose CPU per request this one is compared with
#   pairs=N    then N more measurements of ROW and this row, alternating: the median of their
#              ratios is the goal's figure (rows drift by 10-25 % over a run on a shared VM;
#              next to each other, the drift cancels)
row() {
  local name=$1 instance=$2; shift 2
  [[ -z $ONLY || $name == thin* || $name =~ $ONLY ]] || return 0
  local script="" path="" phones="" clients="" ref="" also="" pairs=0
  local arg; for arg in "$@"; do
    case $arg in
      script=*) script=${arg#*=} ;; path=*) path=${arg#*=} ;; phones=*) phones=${arg#*=} ;;
      clients=*) clients=${arg#*=} ;; ref=*) ref=${arg#*=} ;; pairs=*) pairs=${arg#*=} ;;
      also=*) also=${arg#*=} ;;
      *) echo "row: unknown argument $arg" >&2; return 1 ;;
    esac
  done
  measure "$instance" "$script" "$path" "$phones" "$clients"
  RPS[$name]=$M_RPS; P50[$name]=$M_P50; P99[$name]=$M_P99; NON2XX[$name]=$M_NON2XX
  CPU[$name]=$M_CPU; WRK_CPU[$name]=$M_WRK_CPU; REDIS_CPU[$name]=$M_REDIS_CPU
  REF[$name]=$ref
  SETUP[$name]="$instance|$script|$path|$phones|$clients"
  ROWS+=("$name")
  [ "$pairs" -gt 0 ] && [ -n "${SETUP[$ref]:-}" ] || return 0
  PAIRED[$name]=$(paired "$ref" "$pairs" "$instance" "$script" "$path" "$phones" "$clients")
  # also=ROW: the same again against a second reference (after the first: the store's tables
  # have grown by then, which the first pairs of a send still see).
  [ -n "$also" ] && [ -n "${SETUP[$also]:-}" ] || return 0
  PAIRED_ALSO[$name]=$(paired "$also" "$pairs" "$instance" "$script" "$path" "$phones" "$clients")
}

# paired REF PAIRS INSTANCE SCRIPT PATH PHONES CLIENTS: PAIRS measurements of the row, each
# right after one of REF (in a subshell: only what it prints is kept); prints the median of the
# ratios and the ratios.
paired() {
  local ref=$1 pairs=$2; shift 2
  local ratios=() ref_setup i ref_cpu
  IFS='|' read -r -a ref_setup <<<"${SETUP[$ref]}"
  for i in $(seq "$pairs"); do
    # `read -a` drops trailing empty fields: the empty strings stand in for them.
    measure "${ref_setup[@]}" "" "" "" "" "" >/dev/null; ref_cpu=$M_CPU
    measure "$@" >/dev/null
    ratios+=("$(awk -v a="$M_CPU" -v b="$ref_cpu" 'BEGIN { printf "%.2f", a / b }')")
  done
  echo "$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "%.2fx", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }') (${ratios[*]})"
}

selected() { [[ -z $ONLY || $1 =~ $ONLY ]]; }
THIN_GET="thin GET constant"
THIN_VERIFY="thin POST verify (1 EVALSHA)"
# The same over a connection per worker thread, as vcode's store has on one node: the stricter
# reference (the issue's goals are against the shared connection above).
THIN_OWN="thin POST verify, per-worker conn"
# A POST whose JSON body is parsed and nothing done: the reference of the embedded rows that
# POST a JSON body. Issue 18 set the embedded goal against the bodyless GET above, which this
# alone costs 1.1-1.6x of (reading and parsing a body that every such handler must); both
# ratios are printed.
THIN_JSON="thin POST JSON, constant answer"
# The embedded verify's honest reference (issue 42): the same JSON, one lookup-and-remove in a
# sharded in-process map under a mutex, a JSON answer; same allocator and profile as vcode.
THIN_MAP="thin POST verify (sharded map)"
# The least a send with hashed codes does (issue 42's yardstick for the send): the send's JSON,
# a CSPRNG code, its HMAC digest, a random id, the SMS's text, the phone's cooldown and hourly
# count and the code in one shard of the same map, a JSON answer. Paired against the thin map's
# verify: how much of the send's 1.5x goal the least send takes before any of vcode's steps.
THIN_SEND="thin POST send (sharded map)"
# The same least send on Redis: the phone's cooldown, hourly count and code in one hash, checked
# and written by one EVALSHA of a script of its own over the shared multiplexed connection.
THIN_SEND_REDIS="thin POST send (1 EVALSHA)"
# One account of the Twilio-compatible API on the first instances, for its rows.
TWILIO_ACCOUNT=$($BIN/vcode twilio-account | awk -F': ' '{print $2}' | paste -sd' ')
read -r TWILIO_SID TWILIO_TOKEN TWILIO_ENTRY <<<"$TWILIO_ACCOUNT"
export TWILIO_AUTH; TWILIO_AUTH=$(printf '%s:%s' "$TWILIO_SID" "$TWILIO_TOKEN" | base64 -w0)
start_vcode embedded "${QUOTAS_OFF[@]}" VCODE_TWILIO_COMPAT_ACCOUNTS="$TWILIO_ENTRY"
start_vcode redis VCODE_REDIS_URL="$REDIS_URL" "${QUOTAS_OFF[@]}" VCODE_TWILIO_COMPAT_ACCOUNTS="$TWILIO_ENTRY"
twilio_service() { # instance: a new Service's SID
  curl -fs -u "$TWILIO_SID:$TWILIO_TOKEN" -d FriendlyName=bench "${URL[$1]}/v2/Services" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["sid"])'
}

row "$THIN_GET" thin path=/constant
row "$THIN_VERIFY" thin script=verify.lua path=/verify
row "$THIN_OWN" thin script=verify.lua path=/verify-per-worker
row "$THIN_JSON" thin script=verify.lua path=/json
row "$THIN_MAP" thin script=verify.lua path=/verify-map
if selected 'send, embedded' || selected 'send, Redis' || selected 'send, embedded, defaults' ||
  selected 'send, Redis, defaults'; then
  row "$THIN_SEND" thin script=send.lua path=/send-map ref="$THIN_MAP" pairs="$PAIRS"
  row "$THIN_SEND_REDIS" thin script=send.lua path=/send-redis ref="$THIN_VERIFY" pairs="$PAIRS"
fi
row "verify, embedded" embedded script=verify.lua ref="$THIN_MAP" pairs="$PAIRS"
row "verify, Redis" redis script=verify.lua ref="$THIN_VERIFY" pairs="$PAIRS"
# Issue 42's rows: verify by phone, so that vcode does one lookup as the thin handlers do (by
# id it first reads where the id leads, and a random id's miss ends there). The thin handlers
# answer a miss 200 and vcode 410: both do the same one lookup.
# Each row's own name: ONLY='verify by phone, embedded' must start its instance too.
if selected 'verify by phone, embedded' || selected 'verify by phone, Redis'; then
  start_vcode embedded-phone "${QUOTAS_OFF[@]}" VCODE_VERIFY_BY=phone
  start_vcode redis-phone VCODE_REDIS_URL="$REDIS_URL" "${QUOTAS_OFF[@]}" VCODE_VERIFY_BY=phone
  row "verify by phone, embedded" embedded-phone script=verify.lua ref="$THIN_MAP" pairs="$PAIRS"
  row "verify by phone, Redis" redis-phone script=verify.lua ref="$THIN_VERIFY" pairs="$PAIRS"
fi
row "verify, embedded, 10k phones" embedded script=verify.lua phones=10000 ref="$THIN_MAP"
row "verify, Redis, 10k phones" redis script=verify.lua phones=10000 ref="$THIN_VERIFY"
row "send, embedded" embedded script=send.lua ref="$THIN_JSON"
row "send, Redis" redis script=send.lua ref="$THIN_VERIFY" pairs="$PAIRS"
row "captcha create+fetch, embedded" embedded script=captcha.lua ref="$THIN_GET"
row "captcha create+fetch, Redis" redis script=captcha.lua ref="$THIN_VERIFY"
# The Twilio-compatible start and check (issue 28) against /api/v1's send and verify of the
# same instance: the same use cases, plus HTTP Basic, the form, the Service and the send log.
export TWILIO_SERVICE
for instance in embedded redis; do
  label=$([ "$instance" = redis ] && echo Redis || echo embedded)
  selected "twilio .*, $label" || continue
  TWILIO_SERVICE=$(twilio_service "$instance")
  row "twilio start, $label" "$instance" script=twilio_start.lua ref="send, $label" pairs="$PAIRS"
  row "twilio check, $label" "$instance" script=twilio_check.lua ref="verify, $label" pairs="$PAIRS"
done

# The configuration people run: every default limit on (per phone, per client, failures), the
# clients spread over a million addresses behind a trusted proxy (loopback), so that the
# per-client limits count as they would in production and refuse nothing. The fraud guard runs
# at its default level and judges every send, but wrk never verifies, so at its own thresholds
# it would (rightly) refuse a range without history after ten sends (issue 39) and the rows
# would time refusals: its handful is put out of reach instead, so every send pays the guard's
# step and is sent. Out of reach means a billion (EVIDENCE, the setting's maximum): a row sends
# millions of times, and at a million (the maximum until 2026-12-07) every send after about the
# millionth was refused (40300: 15-16 µs of CPU a refusal against 21-25 µs a send, embedded),
# and from the 250,000th the country and the service were counted in the store on every send
# (a quarter of their verdict, which converting traffic never nears). An older build takes at
# most EVIDENCE=1000000, and its send rows time refusals from then on.
EVIDENCE=${EVIDENCE:-1000000000}
DEFAULTS=(VCODE_TRUSTED_PROXIES=127.0.0.1 VCODE_FRAUD_EVIDENCE="$EVIDENCE")
start_vcode embedded "${DEFAULTS[@]}"
start_vcode redis VCODE_REDIS_URL="$REDIS_URL" "${DEFAULTS[@]}"
row "verify, embedded, defaults" embedded script=verify.lua clients=1000000 ref="$THIN_JSON"
row "verify, Redis, defaults" redis script=verify.lua clients=1000000 ref="$THIN_VERIFY"
# Issue 42: a send with every default on at most 1.5x the thin verify doing one lookup, on
# both stores (the embedded one against the sharded map); then paired against the thin send of
# its store, the least a send does (printed below the goals: what vcode's send costs beyond it).
row "send, embedded, defaults" embedded script=send.lua clients=1000000 ref="$THIN_MAP" pairs="$PAIRS" \
  also="$THIN_SEND"
row "send, Redis, defaults" redis script=send.lua clients=1000000 ref="$THIN_VERIFY" pairs="$PAIRS" \
  also="$THIN_SEND_REDIS"
row "captcha create+fetch, Redis, defaults" redis script=captcha.lua clients=1000000 ref="$THIN_VERIFY"
# Delivery receipts: a send through the webhook sender (the thin server's /sms answers 200),
# with receipts off and on; on, each send records its message id (one more store write).
WEBHOOK_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
if selected "receipts"; then
  WEBHOOK=(VCODE_REDIS_URL="$REDIS_URL" "${QUOTAS_OFF[@]}" VCODE_SMS=webhook
    VCODE_SMS_WEBHOOK_URL="${URL[thin]}/sms" VCODE_SMS_WEBHOOK_SECRET="$WEBHOOK_SECRET")
  start_vcode webhook "${WEBHOOK[@]}"
  start_vcode receipts "${WEBHOOK[@]}" VCODE_SMS_RECEIPTS_URL=https://vcode.example
fi
row "send, Redis, webhook, receipts off" webhook script=send.lua ref="$THIN_VERIFY"
row "send, Redis, webhook, receipts on" receipts script=send.lua ref="send, Redis, webhook, receipts off" pairs="$PAIRS"

# What a send with the defaults leaves beside its code: the phone's SMS log and the client's
# budget (mean MEMORY USAGE of up to 200 keys each).
mean_memory() { # key pattern
  local sample=0 total=0 key
  for key in $(redis-cli -p "$REDIS_PORT" --scan --pattern "$1" | head -200); do
    total=$(( total + $(redis-cli -p "$REDIS_PORT" memory usage "$key") )); sample=$((sample + 1))
  done
  [ "$sample" -gt 0 ] && echo $(( total / sample )) || echo -
}
if selected "send, Redis, defaults"; then
  SMS_LOG_BYTES=$(mean_memory 'verify_code:quota:{+*}:sends')
  IP_BUDGET_BYTES=$(mean_memory 'verify_code:quota:{budgets}:ip:*')
fi

# The same at the default log level (not goal rows): the request span on every request and one
# line per send, written to a file (`$WORK/redis.log`); the log sender's own line, which stands
# in for a provider here, stays off.
start_vcode redis VCODE_REDIS_URL="$REDIS_URL" "${DEFAULTS[@]}" RUST_LOG=info,vcode::sms::log=warn
row "send, Redis, defaults, info logs" redis script=send.lua clients=1000000 ref="$THIN_VERIFY"
row "verify, Redis, defaults, info logs" redis script=verify.lua clients=1000000 ref="$THIN_VERIFY"

# The same verify load against stores holding few and many pending codes.
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/${PID[$1]}/status"; }
used_memory() { redis-cli -p "$REDIS_PORT" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }
for count in $FEW $MANY; do
  selected "verify, embedded, $MANY pending" || selected "verify, Redis, $MANY pending" || continue
  redis-cli -p "$REDIS_PORT" flushall >/dev/null
  start_vcode embedded "${QUOTAS_OFF[@]}"
  start_vcode redis VCODE_REDIS_URL="$REDIS_URL" "${QUOTAS_OFF[@]}"
  before_kb=$(rss_kb embedded)
  $BIN/examples/fill_codes "${URL[embedded]}" "$count"
  after_kb=$(rss_kb embedded)
  row "verify, embedded, $count pending" embedded script=verify.lua ref="$THIN_GET"
  # An empty embedded instance from here on: its expiry sweep over the codes would take CPU
  # from the Redis rows.
  start_vcode embedded "${QUOTAS_OFF[@]}"
  used_before=$(used_memory)
  $BIN/examples/fill_codes "${URL[redis]}" "$count"
  used_after=$(used_memory)
  # The same script with no vcode around it, on the same Redis: what Redis itself does at this size.
  row "thin POST verify, $count pending" thin script=verify.lua path=/verify
  row "verify, Redis, $count pending" redis script=verify.lua ref="thin POST verify, $count pending"
  if [ "$count" = "$MANY" ]; then
    EMBEDDED_BYTES=$(( (after_kb - before_kb) * 1024 / count ))
    REDIS_KEYS=$(redis-cli -p "$REDIS_PORT" dbsize)
    sample=0; total=0
    for key in $(redis-cli -p "$REDIS_PORT" --scan --pattern 'verify_code:{*}:login' | head -200); do
      total=$(( total + $(redis-cli -p "$REDIS_PORT" memory usage "$key") )); sample=$((sample + 1))
    done
    REDIS_BYTES=$(( total / sample ))
    # A pending verification whole (issue 42: every key it needs, by MEMORY USAGE): every key
    # of the database over the codes (the quotas are off: nothing else grows with them).
    REDIS_VERIFICATION_BYTES=$(( $(redis-cli -p "$REDIS_PORT" --scan | sed 's/^/MEMORY USAGE "/; s/$/"/' |
      redis-cli -p "$REDIS_PORT" | awk '{ total += $1 } END { print total }') / count ))
    REDIS_USED_BYTES=$(( (used_after - used_before) / count ))
  fi
done

# PostgreSQL rows, bytes per code and the cleanup's cost (scripts/bench-postgres.sh).
source scripts/bench-postgres.sh; bench_postgres

cpu_ratio() { awk -v a="${CPU[$1]:-}" -v b="${CPU[$2]:-}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else printf "-" }'; }
printf '\n%-38s %8s %8s %8s %7s %8s %8s %8s  %s\n' "row (-t$THREADS -c$CONNECTIONS, $DURATION)" "req/s" "p50" "p99" "non-2xx" \
  "srv µs" "wrk µs" "redis µs" "server CPU per request vs reference"
for name in "${ROWS[@]}"; do
  ref=${REF[$name]}; r=""
  [ -n "$ref" ] && r="$(cpu_ratio "$name" "$ref") of ${ref%% (*}"
  printf '%-38s %8s %8s %8s %7s %8s %8s %8s  %s\n' "$name" "${RPS[$name]}" "${P50[$name]}" "${P99[$name]}" \
    "${NON2XX[$name]:-0}" "${CPU[$name]}" "${WRK_CPU[$name]}" "${REDIS_CPU[$name]}" "$r"
done
echo "(µs: CPU per request of the server process, of wrk and of redis-server; a row is wrk-bound"
echo " when wrk's µs come near 1e6 x threads / req/s)"
printf '\ngoals, each the median of %s interleaved measurements of the row and its reference (the ratios):\n' "$PAIRS"
goal() { # row limit
  [ -n "${PAIRED[$1]:-}" ] || return 0
  local verdict; verdict=$(awk -v r="${PAIRED[$1]%%x*}" -v l="$2" 'BEGIN { print (r <= l) ? "holds" : "MISSED" }')
  printf '  %-26s %-30s <= %.2fx of %-32s %s\n' "$1" "${PAIRED[$1]}" "$2" "${REF[$1]}" "$verdict"
}
goal "verify, Redis" 1.10
goal "verify, embedded" 1.40
# Issue 42: at least 0.9x the thinnest handler doing the same lookup (its CPU over vcode's).
goal "verify by phone, Redis" 1.11
goal "verify by phone, embedded" 1.11
goal "send, Redis" 1.50
goal "send, Redis, defaults" 1.50
goal "send, embedded, defaults" 1.50
goal "twilio start, embedded" 1.30
goal "twilio check, embedded" 1.30
goal "twilio start, Redis" 1.30
goal "twilio check, Redis" 1.30
goal "send, Redis, webhook, receipts on" 1.10
printf '\nagainst the thin handler with a connection per worker: verify Redis %s, send Redis %s, send Redis defaults %s\n' \
  "$(cpu_ratio "verify, Redis" "$THIN_OWN")" "$(cpu_ratio "send, Redis" "$THIN_OWN")" "$(cpu_ratio "send, Redis, defaults" "$THIN_OWN")"
printf 'against the bodyless GET: verify embedded %s, send embedded %s, verify embedded defaults %s (the JSON POST itself: %s of the GET)\n' \
  "$(cpu_ratio "verify, embedded" "$THIN_GET")" "$(cpu_ratio "send, embedded" "$THIN_GET")" \
  "$(cpu_ratio "verify, embedded, defaults" "$THIN_GET")" "$(cpu_ratio "$THIN_JSON" "$THIN_GET")"
printf 'verify CPU per request, %s vs %s pending codes: embedded %s, Redis %s (thin EVALSHA on that Redis: %s)\n' \
  "$MANY" "$FEW" \
  "$(cpu_ratio "verify, embedded, $MANY pending" "verify, embedded, $FEW pending")" \
  "$(cpu_ratio "verify, Redis, $MANY pending" "verify, Redis, $FEW pending")" \
  "$(cpu_ratio "thin POST verify, $MANY pending" "thin POST verify, $FEW pending")"
printf 'the thin send against the thin verify: map %s, EVALSHA %s; send with the defaults against the thin send: embedded %s, Redis %s (medians of %s interleaved pairs)\n' \
  "${PAIRED[$THIN_SEND]:--}" "${PAIRED[$THIN_SEND_REDIS]:--}" "${PAIRED_ALSO[send, embedded, defaults]:--}" \
  "${PAIRED_ALSO[send, Redis, defaults]:--}" "$PAIRS"
printf 'defaults vs limits off, CPU per request: send embedded %s, send Redis %s, verify embedded %s, verify Redis %s\n' \
  "$(cpu_ratio "send, embedded, defaults" "send, embedded")" "$(cpu_ratio "send, Redis, defaults" "send, Redis")" \
  "$(cpu_ratio "verify, embedded, defaults" "verify, embedded")" "$(cpu_ratio "verify, Redis, defaults" "verify, Redis")"
printf 'memory per pending code: Redis %s bytes (MEMORY USAGE, mean of 200 keys; %s keys), %s bytes (used_memory growth / %s codes), embedded %s bytes (RSS growth / %s codes)\n' \
  "${REDIS_BYTES:--}" "${REDIS_KEYS:--}" "${REDIS_USED_BYTES:--}" "$MANY" "${EMBEDDED_BYTES:--}" "$MANY"
printf 'a pending verification on Redis, every key it needs: %s bytes (MEMORY USAGE of all keys / %s sends; issue 42: at most 300)\n' \
  "${REDIS_VERIFICATION_BYTES:--}" "$MANY"
postgres_summary
printf 'beside each code with the default limits: SMS log %s bytes, client budget %s bytes (MEMORY USAGE)\n' \
  "${SMS_LOG_BYTES:--}" "${IP_BUDGET_BYTES:--}"
printf 'machine: %s, %s cores, load %s; %s\n' "$(uname -m)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u '+%Y-%m-%d %H:%M UTC')"
