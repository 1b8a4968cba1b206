#!/usr/bin/env bash
# System calls per `tools/call` that a gateway makes, counted with `strace -c -f` (all of its
# threads) over a fixed number of calls after a warm-up, in front of the node backend.
#   benchmarks/proxy/syscalls.sh NAME [CALLS] [CONCURRENCY]
# NAME: toolforge or rust-mcp-proxy (which binary: one-gateway.sh). Defaults: 2000 calls,
# c = 1. Needs setup.sh run once and strace. Prints the calls per `tools/call`, then strace's
# table. Counts, not times: strace slows every call, so its seconds say nothing about speed.
set -euo pipefail
name=$1 calls=${2:-2000} conc=${3:-1}
command -v strace >/dev/null || { echo "strace is not installed" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/syscalls.XXXXXX")
. "$(dirname "$0")/one-gateway.sh" "$name" "${BACKEND_PORT:-9152}" "${GATEWAY_PORT:-9252}" "$out"
start_backend
# Both wrapper scripts exec the gateway, so this pid is the gateway's.
"${gw[@]}" >"$out/gateway.log" 2>&1 &
pids+=($!)
"${load[@]}" --probe --probe-wait 120 >/dev/null
"${load[@]}" -c "$conc" --warmup 0 -d 600 --max-requests 300 >/dev/null   # warm-up
strace -qq -c -f -p "${pids[1]}" -o "$out/strace.txt" &
tracer=$!
# Start counting once strace holds the gateway (a non-zero TracerPid), 5 s at most.
for _ in $(seq 100); do
  grep -Eq '^TracerPid:[[:space:]]*[1-9]' "/proc/${pids[1]}/status" && break
  sleep 0.05
done
"${load[@]}" -c "$conc" --warmup 0 -d 600 --max-requests "$calls" --json-out "$out/load.jsonl" >/dev/null
kill -INT "$tracer"
wait "$tracer" 2>/dev/null || true
done_calls=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["ok"])' "$out/load.jsonl")
total=$(awk '$NF == "total" {print $4}' "$out/strace.txt")
echo "$name: $total system calls over $done_calls tools/call at c = $conc: $(python3 -c "print(round($total / $done_calls, 2))") per call"
cat "$out/strace.txt"
