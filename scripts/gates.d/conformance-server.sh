#!/usr/bin/env bash
# Gate: the official MCP conformance suite (server scenarios, 0.2.0-alpha.12), two protocol
# revisions: `--spec-version 2025-11-25` (31 scenarios) and `--spec-version 2026-07-28 --suite
# all` (40 scenarios), each
#   (a) against the built-in fixture (`toolforge server conformance --port P`): all must pass;
#   (b) through one gateway (`toolforge serve`) on its default configuration, whose only
#       upstream is the fixture on its default, over stdio, and again over Streamable HTTP: all
#       must pass too. The pool speaks whatever era the fixture answers in (`"auto"`), and the
#       fixture asks each client the way the client's era allows, so both suites go through the
#       gateway's era bridge: a 2025-11-25 client is asked mid-call for what a 2026-07-28
#       backend's `input_required` needs.
# Also the Skills extension's scenarios (SEP-2640: `sep-2640-skills-*`, no `--spec-version`, so
# the suite speaks 2026-07-28) against the fixture and through both gateways: all must pass.
# Also the Tasks extension's scenarios (SEP-2663: `tasks-*`, likewise) against the fixture and
# through both gateways: all must pass, each with at least one check run (not all skipped),
# but `tasks-status-notifications`, which skips itself in this suite version.
# Also runs the 2025-11-25 pending suite against the fixture (informational, not gating).
# Builds nothing: expects target/debug/toolforge (scripts/test builds it).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="${CARGO_TARGET_DIR:-$root/target}/debug/toolforge"
runner="$root/scripts/conformance-server.sh"
if [ ! -x "$bin" ]; then
  echo "conformance gate: $bin missing: build it first (cargo build -p toolforge)" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/toolforge-conformance-gate.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
}
trap cleanup EXIT INT TERM

# announced LOG MARKER PID: the host:port a server started on port 0 writes after MARKER in LOG
# once it listens (no port is picked, released and raced for), polled for at most 30 s.
announced() {
  local log=$1 marker=$2 pid=$3 addr
  for _ in $(seq 1 150); do
    addr=$(grep -o "${marker}[^/ ]*" "$log" | head -n 1)
    if [ -n "$addr" ]; then
      echo "${addr#"$marker"}"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "conformance gate: server exited before it listened; its log:" >&2
      cat "$log" >&2
      return 1
    fi
    sleep 0.2
  done
  echo "conformance gate: no \"$marker\" in $log after 30 s; its log:" >&2
  cat "$log" >&2
  return 1
}

# wait_ready URL PID LOG: polls until an HTTP server answers on URL (any status), at most 30 s.
wait_ready() {
  local url=$1 pid=$2 log=$3
  for _ in $(seq 1 150); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "conformance gate: server exited before it was ready; its log:" >&2
      cat "$log" >&2
      return 1
    fi
    if curl -s -o /dev/null --max-time 1 "$url"; then return 0; fi
    sleep 0.2
  done
  echo "conformance gate: $url not ready after 30 s; server log:" >&2
  cat "$log" >&2
  return 1
}

# run_suite LABEL URL LOG [args]: runs the suite, prints its last line, returns its status.
run_suite() {
  local label=$1 url=$2 log=$3; shift 3
  local out="$work/$label.out"
  CONFORMANCE_RESULTS="$work/$label-results" "$runner" "$url" "$@" >"$out" 2>&1
  local rc=$?
  local last; last=$(tail -n 1 "$out")
  local baseline=""
  if grep -q "Expected failures (in baseline)" "$out"; then
    baseline=" (failures listed in the expected-failures baseline are allowed)"
  fi
  echo "conformance gate: $label: $last$baseline"
  if [ "$rc" -ne 0 ]; then
    grep -E '^✗|FAILURE|errorMessage' "$out" | head -40 >&2
    grep -A30 -E 'Unexpected failures|[Ss]tale' "$out" | head -40 >&2
    echo "--- server log ($log) ---" >&2
    tail -n 60 "$log" >&2
  fi
  return "$rc"
}

