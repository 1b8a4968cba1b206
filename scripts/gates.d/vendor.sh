#!/usr/bin/env bash
# Gate: each vendored crate is its published .crate with its patch queue and nothing else
# (scripts/vendor-check), and its own test suite passes on the patched copy
# (scripts/vendor-test).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
scripts/vendor-check
scripts/vendor-test
