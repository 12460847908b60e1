#!/usr/bin/env bash
# Man pages from the programs' own --help and --version (help2man), so that
# they say what the programs say:
#   gen-man.sh OUTDIR HETMEM [--cc HETMEM_CC] [--pshuffle PSHUFFLE]
# writes hetmem.1, hetmem-<command>.1 for every command in `hetmem --help`,
# and hetmem-cc.1, pshuffle.1 and pshuffle-<command>.1 when given.
set -euo pipefail
out=$1 hetmem=$2
shift 2
cc="" pshuffle=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cc) cc=$2; shift 2 ;;
    --pshuffle) pshuffle=$2; shift 2 ;;
    *) echo "gen-man: $1: unknown option" >&2; exit 2 ;;
  esac
done
command -v help2man > /dev/null || { echo "gen-man: help2man: not installed (apt install help2man)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/*.1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hetmem-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Help printed by sanitized builds must not carry a leak report.
export ASAN_OPTIONS=detect_leaks=0

# Commands and their one-line summaries, from a tool's --help: the lines
# under "commands:" of the form "  NAME  SUMMARY".
commands() {
  "$1" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print} on && /^$/ {on = 0}'
}

# page NAME SUMMARY PROGRAM SEEALSO: help2man on PROGRAM.
page() {
  local name=$1 summary=$2 prog=$3 see=$4
  printf '[SEE ALSO]\n%s\n' "$see" > "$tmp/$name.h2m"
  help2man --no-info --no-discard-stderr --section 1 --name "$summary" \
    --include "$tmp/$name.h2m" --output "$out/$name.1" "$prog"
}

# TOOL [SUB] as a program of its own for help2man: NAME --help runs
# TOOL SUB --help with "usage:" as help2man's "Usage:" (for the SYNOPSIS),
# NAME --version prints "NAME VERSION".
wrapper() {
  local tool=$1 sub=$2 name=$3 version
  version=$("$tool" --version | awk '{print $2; exit}')
  cat > "$tmp/$name" <<EOF
#!/bin/sh
case "\$1" in --version) echo "$name $version"; exit 0 ;; esac
"$tool" $sub "\$@" 2>&1 | sed '1s/^usage: /Usage: /'
EOF
  chmod +x "$tmp/$name"
}

# tool NAME PROGRAM SUMMARY: NAME.1 and NAME-SUB.1 for each subcommand.
tool() {
  local name=$1 prog=$2 summary=$3 subs see sub sum
  subs=$(commands "$prog")
  see=$(awk -v n="$name" 'NF {print ".BR " n "-" $1 " (1),"}' <<< "$subs" | sed '$ s/,$//')
  wrapper "$prog" "" "$name"
  page "$name" "$summary" "$tmp/$name" "$see"
  while read -r sub sum; do
    [ -n "$sub" ] || continue
    wrapper "$prog" "$sub" "$name-$sub"
    page "$name-$sub" "$sum" "$tmp/$name-$sub" ".BR $name (1)"
  done <<< "$subs"
}

tool hetmem "$hetmem" "heterogeneous-memory placement: record, simulate, estimate, optimize"
if [ -n "$cc" ]; then
  page hetmem-cc "compile a C program for hetmem sim (a compiler wrapper, like mpicc)" "$cc" \
    "$(printf '.BR hetmem (1),\n.BR hetmem-sim (1)')"
fi
if [ -n "$pshuffle" ]; then
  tool pshuffle "$pshuffle" "partial distributed shuffling of training data over MPI: operator commands"
fi
