#!/usr/bin/env bash
# [DESTDIR=DIR] install.sh BUILD PREFIX: cmake --install BUILD into PREFIX
# (under DESTDIR when given). cmake lists the files it installs in
# BUILD/install_manifest.txt; this lists in BUILD/install_dirs.txt the
# folders the install creates (the prefix and any folder below it that did
# not exist before), so that uninstall.sh removes exactly those once empty.
set -euo pipefail
build=$1
prefix=$2
case "$prefix" in /*) ;; *) echo "install: PREFIX=$prefix: must be an absolute path" >&2; exit 2 ;; esac
prefix=${prefix%/}
dest=${DESTDIR:-}
# The folders an install writes: those of a staged install of the same build.
stage=$(mktemp -d "${TMPDIR:-/tmp}/hetmem-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
DESTDIR="$stage" cmake --install "$build" --prefix "$prefix" > /dev/null
dirs=()
d=$prefix
while [ -n "$d" ] && [ "$d" != / ]; do # the prefix and its missing parents
  [ -d "$dest$d" ] || dirs+=("$d")
  d=$(dirname -- "$d")
done
while IFS= read -r d; do
  d=${d#"$stage"}
  [ -d "$dest$d" ] || dirs+=("$d")
done < <(find "$stage$prefix" -mindepth 1 -type d)
DESTDIR="$dest" cmake --install "$build" --prefix "$prefix"
if ((${#dirs[@]})); then printf '%s\n' "${dirs[@]}"; fi > "$build/install_dirs.txt"
