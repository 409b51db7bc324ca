#!/usr/bin/env bash
# Regenerates the man pages in docs/man from the commands' own help (swift-argument-parser's
# generate-manual plugin), mentoryctl(1) and mentoryd(8), and the README's table of configuration keys
# (`mentoryd --print-config-reference`). mentoryd's help and the table are rendered from
# ConfigurationKey.all. Run it after changing a command, an option, a help text or a configuration key;
# tests check that every command, option and key is in the pages and the table.
#
# Usage: scripts/generate-manuals.sh [--check]
#   --check   regenerate into a temporary directory and fail if docs/man or the README's table differ
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
readme=README.md
if [ $check -eq 1 ]; then
  target=$(mktemp -d "${TMPDIR:-/tmp}/mentoryd-manuals.XXXXXX")
  trap 'rm -rf "$target"' EXIT
  readme=$target/README.md
fi
# An empty line in mdoc is an empty output line and a warning (man --warnings); a paragraph break is .Pp.
sed -e 's/^$/.Pp/' "$outputs/mentoryctl/mentoryctl.1" > "$target/mentoryctl.1"
# A daemon's page belongs in section 8.
sed -e 's/^\.Dt MENTORYD 1$/.Dt MENTORYD 8/' -e 's/^$/.Pp/' "$outputs/mentoryd/mentoryd.1" > "$target/mentoryd.8"
chmod 0644 "$target/mentoryctl.1" "$target/mentoryd.8"
# The README's table, between its BEGIN and END config-keys lines.
TABLE=$("$(swift build --show-bin-path)/mentoryd" --print-config-reference) awk '
  /^<!-- END config-keys/ { skip = 0 }
  !skip { print }
  /^<!-- BEGIN config-keys/ { print ENVIRON["TABLE"]; skip = 1 }
' README.md > "$target/README.md.new"
mv "$target/README.md.new" "$readme"
if [ $check -eq 1 ]; then
  status=0
  for page in mentoryctl.1 mentoryd.8; do
    if ! diff -u -I '^\.Dd ' "docs/man/$page" "$target/$page"; then
      echo "docs/man/$page is not what the commands' help generates; run scripts/generate-manuals.sh" >&2
      status=1
    fi
  done
  if ! diff -u README.md "$readme"; then
    echo "README.md's configuration table is not what ConfigurationKey.all renders; run scripts/generate-manuals.sh" >&2
    status=1
  fi
  [ $status -eq 0 ] && echo "docs/man and the README's configuration table are current"
  exit $status
fi
echo "regenerated docs/man/mentoryctl.1, docs/man/mentoryd.8 and the README's configuration table"
