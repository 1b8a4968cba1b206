#!/usr/bin/env bash
# Gate: the selector must decide every labelled case of evals/golden_tasks.jsonl exactly
# (server, tool, rule and alternatives) on the reference catalog; and seed 004's three broker
# examples (basic, yaml-rules, enrichment) must build and run (each asserts what the seed's
# example shows). Expects target/debug/toolforge.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin="${CARGO_TARGET_DIR:-$root/target}/debug/toolforge"
[ -x "$bin" ] || { echo "selection gate: $bin missing: cargo build -p toolforge" >&2; exit 1; }
"$bin" eval selection --catalog "$root/evals/catalogs/reference.json" \
  --cases "$root/evals/golden_tasks.jsonl" --min-accuracy 1.0
for example in basic yaml-rules enrichment; do
  echo "== broker example: $example"
  cargo run --quiet --locked -p toolforge-select --example "$example"
done
