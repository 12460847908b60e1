#!/usr/bin/env bash
# CLI frame: help for every subcommand, usage errors and exit codes, one-line
# errors on stderr.
set -u
hm="$HETMEM_BIN/hetmem"
fail=0; n=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

expect() { # expect RC DESC -- CMD...
  local want=$1 desc=$2; shift 3
  n=$((n+1))
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $desc: exit $rc, want $want"; sed 's/^/  stderr: /' "$tmp/err"; fail=$((fail+1)); return 1
  fi
}
one_line_err() { # stderr is exactly one line starting with "hetmem: "
  n=$((n+1))
  local lines; lines=$(wc -l < "$tmp/err")
  if [ "$lines" != 1 ] || ! grep -q '^hetmem: ' "$tmp/err"; then
    echo "FAIL: $1: want one 'hetmem: ' line on stderr, got $lines:"; sed 's/^/  /' "$tmp/err"; fail=$((fail+1))
  fi
}

expect 0 "top-level --help" -- "$hm" --help
grep -q '^commands:' "$tmp/out" || { echo "FAIL: --help lists no commands"; fail=$((fail+1)); }
expect 0 "--version" -- "$hm" --version
grep -q '^hetmem [0-9]' "$tmp/out" || { echo "FAIL: --version output: $(cat "$tmp/out")"; fail=$((fail+1)); }
expect 2 "no arguments" -- "$hm"
expect 2 "unknown command" -- "$hm" frobnicate
one_line_err "unknown command"

for c in doctor record run sim estimate optimize validate trace; do
  expect 0 "$c --help" -- "$hm" "$c" --help
  grep -q "^usage: hetmem $c" "$tmp/out" || { echo "FAIL: $c --help has no usage line"; fail=$((fail+1)); }
  expect 2 "$c with an unknown option" -- "$hm" "$c" --no-such-option
  one_line_err "$c --no-such-option"
  # The error must be about the option (a stub refusing everything would
  # also exit 2): built commands name it; stubs say they are not built.
  if ! grep -q "unknown option '--no-such-option'\|unknown subcommand '--no-such-option'\|not built yet" "$tmp/err"; then
    echo "FAIL: $c --no-such-option: the error does not name the option: $(cat "$tmp/err")"; fail=$((fail+1))
  fi
  if ! grep -q 'not built yet' "$tmp/err"; then
    expect 2 "$c with an unknown short option" -- "$hm" "$c" -Z
    grep -q "unknown option '-Z'\|unknown subcommand '-Z'\|invalid option" "$tmp/err" \
      || { echo "FAIL: $c -Z: the error does not name the option: $(cat "$tmp/err")"; fail=$((fail+1)); }
  fi
done

# Subcommands not built yet say so and exit 2.
for c in estimate optimize validate; do
  if grep -q 'not built yet' <("$hm" "$c" --help); then
    expect 2 "$c not built" -- "$hm" "$c"
    grep -q 'not built yet' "$tmp/err" || { echo "FAIL: $c does not say it is not built"; fail=$((fail+1)); }
    one_line_err "$c not built"
  fi
done

echo "$((n-fail)) passed, $fail failed"
[ "$fail" = 0 ]
