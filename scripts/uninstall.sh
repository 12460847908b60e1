#!/usr/bin/env bash
# [DESTDIR=DIR] uninstall.sh MANIFEST [DIRS]: removes the files an install
# listed in MANIFEST (cmake --install writes it, without the DESTDIR), the
# byte-code Python wrote next to the installed .py files (__pycache__), then
# the folders that are left empty among: those listed in DIRS (install.sh
# writes it: the folders the install created), and those below the prefix
# whose path has a part named hetmem* or pshuffle* (share/hetmem/machines,
# lib/cmake/pshuffle...). Shared folders that existed before the install,
# such as PREFIX/share/man/man1 or PREFIX/bin, stay. Fails, removing
# nothing, when the manifest's prefix is gone (the prefix was moved: run
# it with the manifest of an install made there, or delete the folder).
set -euo pipefail
manifest=$1
dirlist=${2:-}
[ -r "$manifest" ] || { echo "uninstall: $manifest: cannot read" >&2; exit 1; }
prefix=""
while IFS= read -r f || [ -n "$f" ]; do
  case "$f" in */bin/hetmem) prefix=${f%/bin/hetmem} ;; esac
done < "$manifest"
root="${DESTDIR:-}$prefix"
if [ -n "$prefix" ] && [ ! -d "$root" ]; then
  echo "uninstall: $root: no such folder: the prefix of $manifest was moved or removed; nothing removed" >&2
  exit 1
fi
n=0 nb=0 nd=0
dirs=()
while IFS= read -r f || [ -n "$f" ]; do
  [ -n "$f" ] || continue
  f="${DESTDIR:-}$f"
  if [ -e "$f" ] || [ -L "$f" ]; then
    rm -f -- "$f"
    n=$((n + 1))
  fi
  d=$(dirname -- "$f")
  dirs+=("$d")
  # Byte-code of an installed module: __pycache__/NAME.cpython-311.pyc...
  case "$f" in
    *.py)
      b=$(basename -- "$f" .py)
      for c in "$d/__pycache__/$b".*.pyc; do
        [ -e "$c" ] || continue
        rm -f -- "$c"
        nb=$((nb + 1))
      done
      dirs+=("$d/__pycache__")
      ;;
  esac
done < "$manifest"
created=()
if [ -n "$dirlist" ] && [ -r "$dirlist" ]; then
  while IFS= read -r d || [ -n "$d" ]; do
    [ -n "$d" ] && created+=("${DESTDIR:-}$d")
  done < "$dirlist"
fi
# Whether folder d may go once empty: the install created it, or it is
# hetmem's own (a part below the prefix named hetmem* or pshuffle*), or it
# is byte-code beside installed modules.
ours() {
  local d=$1 c
  case "$d" in */__pycache__) return 0 ;; esac
  for c in "${created[@]+"${created[@]}"}"; do [ "$c" = "$d" ] && return 0; done
  [ -n "$prefix" ] || return 1
  case "$d" in "$root"/*) ;; *) return 1 ;; esac
  local rel=${d#"$root"/} p
  IFS=/ read -ra parts <<< "$rel"
  for p in "${parts[@]}"; do
    case "$p" in hetmem* | pshuffle*) return 0 ;; esac
  done
  return 1
}
# Every folder on the way up from the files (and the created ones), deepest
# first; rmdir keeps a folder that still holds anything.
all=$(for d in "${dirs[@]+"${dirs[@]}"}" "${created[@]+"${created[@]}"}"; do
  while [ -n "$d" ] && [ "$d" != / ] && [ "$d" != . ]; do echo "$d"; d=$(dirname -- "$d"); done
done | sort -u | awk '{print length($0) "\t" $0}' | sort -rn | cut -f2-)
while IFS= read -r d; do
  [ -n "$d" ] && [ -d "$d" ] || continue
  if ours "$d" && rmdir -- "$d" 2> /dev/null; then nd=$((nd + 1)); fi
done <<< "$all"
echo "uninstall: removed $n file(s) listed in $manifest, $nb byte-code file(s) and $nd empty folder(s)"
