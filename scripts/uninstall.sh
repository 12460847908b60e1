#!/usr/bin/env bash
# [DESTDIR=DIR] uninstall.sh MANIFEST: removes the files an install listed in
# MANIFEST (cmake --install writes it, without the DESTDIR), then the folders
# of hetmem's own that this left empty: below the prefix, a folder whose path
# has a part named hetmem* or pshuffle* (share/hetmem/machines,
# share/doc/hetmem/examples, lib/cmake/pshuffle...). Shared folders such as
# PREFIX/share/man/man1 or PREFIX/bin stay.
set -euo pipefail
manifest=$1
n=0
prefix=""
dirs=()
while IFS= read -r f || [ -n "$f" ]; do
  [ -n "$f" ] || continue
  case "$f" in */bin/hetmem) prefix=${f%/bin/hetmem} ;; esac
  f="${DESTDIR:-}$f"
  if [ -e "$f" ] || [ -L "$f" ]; then
    rm -f -- "$f"
    n=$((n + 1))
  fi
  dirs+=("$(dirname -- "$f")")
done < "$manifest"
if [ -n "$prefix" ] && ((${#dirs[@]})); then
  root="${DESTDIR:-}$prefix"
  # Deepest folders first; rmdir keeps a folder that still holds anything.
  printf '%s\n' "${dirs[@]}" | sort -u | awk '{print length($0) "\t" $0}' | sort -rn | cut -f2- |
    while IFS= read -r d; do
      case "$d" in "$root"/*) ;; *) continue ;; esac
      # The outermost folder below the prefix named hetmem* or pshuffle*.
      top="" rel=${d#"$root"/} acc=$root
      IFS=/ read -ra parts <<< "$rel"
      for p in "${parts[@]}"; do
        acc="$acc/$p"
        case "$p" in hetmem* | pshuffle*) top=$acc; break ;; esac
      done
      [ -n "$top" ] || continue
      while [ "${#d}" -ge "${#top}" ] && rmdir -- "$d" 2> /dev/null; do d=$(dirname -- "$d"); done
    done
fi
echo "uninstall: removed $n file(s) listed in $manifest"
