#!/usr/bin/env bash
# agentgateway (agentgateway/agentgateway, Rust) in front of one Streamable HTTP backend, in its
# default standalone configuration: one gateway on PORT and the simple `mcp:` section with one
# target named "b". With a single target agentgateway shows the backend's tools unprefixed
# (prefixMode defaults to conditional), so the backend's echo is `echo` (and `b_echo` is the
# backend's own alias). Serves MCP (Streamable HTTP) at /mcp (and legacy SSE at /sse).
# Listens on all interfaces; admin, stats and readiness listeners stay at their defaults
# (localhost:15000, :15020, :15021), so one instance at a time. Stateful (mcp-session-id).
# Build notes: ../AGENTGATEWAY.md.
#   agentgateway.sh AGENTGATEWAY_BIN PORT BACKEND_URL
set -euo pipefail
bin=$1 port=$2 url=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/agentgateway.XXXXXX")
cat >"$dir/config.yaml" <<YAML
gateways:
  default:
    port: $port
mcp:
  targets:
  - name: b
    mcp:
      host: $url
YAML
exec "$bin" -f "$dir/config.yaml"
