#!/usr/bin/env bash
# Regenerates the man pages in docs/man from the commands' own help (swift-argument-parser's
# generate-manual plugin): mentoryctl(1) and mentoryd(8). Run it after changing a command, an
# option or a help text; a test checks that every command and option is in the pages.
set -euo pipefail
cd "$(dirname "$0")/.."
swift package --allow-writing-to-package-directory generate-manual --authors "the mentoryd developers"
outputs=.build/plugins/GenerateManual/outputs
install -m 0644 "$outputs/mentoryctl/mentoryctl.1" docs/man/mentoryctl.1
# A daemon's page belongs in section 8.
sed -e 's/^\.Dt MENTORYD 1$/.Dt MENTORYD 8/' "$outputs/mentoryd/mentoryd.1" > docs/man/mentoryd.8
echo "regenerated docs/man/mentoryctl.1 and docs/man/mentoryd.8"
