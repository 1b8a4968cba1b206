#!/usr/bin/env bash
# Gate: the selector must decide every labelled case of evals/golden_tasks.jsonl exactly
# (server, tool, rule and alternatives) on the reference catalog. Expects target/debug/toolforge.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="${CARGO_TARGET_DIR:-$root/target}/debug/toolforge"
[ -x "$bin" ] || { echo "selection gate: $bin missing: cargo build -p toolforge" >&2; exit 1; }
"$bin" eval selection --catalog "$root/evals/catalogs/reference.json" \
  --cases "$root/evals/golden_tasks.jsonl" --min-accuracy 1.0
