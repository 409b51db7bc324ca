#!/usr/bin/env bash
# Checks that mentoryd's version is declared once and said the same everywhere it is shipped:
#   Sources/MentoryCommandLine/MentoryVersion.swift   the declaration (mentoryd --version, mentoryctl
#                                                     --version, session.status's serverVersion)
#   clients/python/src/mentory/__init__.py            the Python client's __version__, which
#                                                     clients/python/pyproject.toml reads (dynamic version)
#   debian/changelog                                  the packages' version (its newest entry)
# Exits 1, naming each one that differs, when they drift. scripts/test.sh runs it in step 0.
#
# Usage: scripts/check-version.sh [--print]
#   --print   print the version (after checking) and nothing else
set -euo pipefail
cd "$(dirname "$0")/.."

print=no
[ "${1:-}" = "--print" ] && print=yes

swift_file=Sources/MentoryCommandLine/MentoryVersion.swift
python_file=clients/python/src/mentory/__init__.py
pyproject=clients/python/pyproject.toml
changelog=debian/changelog

# `package static let current = "X.Y.Z"`: the one declaration.
version=$(sed -n 's/^ *package static let current = "\([^"]*\)"$/\1/p' "$swift_file")
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "check-version: no version X.Y.Z declared in $swift_file (found '$version')" >&2
  exit 1
fi

problems=()
# No other Swift source spells a version of its own for the binaries.
if others=$(grep -rnE '^ *(static let version|version:) *"[0-9]+\.[0-9]+\.[0-9]+"' Sources); then
  problems+=("Sources declare a version literal besides $swift_file: $others")
fi
python_version=$(sed -n 's/^__version__ = "\([^"]*\)"$/\1/p' "$python_file")
[ "$python_version" = "$version" ] || problems+=("$python_file says __version__ = \"$python_version\"")
# pyproject.toml takes its version from __version__ and states none of its own.
if grep -qE '^version *= *"' "$pyproject" || ! grep -q 'version = {attr = "mentory.__version__"}' "$pyproject"; then
  problems+=("$pyproject must read its version from mentory.__version__ (dynamic = [\"version\"]), not state one")
fi
# The newest entry's version: "mentoryd (X.Y.Z) unstable; urgency=medium" (a native package: no revision).
debian_version=$(sed -n '1s/^mentoryd (\([^)]*\)).*/\1/p' "$changelog")
[ "$debian_version" = "$version" ] || problems+=("$changelog's newest entry is version '$debian_version'")

if [ ${#problems[@]} -gt 0 ]; then
  echo "check-version: mentoryd's version is $version ($swift_file), but:" >&2
  printf '  %s\n' "${problems[@]}" >&2
  exit 1
fi
if [ $print = yes ]; then
  echo "$version"
else
  echo "check-version: $version in $swift_file, $python_file (and so $pyproject) and $changelog"
fi
