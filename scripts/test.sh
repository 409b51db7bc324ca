#!/usr/bin/env bash
# The whole test suite: unit and end-to-end tests, then the real-systemd harness when it can run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
swift test --skip-build
if [ -x scripts/systemd-test.sh ]; then
  if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    scripts/systemd-test.sh
  else
    echo "systemd harness skipped: it needs root to boot systemd in a PID namespace"
  fi
fi
