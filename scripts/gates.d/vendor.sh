#!/usr/bin/env bash
# Gate: each vendored crate is its published .crate with its patch queue and nothing else
# (scripts/vendor-check), and its own test suite (the published tests and the ones its patches
# add) passes on the patched copy (scripts/vendor-test; rmcp: 1,835 tests, reqwest: 48, about 5.5 minutes cold
# on 2 cores, most of it building them).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
scripts/vendor-check
scripts/vendor-test
