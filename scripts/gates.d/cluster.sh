#!/usr/bin/env bash
# Gate: scripts/cluster-test (Redis, three replicas, HAProxy on loopback, one replica stopped
# and restarted under load): no failed 2026-07-28 or /chat request, no call run twice.
# Expects target/debug/toolforge.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
exec python3 "$root/scripts/cluster-test" --duration 24
