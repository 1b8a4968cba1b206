#!/usr/bin/env bash
# Runs both agent benchmarks from the repository root: A (tokens per task, a cargo bench) and
# B (/chat throughput with the mock model). Extra arguments go to chat_load.py, e.g.
#   benchmarks/agent/run.sh --duration 5
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "== A. tokens per task (cargo bench -p toolforge-agent --bench tokens)"
cargo bench -p toolforge-agent --bench tokens

echo
echo "== B. /chat throughput, mock model, concurrency 8"
if [[ -z "${TOOLFORGE_BIN:-}" && ! -x target/release/toolforge && ! -x target/debug/toolforge ]]; then
    cargo build -p toolforge
fi
python3 benchmarks/agent/chat_load.py "$@"
