#!/usr/bin/env bash
# Retrieval gate: prints recall@1, recall@5, nDCG@10 and MRR of every ranker (BM25, hashing,
# the local all-MiniLM-L6-v2 model, and the default hybrid with the local model) on both
# development sets, and fails when the default ranking scores below recall@5 0.45 on
# livemcpbench or 0.78 on metatool. Needs the model from scripts/setup (30-embedding-model).
# Takes about 1.5 minutes in a debug build on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
model=.tools/models/all-MiniLM-L6-v2
[ -f "$model/model.safetensors" ] || { echo "retrieval gate: $model is missing: run scripts/setup" >&2; exit 1; }
cargo build --quiet -p toolforge
bin="${CARGO_TARGET_DIR:-target}/debug/toolforge"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
for spec in livemcpbench:0.45 metatool:0.78; do
  set_name=${spec%%:*} min=${spec#*:}
  echo "== retrieval: $set_name (default ranking must reach recall@5 >= $min)"
  report=$(EMBEDDER_BACKEND=local EMBED_MODEL_DIR="$model" "$bin" eval retrieval \
    --tools "evals/retrieval/$set_name/tools.jsonl" \
    --queries "evals/retrieval/$set_name/queries.jsonl" \
    --out "$out/$set_name.jsonl" --ranker bm25,hashing,local,hybrid)
  echo "$report"
  got=$(echo "$report" | sed -n 's/^ranker=hybrid(bm25+local) .*recall@5=\([0-9.]*\).*/\1/p')
  [ -n "$got" ] || { echo "retrieval gate: no hybrid(bm25+local) line for $set_name" >&2; exit 1; }
  if awk -v g="$got" -v m="$min" 'BEGIN { exit !(g + 0 < m + 0) }'; then
    echo "FAIL: $set_name hybrid recall@5 $got < $min" >&2
    status=1
  else
    echo "ok: $set_name hybrid recall@5 $got >= $min"
  fi
done
exit $status
