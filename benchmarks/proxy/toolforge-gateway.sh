#!/usr/bin/env bash
# Starts toolforge's gateway for the harness: `toolforge-gateway.sh PORT BACKEND_URL [TOOLFORGE]`
# serves /mcp on 127.0.0.1:PORT with one Streamable HTTP upstream, the harness's backend.
set -euo pipefail
port=$1 backend=$2
here=$(cd "$(dirname "$0")" && pwd)
bin=${3:-${TOOLFORGE_BIN:-$here/../../target/release/toolforge}}
cfg=$(mktemp "${TMPDIR:-/tmp}/toolforge-bench.XXXXXX.json")
printf '{"mcpServers": {"backend": {"url": "%s"}}}\n' "$backend" >"$cfg"
RUST_LOG=${RUST_LOG:-warn} exec "$bin" serve --config "$cfg" --host 127.0.0.1 --port "$port"
