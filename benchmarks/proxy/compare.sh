#!/usr/bin/env bash
# The side-by-side table in one command: the backend alone, toolforge's gateway, joshrotenberg's
# mcp-proxy (Rust) and, when $AGENTGATEWAY_BIN is set, agentgateway (Rust) in front of it,
# `tools/call` of `b_echo` at c = 1, 8, 32.
#   benchmarks/proxy/compare.sh [extra bench.py run options, e.g. -d 5 --repeats 1]
# Repeats measure the systems in rotated order (bench.py `rotated`), so with 3 each system takes
# every slot once and the median is free of the order.
# Needs setup.sh run once. Binary: $TOOLFORGE_BIN, else target/release/toolforge (build it with
# `cargo build --release -p toolforge`). Table: $BENCH_WORK/results/<stamp>/summary.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${BENCH_WORK:-${TMPDIR:-/tmp}/mcp-proxy-bench}
peer=${RUST_MCP_PROXY_BIN:-$work/rust-mcp-proxy/bin/mcp-proxy}
[ -x "$peer" ] || { echo "no mcp-proxy at $peer: run $here/setup.sh first" >&2; exit 2; }
peers=(--gateway "rust-mcp-proxy=$here/proxies/rust_mcp_proxy.sh $peer {port} {backend_url}"
  --gateway-url 'rust-mcp-proxy=http://127.0.0.1:{port}/')
# agentgateway joins when built (AGENTGATEWAY.md): $AGENTGATEWAY_BIN names its binary.
if [ -n "${AGENTGATEWAY_BIN:-}" ]; then
  [ -x "$AGENTGATEWAY_BIN" ] || { echo "AGENTGATEWAY_BIN=$AGENTGATEWAY_BIN is not executable" >&2; exit 2; }
  peers+=(--gateway "agentgateway=$here/proxies/agentgateway.sh $AGENTGATEWAY_BIN {port} {backend_url}")
fi
exec python3 "$here/bench.py" run --systems backend -c 1,8,32 --ops tools/call --tool b_echo \
  -d 10 --repeats 3 --gateway-needs-backend \
  --gateway "toolforge=$here/toolforge-gateway.sh {port} {backend_url}" \
  "${peers[@]}" "$@"
