#!/usr/bin/env bash
# CPU per call that load on the machine does not move: instructions (valgrind callgrind) that a
# gateway executes per `tools/call`, counted after a warm-up, over a fixed number of calls.
#   benchmarks/proxy/instructions.sh NAME [CALLS] [CONCURRENCY]
# NAME: toolforge ($TOOLFORGE_BIN, else target/release/toolforge) or rust-mcp-proxy
# ($RUST_MCP_PROXY_BIN, else $BENCH_WORK/rust-mcp-proxy/bin/mcp-proxy). Defaults: 2000 calls, c = 8.
# Needs setup.sh run once (the node backend and mcpload) and valgrind. Prints instructions per call.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${BENCH_WORK:-${TMPDIR:-/tmp}/mcp-proxy-bench}
name=$1 calls=${2:-2000} conc=${3:-8}
bport=${BACKEND_PORT:-9150} port=${GATEWAY_PORT:-9250}
out=$(mktemp -d "${TMPDIR:-/tmp}/instructions.XXXXXX")
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
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
(cd "$work/node" && exec node backend_node.mjs --transport http --port "$bport") >"$out/backend.log" 2>&1 &
pids+=($!)
# valgrind follows the wrapper script's exec into the gateway binary.
valgrind --tool=callgrind --trace-children=yes --collect-atstart=yes \
  --callgrind-out-file="$out/callgrind.%p" "${gw[@]}" >"$out/gateway.log" 2>&1 &
pids+=($!)
load=("$work/target/release/mcpload" --url "$url" --op tools/call --tool b_echo -q)
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
