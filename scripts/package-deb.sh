#!/usr/bin/env bash
# Builds mentoryd's Debian packages (debian/): mentoryd, mentory-advisor and python3-mentory, then runs
# lintian on them, which must report no error and no warning (the ones accepted are overridden, with the
# reason, in debian/*.lintian-overrides).
#
# The Swift binaries are the release build users run, with the Swift runtime linked statically and
# Package.swift's ShippedBinaries link options (as scripts/install.sh installs them): --bin-dir reuses such
# a build, so that packaging compiles no Swift; without it this script makes that build first, in
# .build-static (shared with install.sh and bench.sh). The packages are built from a copy of the source
# tree (its tracked and untracked, not ignored, files) in a temporary folder, removed at the end, so the
# working tree gets no build products and dpkg-buildpackage writes nothing beside it.
#
# Usage: scripts/package-deb.sh [--bin-dir DIR] [--out-dir DIR] [--version VERSION] [--fast] [--no-lintian]
#   --bin-dir DIR      take mentoryd, mentoryctl and mentory-advisor from DIR (a static release build)
#   --out-dir DIR      where the .deb, .changes and .buildinfo files go (default: dist); earlier
#                      packages of these three names there are removed first
#   --version VERSION  package as VERSION instead of debian/changelog's (a new changelog entry in the
#                      copy only), e.g. a test's upgrade N+1 of the same source: 0.1.0+1
#   --fast             compress with xz -1 (8 times less CPU, 17 % larger): for a test's throwaway packages
#   --no-lintian       skip lintian
# Needs root, or the build dependencies installed: as root it installs what is missing with apt-get.
# Then: sudo apt install ./dist/mentoryd_*.deb ./dist/mentory-advisor_*.deb ./dist/python3-mentory_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=""
out_dir=dist
version=""
lint=yes
fast=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir=${2:?--bin-dir needs a folder}; shift 2 ;;
    --out-dir) out_dir=${2:?--out-dir needs a folder}; shift 2 ;;
    --version) version=${2:?--version needs a version}; shift 2 ;;
    --fast) fast=1; shift ;;
    --no-lintian) lint=no; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "package-deb.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done

# The build dependencies (debian/control's Build-Depends), and lintian and fakeroot's absence is fine:
# Rules-Requires-Root: no. Installed only when missing, so a second run asks apt nothing.
build_deps=(debhelper dh-python pybuild-plugin-pyproject python3-all python3-setuptools libsqlite3-dev
  libsystemd-dev pkg-config dpkg-dev lintian)
missing=()
for package in "${build_deps[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "package-deb.sh: missing build dependencies: ${missing[*]} (sudo apt-get install them, or run this as root)" >&2
    exit 69
  fi
  echo "installing the build dependencies: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -z "$bin_dir" ]; then
  echo "building mentoryd, mentoryctl and mentory-advisor (static release, ShippedBinaries)"
  # shellcheck source=scripts/lib/shipped-build.sh
  . scripts/lib/shipped-build.sh
  static=("${shipped_build[@]}" --scratch-path .build-static)
  "${static[@]}" --product mentoryd
  "${static[@]}" --product mentoryctl
  "${static[@]}" --product mentory-advisor
  bin_dir=$("${static[@]}" --show-bin-path)
fi
bin_dir=$(cd "$bin_dir" && pwd)
for binary in mentoryd mentoryctl mentory-advisor; do
  [ -x "$bin_dir/$binary" ] || { echo "package-deb.sh: no $binary in $bin_dir" >&2; exit 66; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/mentoryd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The source tree's copy: what git tracks plus new files not ignored (so uncommitted work is packaged as
# it is), never .build* folders; outside a git checkout, everything but those.
changelog_version=$(sed -n '1s/^mentoryd (\([^)]*\)).*/\1/p' debian/changelog)
src="$work/mentoryd-${version:-$changelog_version}"
mkdir -p "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # (A tracked file deleted in the working tree is left out: it is not there to copy.)
  git ls-files -z --cached --others --exclude-standard --deduplicate \
    | while IFS= read -r -d '' file; do
        if [ -e "$file" ] || [ -L "$file" ]; then printf '%s\0' "$file"; fi
      done \
    | tar --null --no-recursion -T - -cf - | tar -C "$src" -xf -
else
  tar --exclude='./.build*' --exclude=./dist -cf - . | tar -C "$src" -xf -
fi

if [ -n "$version" ]; then
  # A new newest entry in the copy's changelog, in debian/changelog's own form.
  {
    printf 'mentoryd (%s) unstable; urgency=medium\n\n' "$version"
    printf '  * Rebuilt from the same source as %s, packaged as %s.\n\n' "$changelog_version" "$version"
    printf ' -- %s  %s\n\n' "$(sed -n 's/^Maintainer: //p' debian/control)" "$(date -R)"
    cat debian/changelog
  } > "$src/debian/changelog"
fi

echo "packaging $(sed -n '1s/^mentoryd (\([^)]*\)).*/\1/p' "$src/debian/changelog") with the binaries in $bin_dir"
started=$(date +%s)
(cd "$src" && MENTORYD_BIN_DIR="$bin_dir" MENTORYD_DEB_FAST="$fast" dpkg-buildpackage -us -uc -b) > "$work/build.log" 2>&1 || {
  tail -60 "$work/build.log"
  echo "package-deb.sh: dpkg-buildpackage failed (the end of its log is above)" >&2
  exit 1
}
echo "dpkg-buildpackage took $(( $(date +%s) - started )) s"

mkdir -p "$out_dir"
rm -f "$out_dir"/mentoryd_* "$out_dir"/mentory-advisor_* "$out_dir"/python3-mentory_*
mv "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out_dir"/
(cd "$out_dir" && ls -l ./*.deb)

if [ $lint = yes ]; then
  changes=$(ls "$out_dir"/mentoryd_*.changes)
  echo "lintian $changes"
  # Informational tags (I:) are printed but pass; an error or a warning that is not overridden fails.
  lintian --fail-on error,warning "$changes"
  echo "lintian: no errors, no warnings"
fi
