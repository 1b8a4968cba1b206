#!/usr/bin/env bash
# Operations tools: HAProxy (Debian) for scripts/cluster-test and the deploy gate; into the
# venv $TOOLS_DIR/venv, the Prometheus client (its parser reads /metrics in the tests) and the
# validators of deploy/ (check-jsonschema, with the Compose Specification's schema built in;
# kubernetes-validate, with the Kubernetes schemas built in). Pinned; idempotent.
set -euo pipefail
: "${TOOLS_DIR:?run through scripts/setup}"
if ! command -v haproxy >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq haproxy >/dev/null
fi
OPS_PKGS=("prometheus-client==0.26.0" "check-jsonschema==0.39.0" "kubernetes-validate==1.37.0")
venv="$TOOLS_DIR/venv"
stamp="$venv/.installed-ops"
want="${OPS_PKGS[*]}"
[ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${OPS_PKGS[@]}"
  echo "$want" >"$stamp"
fi
"$venv/bin/python" -c "import prometheus_client.parser"
test -x "$venv/bin/check-jsonschema"
test -x "$venv/bin/kubernetes-validate"
