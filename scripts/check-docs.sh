#!/usr/bin/env bash
# Builds the DocC documentation of every library product's modules and fails on any warning: a
# ``symbol link`` that does not resolve, an ambiguous one, a parameter documented that does not exist.
#
# The modules are the library products' targets as Package.swift declares them (swift package
# dump-package); their symbol graphs come from the debug build (swift package dump-symbol-graph), and
# docc converts each module on its own, so a link into another module is written as code (`Other.name`).
#
# Usage: scripts/check-docs.sh [--output DIR]   (DIR keeps the .doccarchive folders; default: a temporary one)
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/mentory-docs.XXXXXX")
trap 'rm -rf "$work"' EXIT
output=$work/archives
[ "${1:-}" = "--output" ] && output=$2
mkdir -p "$output"

modules=$(swift package dump-package | python3 -c '
import json, sys
package = json.load(sys.stdin)
names = sorted({t for p in package["products"] if "library" in p["type"] for t in p["targets"]})
print("\n".join(names))')

graphs=$(swift package dump-symbol-graph --minimum-access-level public 2>&1 | sed -n 's/^Files written to //p')
[ -d "$graphs" ] || { echo "check-docs: swift package dump-symbol-graph wrote no symbol graphs" >&2; exit 1; }

failed=0
for module in $modules; do
  input=$work/graphs/$module
  mkdir -p "$input"
  cp "$graphs/$module.symbols.json" "$input/"
  cp "$graphs/$module"@*.symbols.json "$input/" 2>/dev/null || true
  if docc convert --warnings-as-errors --additional-symbol-graph-dir "$input" \
    --fallback-display-name "$module" --fallback-bundle-identifier "org.mentory.$module" \
    --output-path "$output/$module.doccarchive" >"$work/$module.log" 2>&1; then
    echo "check-docs: $module: no warnings"
  else
    cat "$work/$module.log" >&2
    echo "check-docs: $module: the documentation has warnings (above)" >&2
    failed=1
  fi
done
exit $failed
