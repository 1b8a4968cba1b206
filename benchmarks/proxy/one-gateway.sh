# Sourced by pairs.sh, instructions.sh and syscalls.sh: one gateway in front of the node
# backend, and mcpload driving `tools/call` of `b_echo` through it.
#   . one-gateway.sh NAME BACKEND_PORT GATEWAY_PORT OUT_DIR
# NAME: toolforge ($TOOLFORGE_BIN, else target/release/toolforge) or rust-mcp-proxy
# ($RUST_MCP_PROXY_BIN, else $BENCH_WORK/rust-mcp-proxy/bin/mcp-proxy). Sets `work`, `gw` (the
# command that starts the gateway), `url` (its MCP endpoint), `load` (mcpload's command) and
# `pids`; starts the backend (`start_backend`) and stops everything on exit.
# The backend and the gateway each run in a session of their own (`setsid`), as bench.py starts
# them: where the kernel schedules by session (autogroup), CPU is shared between sessions first,
# then between the threads of one. In one shared session the peer's two worker threads competed
# with the backend's thread for thread, and it measured 0.72x the throughput it has with the
# sessions separate (benchmarks/proxy/README.md, 2026-11-28 late).
# BACKEND_CPU=N (optional) runs the backend on CPU N alone and the gateway and the load
# generator on the other CPUs (`taskset`), as if the backend had a machine of its own: on 2 cores
# the scheduler otherwise puts wake-ups of the load generator on the backend's CPU, preempting it,
# more often behind some gateways than others (README, 2026-11-29, last).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${BENCH_WORK:-${TMPDIR:-/tmp}/mcp-proxy-bench}
_name=$1 _bport=$2 _port=$3 _out=$4
_backend_url="http://127.0.0.1:$_bport/mcp"
_pin_backend=() _pin_rest=()
if [ -n "${BACKEND_CPU:-}" ]; then
  _rest=$(python3 -c "import os,sys; print(','.join(str(c) for c in sorted(os.sched_getaffinity(0)) if c != int(sys.argv[1])))" "$BACKEND_CPU")
  [ -n "$_rest" ] || { echo "BACKEND_CPU=$BACKEND_CPU leaves no CPU for the gateway" >&2; exit 2; }
  _pin_backend=(taskset -c "$BACKEND_CPU") _pin_rest=(taskset -c "$_rest")
fi
case $_name in
  toolforge)
    gw=("${_pin_rest[@]}" setsid "$here/toolforge-gateway.sh" "$_port" "$_backend_url")
    url="http://127.0.0.1:$_port/mcp" ;;
  rust-mcp-proxy)
    _peer=${RUST_MCP_PROXY_BIN:-$work/rust-mcp-proxy/bin/mcp-proxy}
    gw=("${_pin_rest[@]}" setsid "$here/proxies/rust_mcp_proxy.sh" "$_peer" "$_port" "$_backend_url")
    url="http://127.0.0.1:$_port/" ;;
  *) echo "NAME is toolforge or rust-mcp-proxy" >&2; exit 2 ;;
esac
load=("${_pin_rest[@]}" "$work/target/release/mcpload" --url "$url" --op tools/call --tool b_echo -q)
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

# Starts the node backend and waits until it listens (60 s at most): the peer gives up on a
# backend that is not listening yet.
start_backend() {
  (cd "$work/node" && exec "${_pin_backend[@]}" setsid node backend_node.mjs --transport http --port "$_bport") \
    >"$_out/backend.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$_bport") 2>/dev/null && return
    sleep 0.1
  done
}
