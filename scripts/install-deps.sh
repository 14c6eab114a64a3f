#!/usr/bin/env bash
# Installs every Debian package cordon needs to build, test and run. Run as root on Debian 12.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
pkgs=(
  build-essential g++ cmake ninja-build pkg-config ccache
  nlohmann-json3-dev libssl-dev libtomlplusplus-dev libgtest-dev libbenchmark-dev
  libseccomp-dev libcap-ng-dev libcurl4-openssl-dev
  libmicrohttpd-dev libcli11-dev libre2-dev clang-format help2man
  # the fuzz targets (scripts/fuzz.sh): clang 14 cannot compile libstdc++ 12's std::expected
  clang-16 libclang-rt-16-dev
  bubblewrap ripgrep fd-find util-linux procps python3 curl
  openssl git python3-pytest python3-jsonschema python3-yaml man-db
  chromium
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Debian ships fd as fdfind; cordon looks for either name.
