#!/usr/bin/env bash
# Gate: the invariants ARCHITECTURE.md states hold (scripts/check-architecture, from `cargo
# metadata`, Cargo.toml and the sources). The checker must also reject broken copies (axum made a
# dependency of the pure toolforge-select; one codegen unit forced on release), so a checker that
# checks nothing cannot pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cargo metadata --format-version 1 --locked >"$tmp/metadata.json"
scripts/check-architecture --metadata "$tmp/metadata.json"

python3 - "$tmp/metadata.json" "$tmp/broken.json" <<'PY'
import json, sys
meta = json.load(open(sys.argv[1]))
select = next(p for p in meta["packages"] if p["name"] == "toolforge-select" and p["id"] in meta["workspace_members"])
select["dependencies"].append({"name": "axum", "kind": None, "req": "^0.8", "optional": False,
                               "uses_default_features": True, "features": [], "target": None,
                               "rename": None, "registry": None, "source": None})
json.dump(meta, open(sys.argv[2], "w"))
PY
if scripts/check-architecture --metadata "$tmp/broken.json" >"$tmp/broken.out" 2>&1; then
  echo "architecture gate: the checker accepted axum in toolforge-select" >&2; exit 1
fi
grep -q "toolforge-select has axum as a dependency" "$tmp/broken.out" || {
  echo "architecture gate: the checker failed the broken copy for another reason:" >&2
  cat "$tmp/broken.out" >&2; exit 1
}
# And a release profile that forces one codegen unit.
sed 's/^\[profile.release\]$/[profile.release]\ncodegen-units = 1/' Cargo.toml >"$tmp/Cargo.toml"
if scripts/check-architecture --metadata "$tmp/metadata.json" --cargo-toml "$tmp/Cargo.toml" \
  >"$tmp/profile.out" 2>&1; then
  echo "architecture gate: the checker accepted codegen-units = 1 on release" >&2; exit 1
fi
grep -q "\[profile.release\] sets codegen-units" "$tmp/profile.out" || {
  echo "architecture gate: the checker failed the broken manifest for another reason:" >&2
  cat "$tmp/profile.out" >&2; exit 1
}
echo "architecture: every invariant holds; broken copies are rejected"
