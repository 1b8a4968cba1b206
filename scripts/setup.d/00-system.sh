#!/usr/bin/env bash
# System packages (Debian: Redis, Python, Node, git, Chromium, make) and cargo-nextest.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-venv)
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
command -v git >/dev/null 2>&1 || need+=(git)
# jemalloc, the binary's allocator, is built from source with its configure script and make
command -v make >/dev/null 2>&1 || need+=(make)
# headless, for the web console's browser tests (crates/toolforge/tests/it/console.rs)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi
