#!/usr/bin/env bash
# Installs the system packages mentoryd needs to build and test, if they are missing.
# Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail
packages=(libsystemd-dev libsqlite3-dev pkg-config protobuf-compiler libprotobuf-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
