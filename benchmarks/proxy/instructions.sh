#!/usr/bin/env bash
# CPU per call that load on the machine does not move: instructions (valgrind callgrind) that a
# gateway executes per `tools/call`, counted after a warm-up, over a fixed number of calls.
#   benchmarks/proxy/instructions.sh NAME [CALLS] [CONCURRENCY]
# NAME: toolforge or rust-mcp-proxy (which binary: one-gateway.sh). Defaults: 2000 calls, c = 8.
# Needs setup.sh run once (the node backend and mcpload) and valgrind. Prints instructions per call.
set -euo pipefail
name=$1 calls=${2:-2000} conc=${3:-8}
out=$(mktemp -d "${TMPDIR:-/tmp}/instructions.XXXXXX")
. "$(dirname "$0")/one-gateway.sh" "$name" "${BACKEND_PORT:-9150}" "${GATEWAY_PORT:-9250}" "$out"
start_backend
# valgrind follows the wrapper script's exec into the gateway binary.
valgrind --tool=callgrind --trace-children=yes --collect-atstart=yes \
  --callgrind-out-file="$out/callgrind.%p" "${gw[@]}" >"$out/gateway.log" 2>&1 &
pids+=($!)
"${load[@]}" --probe --probe-wait 120 >/dev/null
"${load[@]}" -c "$conc" --warmup 0 -d 600 --max-requests 200 >/dev/null   # warm-up
callgrind_control -z "${pids[1]}" >/dev/null
"${load[@]}" -c "$conc" --warmup 0 -d 600 --max-requests "$calls" --json-out "$out/load.jsonl"
callgrind_control -d "${pids[1]}" >/dev/null
sleep 1
# The dump (`.1`) holds the measured window only: the counters were zeroed after the warm-up.
profile=$(ls "$out"/callgrind.*.1 | head -n 1)
total=$(callgrind_annotate "$profile" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
echo "$name: $total instructions over $calls tools/call at c = $conc: $((total / calls)) per call"
echo "profile: $profile (callgrind_annotate it for the top costs)"
