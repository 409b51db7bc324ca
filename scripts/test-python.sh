#!/usr/bin/env bash
# Tests the Python client (clients/python) against a real mentoryd, as CI runs it.
#
# Usage: scripts/test-python.sh [--bin-dir DIR] [pytest arguments...]
#   --bin-dir DIR   the folder holding the mentoryd binary (default: $MENTORYD_BIN_DIR,
#                   else `swift build --show-bin-path`, which must have been built)
# Environment: PYTHON (default python3, at least 3.9) creates the virtual environment.
#
# The virtual environment and every test file live in a temporary folder removed at the end;
# pip needs PyPI for protobuf and pytest. A run that collects no test fails. protoc must be on
# PATH (scripts/install-deps.sh): tests/test_plugins_doc.py runs docs/PLUGINS.md's Python plugin
# walk-through as written (protoc, the plugin, and a caller without generated code).
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=${MENTORYD_BIN_DIR:-}
pytest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir=${2:?--bin-dir needs a folder}; shift 2 ;;
    --bin-dir=*) bin_dir=${1#--bin-dir=}; shift ;;
    *) pytest_args+=("$1"); shift ;;
  esac
done
if [ -z "$bin_dir" ]; then
  bin_dir=$(swift build --show-bin-path)
fi
bin_dir=$(cd "$bin_dir" && pwd)
if [ ! -x "$bin_dir/mentoryd" ]; then
  echo "test-python: no mentoryd in $bin_dir; run 'swift build' or pass --bin-dir" >&2
  exit 1
fi

python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/mentory-python.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check ./clients/python pytest

status=0
MENTORYD_BIN_DIR="$bin_dir" PYTHONDONTWRITEBYTECODE=1 \
  "$work/venv/bin/python" -m pytest clients/python/tests \
  -p no:cacheprovider --basetemp="$work/tmp" "${pytest_args[@]+"${pytest_args[@]}"}" || status=$?
if [ "$status" -eq 5 ]; then
  echo "test-python: pytest collected no tests; failing" >&2
  exit 1
fi
exit "$status"
