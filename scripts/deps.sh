#!/usr/bin/env bash
# Installs the Debian packages hetmem needs, and only those. Does nothing when
# they are all present. Uses sudo when not root.
#   scripts/deps.sh [LIST]   LIST: a package list (default scripts/packages.txt);
#                            pkg:ARCH entries add ARCH to dpkg first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list=${1:-$here/packages.txt}
mapfile -t pkgs < <(grep -v '^\s*#' "$list" | awk 'NF{print $1}')
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "deps: installing ${#missing[@]} package(s): ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
for arch in $(printf '%s\n' "${missing[@]}" | sed -n 's/.*:\([a-z0-9]*\)$/\1/p' | sort -u); do
  if [ "$arch" != "$(dpkg --print-architecture)" ] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
    echo "deps: adding the $arch architecture to dpkg" >&2
    $SUDO dpkg --add-architecture "$arch"
  fi
done
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
