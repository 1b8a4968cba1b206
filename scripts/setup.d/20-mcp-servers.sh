#!/usr/bin/env bash
# Real MCP servers nobody here wrote, for the integration tests: the reference servers from the
# npm registry (into $TOOLS_DIR/npm) and from PyPI plus the Python MCP SDK as a client (into the
# venv $TOOLS_DIR/venv); the TypeScript SDK (npm) and fastmcp (its own venv $TOOLS_DIR/fastmcp-venv,
# because it pins its own `mcp`) as clients and servers (tests/it/sdk_clients.rs).
# Pinned; idempotent: a second run only checks a stamp file.
set -euo pipefail
: "${TOOLS_DIR:?run through scripts/setup}"
NPM_PKGS=(
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/inspector-cli@1.0.3" # a client: the Inspector CLI (tests/it/inspector.rs)
  "@modelcontextprotocol/sdk@1.32.2"           # the TypeScript SDK client (tests/node/)
)
PY_PKGS=("mcp==2.3.0" "mcp-server-time==2026.10.19" "mcp-server-git==2026.10.19")
FASTMCP_PKGS=("fastmcp==4.1.6")

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

fastmcp_venv="$TOOLS_DIR/fastmcp-venv"
fastmcp_stamp="$fastmcp_venv/.installed"
want_fastmcp="${FASTMCP_PKGS[*]}"
if [ ! -f "$fastmcp_stamp" ] || [ "$(cat "$fastmcp_stamp")" != "$want_fastmcp" ]; then
  python3 -m venv "$fastmcp_venv"
  fpip=("$fastmcp_venv/bin/pip" install --quiet --disable-pip-version-check)
  # fastmcp-slim's server extra asks for certifi>=2026.10.19, newer than any certifi the index
  # offers; certifi is only a CA bundle (the tests talk to loopback), so the dependencies are
  # installed from fastmcp-slim's own metadata with that one floor left out.
  "${fpip[@]}" --no-deps "${FASTMCP_PKGS[@]}" "fastmcp-slim==${FASTMCP_PKGS[0]#fastmcp==}"
  mapfile -t fdeps < <("$fastmcp_venv/bin/python" - <<'PY'
from importlib.metadata import requires
from pip._vendor.packaging.requirements import Requirement
for line in requires("fastmcp-slim"):
    r = Requirement(line)
    if r.name == "certifi":
        continue
    if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in ("client", "server")):
        r.marker = None
        print(r)
PY
  )
  "${fpip[@]}" certifi "${fdeps[@]}"
  echo "$want_fastmcp" >"$fastmcp_stamp"
fi
"$fastmcp_venv/bin/python" -c "import fastmcp"
test -d "$TOOLS_DIR/npm/node_modules/@modelcontextprotocol/sdk"
