#!/usr/bin/env bash
# Fails when the public API of a library product changed incompatibly since the baseline, and prints what broke.
#
# Compares every library product of Package.swift (read from `swift package dump-package`) with
# `swift package diagnose-api-breaking-changes`. Its `public` and `open` declarations count, and the digester
# reports removed `package` ones too; `internal` ones and modules that are no product may change freely. The
# baseline, first found wins:
#   1. $MENTORYD_API_BASELINE, any tree-ish (a tag, a branch, a commit)
#   2. the newest git tag matching v* (by version order)
#   3. the commit in .ci/api-baseline (one line: a full commit hash)
# With none of them the check fails: it never passes for want of something to compare with.
#
# A break that is intended is either listed in .ci/api-breakage-allowlist (one exact message a line, as this
# script prints it; lines starting with # are comments) or taken in by moving the baseline: a new v* tag, or a
# new commit in .ci/api-baseline. docs/TESTING.md, "API compatibility", says when to do which.
#
# The baseline is built in a temporary clone (a full debug build of its library targets, dependencies included),
# so a cold run takes several minutes; $MENTORYD_API_BASELINE_DIR keeps the baseline's API dumps between runs.
#
# Usage: scripts/check-api.sh
set -euo pipefail
cd "$(dirname "$0")/.."

baseline=${MENTORYD_API_BASELINE:-}
source="MENTORYD_API_BASELINE"
if [ -z "$baseline" ]; then
  baseline=$(git tag --list 'v*' --sort=-version:refname | head -n 1)
  source="newest v* tag"
fi
if [ -z "$baseline" ] && [ -s .ci/api-baseline ]; then
  baseline=$(grep -v '^#' .ci/api-baseline | head -n 1 | tr -d '[:space:]')
  source=".ci/api-baseline"
fi
if [ -z "$baseline" ]; then
  echo "check-api: no baseline: set MENTORYD_API_BASELINE, tag a release v*, or put a commit in .ci/api-baseline" >&2
  exit 1
fi
if ! git rev-parse --verify --quiet "$baseline^{commit}" >/dev/null; then
  echo "check-api: the baseline '$baseline' (from $source) is not a commit of this clone" \
    "(a shallow clone? fetch it, or set MENTORYD_API_BASELINE)" >&2
  exit 1
fi

mapfile -t products < <(swift package dump-package | python3 -c '
import json, sys
for product in json.load(sys.stdin)["products"]:
    if "library" in product["type"]:
        print(product["name"])
')
if [ ${#products[@]} -eq 0 ]; then
  echo "check-api: Package.swift has no library product to compare" >&2
  exit 1
fi

arguments=("$baseline" --products "${products[@]}")
allowlist=$(mktemp "${TMPDIR:-/tmp}/mentoryd-api-allowlist.XXXXXX")
log=$(mktemp "${TMPDIR:-/tmp}/mentoryd-api-check.XXXXXX")
trap 'rm -f "$allowlist" "$log"' EXIT
if [ -f .ci/api-breakage-allowlist ]; then
  grep -v -e '^#' -e '^[[:space:]]*$' .ci/api-breakage-allowlist >"$allowlist" || true
  [ -s "$allowlist" ] && arguments+=(--breakage-allowlist-path "$allowlist")
fi
if [ -n "${MENTORYD_API_BASELINE_DIR:-}" ]; then
  mkdir -p "$MENTORYD_API_BASELINE_DIR"
  arguments+=(--baseline-dir "$MENTORYD_API_BASELINE_DIR")
fi

echo "check-api: comparing ${products[*]} with $baseline ($source, $(git rev-parse --short "$baseline^{commit}"))"
started=$SECONDS
status=0
swift package diagnose-api-breaking-changes "${arguments[@]}" 2>&1 | tee "$log" || status=$?
echo "check-api: took $((SECONDS - started)) s"
if [ $status -ne 0 ]; then
  echo
  echo "check-api: the public API broke since $baseline ($source):"
  grep -E 'API breakage|error:' "$log" || echo "  (no breakage line; see the output above)"
  echo "check-api: if the break is intended, see docs/TESTING.md, \"API compatibility\"."
  exit "$status"
fi
