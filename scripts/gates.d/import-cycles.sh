#!/usr/bin/env bash
# Gate: no file-level import cycle in any crate (scripts/import-cycles says what one is), after
# the script has found the cycles of its own small examples.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$root/scripts/import-cycles" --self-test
python3 "$root/scripts/import-cycles"
