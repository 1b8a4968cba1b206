#!/usr/bin/env bash
# Real MCP servers nobody here wrote, for the integration tests: the reference servers from the
# npm registry (into $TOOLS_DIR/npm) and from PyPI plus the Python MCP SDK as a client (into the
# venv $TOOLS_DIR/venv). Pinned; idempotent: a second run only checks a stamp file.
set -euo pipefail
: "${TOOLS_DIR:?run through scripts/setup}"
NPM_PKGS=(
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/inspector-cli@1.0.3" # a client: the Inspector CLI (tests/it/inspector.rs)
)
PY_PKGS=("mcp==2.3.0" "mcp-server-time==2026.10.19" "mcp-server-git==2026.10.19")

npm_stamp="$TOOLS_DIR/npm/.installed"
want_npm="${NPM_PKGS[*]}"
if [ ! -f "$npm_stamp" ] || [ "$(cat "$npm_stamp")" != "$want_npm" ]; then
  mkdir -p "$TOOLS_DIR/npm"
  npm install --silent --no-fund --no-audit --prefix "$TOOLS_DIR/npm" "${NPM_PKGS[@]}"
  echo "$want_npm" >"$npm_stamp"
fi

venv="$TOOLS_DIR/venv"
py_stamp="$venv/.installed"
want_py="${PY_PKGS[*]}"
if [ ! -f "$py_stamp" ] || [ "$(cat "$py_stamp")" != "$want_py" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${PY_PKGS[@]}"
  echo "$want_py" >"$py_stamp"
fi
"$venv/bin/python" -c "import mcp" 
test -x "$venv/bin/mcp-server-time"
test -x "$venv/bin/mcp-server-git"
