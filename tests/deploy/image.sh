#!/usr/bin/env bash
# The image as an operator runs it, with podman (run by .ci/run): vcode's image and a Redis image
# built here from Debian's redis-server (scripts/image), on a network of their own. vcode runs
# as its non-root user on a read-only root file system, answers /readyz, a send and a verify go
# through against Redis in the other container, its HEALTHCHECK (`vcode healthcheck`) passes,
# and fails once Redis is stopped. PROFILE=dev (default here) images the dev build the tests
# use; the release image's size is scripts/image's to print.
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFILE=${PROFILE:-dev}
RUN=vcode-test-$$
NET=$RUN-net
cleanup() {
  podman rm -f "$RUN-vcode" "$RUN-redis" >/dev/null 2>&1 || true
  podman network rm "$NET" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; podman logs "$RUN-vcode" 2>&1 | tail -20 >&2 || true; exit 1; }

PROFILE=$PROFILE TAG=localhost/vcode:test scripts/image vcode
TAG=localhost/vcode-redis:test scripts/image redis
podman network create "$NET" >/dev/null
podman run -d --name "$RUN-redis" --network "$NET" --network-alias redis --read-only \
  localhost/vcode-redis:test >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# As the Kubernetes manifests run it: its user, a read-only root, no capability, no privilege
# escalation.
podman run -d --name "$RUN-vcode" --network "$NET" -p "127.0.0.1:$PORT:8080" --read-only \
  --user 65532:65532 --cap-drop ALL --security-opt no-new-privileges \
  -e VCODE_REDIS_URL=redis://redis:6379 \
  -e VCODE_SECRET_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
  -e VCODE_ADMIN_TOKEN="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
  -e VCODE_SMS=log \
  -e VCODE_TEST_NUMBERS=+8613800000000=123456 -e VCODE_TEST_NUMBERS_ON_PUBLIC_BIND=true \
  localhost/vcode:test >/dev/null

URL=http://127.0.0.1:$PORT
for _ in $(seq 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] && break
  sleep 0.2
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] || fail "/readyz is not 200"

[ "$(podman inspect "$RUN-vcode" --format '{{.Config.User}}')" = 65532:65532 ] || fail "not its non-root user"
[ "$(podman inspect "$RUN-vcode" --format '{{.HostConfig.ReadonlyRootfs}}')" = true ] || fail "root file system not read-only"
[ "$(podman top "$RUN-vcode" huser | tail -n 1 | tr -d ' ')" = 65532 ] || fail "the process is not uid 65532"

ID=$(curl -sf "$URL/api/v1/otp/send" -H 'content-type: application/json' \
  -d '{"phone": "+8613800000000"}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["verification_id"])') ||
  fail "send"
VERIFIED=$(curl -s "$URL/api/v1/otp/verify" -H 'content-type: application/json' \
  -d "{\"verification_id\": \"$ID\", \"code\": \"123456\"}")
echo "$VERIFIED" | grep -q '"verified":true' || fail "verify: $VERIFIED"

podman healthcheck run "$RUN-vcode" >/dev/null || fail "HEALTHCHECK while ready"
podman stop -t 2 "$RUN-redis" >/dev/null
for _ in $(seq 20); do
  podman healthcheck run "$RUN-vcode" >/dev/null 2>&1 || { echo "image test OK"; exit 0; }
  sleep 0.5
done
fail "HEALTHCHECK still passes with Redis stopped"
