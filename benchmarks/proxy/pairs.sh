#!/usr/bin/env bash
# toolforge against the peer in alternating pairs, for a machine too noisy for compare.sh's
# timed runs: each run starts a fresh backend and gateway, makes WARMUP calls, then CALLS calls,
# and reads the gateway's and the backend's CPU time from /proc before and after them.
#   benchmarks/proxy/pairs.sh [CONCURRENCY] [CALLS] [PAIRS]      (defaults: 32, 20000, 6)
# Order: toolforge, peer, peer, toolforge, ... so that neither always runs first. Prints one line
# per run and, per pair, toolforge's throughput over the peer's, then their median. Each run's
# line ends with how often per call the backend's main thread was preempted (involuntary context
# switches): on 2 cores the backend, the gateway and the load generator share the CPUs, and where
# the scheduler puts the load generator's wake-ups moves the backend's CPU per call. Then the
# gateway's RssAnon (anonymous resident memory, MiB) after the calls.
# Binaries as in one-gateway.sh ($TOOLFORGE_BIN, $RUST_MCP_PROXY_BIN). Needs setup.sh run once.
set -euo pipefail
conc=${1:-32} calls=${2:-20000} pairs=${3:-6} warmup=${WARMUP:-2000}
here=$(cd "$(dirname "$0")" && pwd)

# One run of gateway NAME; prints "NAME calls/s gateway-ms backend-ms".
run() (
  out=$(mktemp -d "${TMPDIR:-/tmp}/pairs.XXXXXX")
  . "$here/one-gateway.sh" "$1" "${BACKEND_PORT:-9150}" "${GATEWAY_PORT:-9250}" "$out"
  start_backend
  "${gw[@]}" >"$out/gateway.log" 2>&1 &
  pids+=($!)
  "${load[@]}" --probe --probe-wait 120 >/dev/null
  "${load[@]}" -c "$conc" --warmup 0 -d 600 --max-requests "$warmup" >/dev/null
  # The gateway is the last process started whose command line names it; the backend likewise.
  gateway=$(pgrep -n -f "serve --config|bin/mcp-proxy")
  backend=$(pgrep -n -f "backend_node.mjs")
  ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  preempted() { awk '/^nonvoluntary_ctxt_switches/ {print $2}' "/proc/$1/status"; }
  g0=$(ticks "$gateway") b0=$(ticks "$backend") p0=$(preempted "$backend") t0=$(date +%s.%N)
  "${load[@]}" -c "$conc" --warmup 0 -d 600 --max-requests "$calls" >"$out/load.json"
  t1=$(date +%s.%N) g1=$(ticks "$gateway") b1=$(ticks "$backend") p1=$(preempted "$backend")
  anon=$(awk '/^RssAnon/ {print $2}' "/proc/$gateway/status")
  hz=$(getconf CLK_TCK)
  python3 -c "
n, hz = $calls, $hz
print('$1', round(n / ($t1 - $t0)), round(($g1 - $g0) * 1000 / hz / n, 3), round(($b1 - $b0) * 1000 / hz / n, 3), round(($p1 - $p0) / n, 3), round($anon / 1024, 1))"
)

results=$(mktemp "${TMPDIR:-/tmp}/pairs.XXXXXX")
for i in $(seq "$pairs"); do
  if ((i % 2)); then order=(toolforge rust-mcp-proxy); else order=(rust-mcp-proxy toolforge); fi
  for name in "${order[@]}"; do
    line=$(run "$name")
    echo "pair $i c=$conc: $line (calls/s, gateway and backend CPU ms per call, backend preempted per call, gateway RssAnon MiB)"
    echo "$i $line" >>"$results"
  done
done
python3 - "$results" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    pair, name, rps = line.split()[:3]
    runs.setdefault(pair, {})[name] = float(rps)
ratios = [r["toolforge"] / r["rust-mcp-proxy"] for r in runs.values()]
print("toolforge / peer, each pair:", ", ".join(f"{x:.2f}" for x in ratios))
print(f"median {statistics.median(ratios):.2f}")
EOF
