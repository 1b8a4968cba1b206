#!/usr/bin/env bash
# Gate: each vendored crate is its published .crate with its patch queue and nothing else
# (scripts/vendor-check). The copies' own test suites (scripts/vendor-test) join this gate
# once they have a green run on record.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
scripts/vendor-check
