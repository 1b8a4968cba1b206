#!/usr/bin/env bash
# Gate: deploy/ is valid and starts. HAProxy parses deploy/haproxy.cfg; deploy/compose.yaml
# validates against the Compose Specification's JSON schema and deploy/k8s/*.yaml against the
# Kubernetes schemas (strict: unknown fields fail). Each validator must also reject a broken
# copy, so a validator that checks nothing cannot pass the gate. Then the Dockerfile, the
# Compose file and the Kubernetes manifest are started as written against target/debug/toolforge
# (scripts/deploy-start) and must pass their own health checks. Tools come from scripts/setup.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
venv="$root/.tools/venv/bin"
for t in "$venv/check-jsonschema" "$venv/kubernetes-validate"; do
  [ -x "$t" ] || { echo "deploy gate: $t missing: run scripts/setup" >&2; exit 1; }
done
command -v haproxy >/dev/null || { echo "deploy gate: haproxy missing: run scripts/setup" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== haproxy -c deploy/haproxy.cfg"
haproxy -q -c -f deploy/haproxy.cfg
sed 's/^    balance roundrobin/    balance round-robin-typo/' deploy/haproxy.cfg >"$tmp/haproxy.cfg"
if haproxy -q -c -f "$tmp/haproxy.cfg" 2>/dev/null; then
  echo "deploy gate: haproxy accepted a broken configuration" >&2; exit 1
fi

echo "== compose.yaml against the Compose Specification"
"$venv/check-jsonschema" --builtin-schema vendor.compose-spec deploy/compose.yaml
sed 's/^    stop_grace_period:/    stop_grace_periodd:/' deploy/compose.yaml >"$tmp/compose.yaml"
if "$venv/check-jsonschema" --builtin-schema vendor.compose-spec "$tmp/compose.yaml" >/dev/null 2>&1; then
  echo "deploy gate: the compose schema accepted a broken file" >&2; exit 1
fi

echo "== deploy/k8s against the Kubernetes schemas"
"$venv/kubernetes-validate" --strict --quiet deploy/k8s/*.yaml
sed 's/readinessProbe:/readinessProbz:/' deploy/k8s/deployment.yaml >"$tmp/deployment.yaml"
if "$venv/kubernetes-validate" --strict --quiet "$tmp/deployment.yaml" >/dev/null 2>&1; then
  echo "deploy gate: the Kubernetes schemas accepted a broken manifest" >&2; exit 1
fi
echo "== deploy files started as written (scripts/deploy-start)"
for file in dockerfile compose k8s; do
  "$venv/python" scripts/deploy-start "$file"
done
echo "deploy: 3 checks passed, 3 broken copies rejected, 3 files started and healthy"
