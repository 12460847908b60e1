#!/usr/bin/env bash
# [DESTDIR=DIR] uninstall.sh MANIFEST: removes the files an install listed in
# MANIFEST (cmake --install writes it, without the DESTDIR), then the folders
# that belong to hetmem alone (a path component named hetmem* or pshuffle*,
# e.g. share/hetmem/machines) when this left them empty: shared folders such
# as PREFIX/share/man stay.
set -euo pipefail
manifest=$1
n=0
dirs=()
while IFS= read -r f || [ -n "$f" ]; do
  [ -n "$f" ] || continue
  f="${DESTDIR:-}$f"
  if [ -e "$f" ] || [ -L "$f" ]; then
    rm -f -- "$f"
    n=$((n + 1))
  fi
  dirs+=("$(dirname -- "$f")")
done < "$manifest"
# Deepest folders first; rmdir keeps a folder that still holds anything.
if ((${#dirs[@]})); then
  printf '%s\n' "${dirs[@]}" | sort -u | awk '{print length($0) "\t" $0}' | sort -rn | cut -f2- |
    while IFS= read -r d; do
      # The deepest folder of the path named hetmem* or pshuffle*, if any.
      top="" p=$d
      while [ "$p" != / ] && [ "$p" != . ]; do
        case "$(basename -- "$p")" in hetmem* | pshuffle*) top=$p; break ;; esac
        p=$(dirname -- "$p")
      done
      [ -n "$top" ] || continue
      while rmdir -- "$d" 2> /dev/null && [ "$d" != "$top" ]; do d=$(dirname -- "$d"); done
    done
fi
echo "uninstall: removed $n file(s) listed in $manifest"
