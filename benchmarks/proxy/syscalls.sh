#!/usr/bin/env bash
# System calls per `tools/call` that a gateway makes, counted with `strace -c -f` (all of its
# threads) over a fixed number of calls after a warm-up, in front of the node backend.
#   benchmarks/proxy/syscalls.sh NAME [CALLS] [CONCURRENCY]
# NAME: toolforge ($TOOLFORGE_BIN, else target/release/toolforge) or rust-mcp-proxy
# ($RUST_MCP_PROXY_BIN, else $BENCH_WORK/rust-mcp-proxy/bin/mcp-proxy). Defaults: 2000 calls,
# c = 1. Needs setup.sh run once and strace. Prints the calls per `tools/call`, then strace's
# table. Counts, not times: strace slows every call, so its seconds say nothing about speed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${BENCH_WORK:-${TMPDIR:-/tmp}/mcp-proxy-bench}
name=$1 calls=${2:-2000} conc=${3:-1}
bport=${BACKEND_PORT:-9152} port=${GATEWAY_PORT:-9252}
out=$(mktemp -d "${TMPDIR:-/tmp}/syscalls.XXXXXX")
backend_url="http://127.0.0.1:$bport/mcp"
case $name in
  toolforge)
    gw=("$here/toolforge-gateway.sh" "$port" "$backend_url")
    url="http://127.0.0.1:$port/mcp" ;;
  rust-mcp-proxy)
    peer=${RUST_MCP_PROXY_BIN:-$work/rust-mcp-proxy/bin/mcp-proxy}
    gw=("$here/proxies/rust_mcp_proxy.sh" "$peer" "$port" "$backend_url")
    url="http://127.0.0.1:$port/" ;;
  *) echo "NAME is toolforge or rust-mcp-proxy" >&2; exit 2 ;;
esac
command -v strace >/dev/null || { echo "strace is not installed" >&2; exit 2; }
pids=()
# Stop the gateway and the backend and wait for them (toolforge drains first), so that a
# second run finds the ports free.
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT
(cd "$work/node" && exec node backend_node.mjs --transport http --port "$bport") >"$out/backend.log" 2>&1 &
pids+=($!)
# The peer gives up on a backend that is not listening yet: wait for the port (60 s at most).
for _ in $(seq 600); do
  (exec 3<>"/dev/tcp/127.0.0.1/$bport") 2>/dev/null && break
  sleep 0.1
done
# Both wrapper scripts exec the gateway, so this pid is the gateway's.
"${gw[@]}" >"$out/gateway.log" 2>&1 &
pids+=($!)
load=("$work/target/release/mcpload" --url "$url" --op tools/call --tool b_echo -q)
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
