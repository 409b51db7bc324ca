#!/usr/bin/env bash
# Builds and runs mentoryd with its embedded defaults; extra arguments go to mentoryd.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
exec swift run mentoryd "$@"
