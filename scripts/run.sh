#!/usr/bin/env bash
# Builds mentoryd and mentoryctl, then runs mentoryd with its embedded defaults; extra arguments go
# to mentoryd. mentoryctl is left beside it, in the directory `swift build --show-bin-path` prints.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --product mentoryctl
swift build --product mentoryd
bin=$(swift build --show-bin-path)
echo "mentoryctl is ready: export PATH=\"$bin:\$PATH\"" >&2
exec "$bin/mentoryd" "$@"
