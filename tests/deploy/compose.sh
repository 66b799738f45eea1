#!/usr/bin/env bash
# deploy/compose.yaml comes up with plain `podman-compose up` (its default profile, Redis) on images built here
# (scripts/image: vcode's dev build and Debian's redis-server), every service healthy, and
# serves a verification (a test number, through the published port); run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d)
PROJECT=vcode-compose-$$
cp deploy/compose.yaml deploy/secrets.sh deploy/.env "$WORK/"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The Redis image built here runs as uid 65532, and podman 4.3 mounts a new named volume owned
# by root (the public image starts as root and changes users itself; podman's U option does
# not chown a named volume there): here only, ours runs as root.
cat >"$WORK/test.yaml" <<YAML
services:
  redis:
    user: "0:0"
  vcode-redis:
    environment:
      VCODE_TEST_NUMBERS: "+8613800000000=123456"
      VCODE_TEST_NUMBERS_ON_PUBLIC_BIND: "true"
YAML
compose() {
  VCODE_IMAGE=localhost/vcode:test REDIS_IMAGE=localhost/vcode-redis:test VCODE_PORT=$PORT \
    podman-compose -p "$PROJECT" -f "$WORK/compose.yaml" -f "$WORK/test.yaml" "$@"
}
cleanup() { compose down -v >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; compose logs >&2 2>&1 | tail -30 || true; exit 1; }

[ -n "${SKIP_BUILD:-}" ] || { PROFILE=${PROFILE:-dev} TAG=localhost/vcode:test scripts/image vcode; TAG=localhost/vcode-redis:test scripts/image redis; }
"$WORK/secrets.sh" >/dev/null
compose up -d >/dev/null 2>&1 || fail "compose up"
URL=http://127.0.0.1:$PORT
for _ in $(seq 150); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] && break
  sleep 0.2
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] || fail "/readyz is not 200"
for service in redis vcode-redis; do
  container=$(podman ps --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=$service" --format '{{.Names}}' | head -n 1)
  [ -n "$container" ] || fail "no $service container"
  podman healthcheck run "$container" >/dev/null 2>&1 || fail "$service is not healthy"
done
vcode_container=$(podman ps --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=vcode-redis" --format '{{.Names}}' | head -n 1)
podman port "$vcode_container" | grep -q '^8080/tcp' || fail "the public API is not published"
if podman port "$vcode_container" | grep -q '^9091/'; then fail "the operator listener is published"; fi
ID=$(curl -sf "$URL/api/v1/otp/send" -H 'content-type: application/json' -d '{"phone": "+8613800000000"}' |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["verification_id"])') || fail "send"
curl -s "$URL/api/v1/otp/verify" -H 'content-type: application/json' \
  -d "{\"verification_id\": \"$ID\", \"code\": \"123456\"}" | grep -q '"verified":true' || fail "verify"
echo "compose test OK"
