#!/usr/bin/env bash
# How often a call's notifications all reach the client, in order, before its result, through
# the gateway: runs the official conformance suite's `tools-call-with-logging` and
# `tools-call-with-progress` server scenarios RUNS times each (default 50), for each protocol
# revision (2025-11-25, 2026-07-28; logging is 2025-11-25 only), against one gateway (`toolforge serve`) on its default
# configuration whose only upstream is the built-in conformance fixture, over stdio and again
# over Streamable HTTP. Prints one line per (upstream, revision, scenario): passed/RUNS.
#
# Usage: scripts/measure/notification-order.sh [RUNS]
# Builds nothing: expects target/debug/toolforge (cargo build -p toolforge) and the suite from
# scripts/setup. Everything listens on loopback ports the servers pick.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-50}
bin="${CARGO_TARGET_DIR:-$root/target}/debug/toolforge"
runner="$root/scripts/conformance-server.sh"
[ -x "$bin" ] || { echo "$bin missing: cargo build -p toolforge" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/toolforge-notification-order.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# announced LOG MARKER PID: the host:port a server started on port 0 writes after MARKER.
announced() {
  local log=$1 marker=$2 pid=$3 addr
  for _ in $(seq 1 150); do
    addr=$(grep -o "${marker}[^/ ]*" "$log" | head -n 1)
    if [ -n "$addr" ]; then
      echo "${addr#"$marker"}"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; return 1; }
    sleep 0.2
  done
  cat "$log" >&2
  return 1
}

# gateway LABEL SERVER-JSON: starts a gateway in front of SERVER-JSON; sets `url` to its /mcp
# URL once the upstream is ready. (Not run in a `$(...)` subshell, so its pid reaches `pids`.)
gateway() {
  local label=$1 server=$2 addr
  printf '{"mcpServers": {"conformance": %s}}\n' "$server" >"$work/$label.json"
  "$bin" serve --config "$work/$label.json" --host 127.0.0.1 --port 0 >"$work/$label.log" 2>&1 &
  pids+=($!)
  addr=$(announced "$work/$label.log" "toolforge: serving http://" "${pids[-1]}") || return 1
  for _ in $(seq 1 150); do
    if curl -s --max-time 1 "http://$addr/health" | grep -q '"state": *"ready"'; then
      url="http://$addr/mcp"
      return 0
    fi
    sleep 0.2
  done
  echo "gateway $label: upstream not ready; its log:" >&2
  cat "$work/$label.log" >&2
  return 1
}

# measure LABEL URL: RUNS runs of each scenario on each revision.
measure() {
  local label=$1 url=$2 revision scenario n passed args
  for revision in 2025-11-25 2026-07-28; do
    args=(--spec-version "$revision")
    [ "$revision" = 2026-07-28 ] && args+=(--suite all)
    for scenario in tools-call-with-logging tools-call-with-progress; do
      # The suite removed logging from 2026-07-28 (it skips the scenario there).
      if [ "$scenario" = tools-call-with-logging ] && [ "$revision" = 2026-07-28 ]; then
        echo "$label upstream, $revision, $scenario: not in this revision"
        continue
      fi
      passed=0
      for n in $(seq 1 "$runs"); do
        if CONFORMANCE_RESULTS="$work/results-$label-$revision-$scenario-$n" \
          "$runner" "$url" "${args[@]}" --scenario "$scenario" >"$work/run.out" 2>&1 \
          && tail -n 1 "$work/run.out" | grep -q '^1 passed, 0 failed$'; then
          passed=$((passed + 1))
        fi
        rm -rf "$work/results-$label-$revision-$scenario-$n"
      done
      echo "$label upstream, $revision, $scenario: $passed/$runs"
    done
  done
}

status=0
url=""
if gateway stdio "{\"command\": \"$bin\", \"args\": [\"server\", \"conformance\", \"--stdio\"]}"; then
  measure stdio "$url"
else
  status=1
fi
"$bin" server conformance --port 0 >"$work/fixture.log" 2>&1 &
pids+=($!)
if faddr=$(announced "$work/fixture.log" "conformance fixture listening on http://" "${pids[-1]}") \
  && gateway http "{\"type\": \"http\", \"url\": \"http://$faddr/mcp\"}"; then
  measure http "$url"
else
  status=1
fi
exit "$status"
