#!/usr/bin/env bash
# Regenerates the man pages in docs/man from the commands' own help (swift-argument-parser's
# generate-manual plugin), mentoryctl(1) and mentoryd(8), and the table of configuration keys in
# docs/CONFIGURATION.md (`mentoryd --print-config-reference`). mentoryd's help and the table are
# rendered from ConfigurationKey.all. Run it after changing a command, an option, a help text or a
# configuration key; tests check that every command, option and key is in the pages and the table.
#
# Usage: scripts/generate-manuals.sh [--check]
#   --check   regenerate into a temporary directory and fail if docs/man or docs/CONFIGURATION.md's table differ
#             (but for the pages' date)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[ "${1:-}" = "--check" ] && check=1

swift package --allow-writing-to-package-directory generate-manual --configuration debug \
  --authors "the mentoryd developers" >/dev/null
swift build --product mentoryd >/dev/null
outputs=.build/plugins/GenerateManual/outputs
target=docs/man
# The configuration reference holds the key table between its BEGIN and END config-keys lines.
reference=docs/CONFIGURATION.md
reference_out=$reference
# Without exactly one of each marker the table would silently not be written (or checked).
for marker in '<!-- BEGIN config-keys' '<!-- END config-keys'; do
  if [ "$(grep -c -- "^$marker" "$reference")" -ne 1 ]; then
    echo "generate-manuals: $reference must hold exactly one line starting with '$marker'" >&2
    exit 1
  fi
done
if [ $check -eq 1 ]; then
  target=$(mktemp -d "${TMPDIR:-/tmp}/mentoryd-manuals.XXXXXX")
  trap 'rm -rf "$target"' EXIT
  reference_out=$target/CONFIGURATION.md
fi
# An empty line in mdoc is an empty output line and a warning (man --warnings); a paragraph break is .Pp.
sed -e 's/^$/.Pp/' "$outputs/mentoryctl/mentoryctl.1" > "$target/mentoryctl.1"
# A daemon's page belongs in section 8.
sed -e 's/^\.Dt MENTORYD 1$/.Dt MENTORYD 8/' -e 's/^$/.Pp/' "$outputs/mentoryd/mentoryd.1" > "$target/mentoryd.8"
chmod 0644 "$target/mentoryctl.1" "$target/mentoryd.8"
# The key table, between the BEGIN and END config-keys lines.
TABLE=$("$(swift build --show-bin-path)/mentoryd" --print-config-reference) awk '
  /^<!-- END config-keys/ { skip = 0 }
  !skip { print }
  /^<!-- BEGIN config-keys/ { print ENVIRON["TABLE"]; skip = 1 }
' "$reference" > "$target/CONFIGURATION.md.new"
mv "$target/CONFIGURATION.md.new" "$reference_out"
if [ $check -eq 1 ]; then
  status=0
  for page in mentoryctl.1 mentoryd.8; do
    if ! diff -u -I '^\.Dd ' "docs/man/$page" "$target/$page"; then
      echo "docs/man/$page is not what the commands' help generates; run scripts/generate-manuals.sh" >&2
      status=1
    fi
  done
  if ! diff -u "$reference" "$reference_out"; then
    echo "$reference's configuration table is not what ConfigurationKey.all renders; run scripts/generate-manuals.sh" >&2
    status=1
  fi
  [ $status -eq 0 ] && echo "docs/man and $reference's configuration table are current"
  exit $status
fi
echo "regenerated docs/man/mentoryctl.1, docs/man/mentoryd.8 and $reference's configuration table"
