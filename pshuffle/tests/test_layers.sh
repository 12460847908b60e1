#!/usr/bin/env bash
# The library's layers call one way: the shuffler (shuffler.c) calls the
# exchange (exchange.c) through exchange.h, both call the agreement among
# ranks (agree.c), and neither the exchange nor the agreement calls back
# into what sits above it. Checked on the library's object files: no
# symbol that exchange.o or agree.o leaves undefined is one that a layer
# above it defines.
#   usage: test_layers.sh OBJECT...   (the pshuffle library's objects)
set -u
fail() { echo "FAIL: $*"; exit 1; }
obj() { for o in "$@"; do case $o in */"$want".o) echo "$o"; return;; esac; done; }
want=shuffler.c; shuffler=$(obj "$@")
want=exchange.c; exchange=$(obj "$@")
want=agree.c; agree=$(obj "$@")
[ -n "$shuffler" ] && [ -n "$exchange" ] && [ -n "$agree" ] || fail "shuffler.c, exchange.c or agree.c missing from: $*"
defined() { nm --defined-only "$@" | awk 'NF == 3 && $2 ~ /[TDBRtdbr]/ { print $3 }' | sort -u; }
undefined() { nm --undefined-only "$1" | awk '{ print $NF }' | sort -u; }
defined "$shuffler" > /dev/null || fail "nm cannot read $shuffler"

up=$(comm -12 <(undefined "$exchange") <(defined "$shuffler"))
[ -z "$up" ] || fail "exchange.c calls into shuffler.c: $(echo $up)"
up=$(comm -12 <(undefined "$agree") <(defined "$shuffler" "$exchange"))
[ -z "$up" ] || fail "agree.c calls into shuffler.c or exchange.c: $(echo $up)"
# The shuffler does use the exchange (so the check above has something to
# tell apart): the calls exchange.h declares.
down=$(comm -12 <(undefined "$shuffler") <(defined "$exchange"))
[ -n "$down" ] || fail "shuffler.c calls nothing of exchange.c: the objects are not the library's"
echo "layers: shuffler.c -> exchange.c ($(echo $down)), both -> agree.c, nothing back"