# run_revisions LABEL URL LOG: the 2025-11-25 suite and the 2026-07-28 `all` suite.
run_revisions() {
  local label=$1 url=$2 log=$3 rc=0
  local revision args
  for revision in 2025-11-25 2026-07-28; do
    args=(--spec-version "$revision")
    [ "$revision" = 2026-07-28 ] && args+=(--suite all)
    run_suite "$label-$revision" "$url" "$log" "${args[@]}" || rc=1
  done
  return "$rc"
}

# run_skills LABEL URL LOG: the Skills extension's scenarios, each on its own.
run_skills() {
  local label=$1 url=$2 log=$3 rc=0 scenario
  for scenario in sep-2640-skills-enumeration sep-2640-skills-manifest sep-2640-skills-directory; do
    CONFORMANCE_REQUIRE_CHECKS=1 run_suite "$label-$scenario" "$url" "$log" --scenario "$scenario" || rc=1
  done
  return "$rc"
}

# run_tasks LABEL URL LOG: the Tasks extension's scenarios, each on its own, each with real
# checks run.
run_tasks() {
  local label=$1 url=$2 log=$3 rc=0 scenario
  for scenario in tasks-capability-negotiation tasks-lifecycle tasks-dispatch-and-envelope \
    tasks-mrtr-input tasks-mrtr-composition tasks-request-headers tasks-request-state-removal \
    tasks-required-task-error tasks-wire-fields; do
    CONFORMANCE_REQUIRE_CHECKS=1 run_suite "$label-$scenario" "$url" "$log" --scenario "$scenario" || rc=1
  done
  run_suite "$label-tasks-status-notifications" "$url" "$log" --scenario tasks-status-notifications || rc=1
  return "$rc"
}

status=0

# (a) the fixture over Streamable HTTP
"$bin" server conformance --port 0 >"$work/fixture.log" 2>&1 &
pids+=($!)
if addr=$(announced "$work/fixture.log" "conformance fixture listening on http://" "${pids[-1]}") \
  && wait_ready "http://$addr/mcp" "${pids[-1]}" "$work/fixture.log"; then
  run_revisions fixture "http://$addr/mcp" "$work/fixture.log" || status=1
  run_skills fixture "http://$addr/mcp" "$work/fixture.log" || status=1
  run_tasks fixture "http://$addr/mcp" "$work/fixture.log" || status=1
  run_suite fixture-pending "http://$addr/mcp" "$work/fixture.log" \
    --spec-version 2025-11-25 --suite pending \
    || echo "conformance gate: pending suite failed (informational, not gating)"
else
  status=1
fi

# (b) one gateway, default configuration, in front of the fixture over stdio and over HTTP.
# run_gateway LABEL SERVER-JSON
run_gateway() {
  local label=$1 server=$2 gaddr
  cat >"$work/$label.servers.json" <<JSON
{"mcpServers": {"conformance": $server}}
JSON
  "$bin" serve --config "$work/$label.servers.json" --host 127.0.0.1 --port 0 \
    >"$work/$label.log" 2>&1 &
  pids+=($!)
  gaddr=$(announced "$work/$label.log" "toolforge: serving http://" "${pids[-1]}") || return 1
  wait_ready "http://$gaddr/mcp" "${pids[-1]}" "$work/$label.log" || return 1
  local rc=0
  run_revisions "$label" "http://$gaddr/mcp" "$work/$label.log" || rc=1
  run_skills "$label" "http://$gaddr/mcp" "$work/$label.log" || rc=1
  run_tasks "$label" "http://$gaddr/mcp" "$work/$label.log" || rc=1
  return "$rc"
}
run_gateway gateway-stdio "{\"command\": \"$bin\", \"args\": [\"server\", \"conformance\", \"--stdio\"]}" || status=1
"$bin" server conformance --port 0 >"$work/fixture-upstream.log" 2>&1 &
pids+=($!)
if faddr=$(announced "$work/fixture-upstream.log" "conformance fixture listening on http://" "${pids[-1]}") \
  && wait_ready "http://$faddr/mcp" "${pids[-1]}" "$work/fixture-upstream.log"; then
  run_gateway gateway-http "{\"type\": \"http\", \"url\": \"http://$faddr/mcp\"}" || status=1
else
  status=1
fi

if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "conformance gate: logs kept in $work" >&2; fi
exit "$status"
