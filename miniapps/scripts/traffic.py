#!/usr/bin/env python3
"""Per-object access traffic of a mini-app, measured with Valgrind's DHAT.

usage: traffic.py [--markdown] [--min-ratio R] APP [APP ARGS...]

Runs APP under `valgrind --tool=dhat`, maps every heap allocation site back
to the MA_ALLOC(ptr, count, "name") call in the app's source, and prints one
row per named object: size, bytes read and written by instructions, and
accesses per byte of the object (reads + writes) / size. These are loads and
stores as the program issues them, before any cache: an upper bound on what
reaches memory, and the right ranking for cold versus hot objects. The last
line gives the ratio between the most and the least accessed object among
those of at least 1/16 of the largest object's size ("large" objects);
with --min-ratio, exits 1 when that ratio is below R.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

NAME_RE = re.compile(r'MA_ALLOC\(\s*[^,]+,\s*[^,]+,\s*"([^"]+)"\s*\)')
FRAME_RE = re.compile(r'\((\S+\.c):(\d+)\)$')


MINIAPPS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_source(name):
    """Path of an app source file: DHAT gives only the base name."""
    base = os.path.basename(name)
    for sub in sorted(os.listdir(MINIAPPS_DIR)):
        cand = os.path.join(MINIAPPS_DIR, sub, base)
        if os.path.isfile(cand):
            return cand
    return None


def object_name(frames, ftbl, src_cache):
    """Name of the MA_ALLOC at the innermost frame in a .c file under miniapps/."""
    for fi in frames:
        m = FRAME_RE.search(ftbl[fi])
        if not m:
            continue
        line = int(m.group(2))
        path = find_source(m.group(1))
        if path is None:
            continue
        if path not in src_cache:
            try:
                with open(path) as f:
                    src_cache[path] = f.read().splitlines()
            except OSError:
                src_cache[path] = []
        lines = src_cache[path]
        if 0 < line <= len(lines):
            # The macro expands on one line, but DHAT may attribute it to a
            # continuation line; look a couple of lines back.
            for back in range(0, 3):
                mm = NAME_RE.search(lines[line - 1 - back]) if line - 1 - back >= 0 else None
                if mm:
                    return mm.group(1)
        return None
    return None


def main():
    args = sys.argv[1:]
    markdown, min_ratio = False, None
    while args and args[0].startswith('--'):
        if args[0] == '--markdown':
            markdown, args = True, args[1:]
        elif args[0] == '--min-ratio' and len(args) > 1:
            try:
                min_ratio = float(args[1])
            except ValueError:
                print('traffic.py: --min-ratio: expected a number, got %r' % args[1], file=sys.stderr)
                return 2
            args = args[2:]
        else:
            print('traffic.py: %s: unknown option' % args[0], file=sys.stderr)
            return 2
    if not args:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'dhat.json')
        run = subprocess.run(['valgrind', '--tool=dhat', '--dhat-out-file=' + out] + args,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0 or 'verification: PASSED' not in run.stdout:
            print('traffic.py: %s: run failed (exit %d)' % (args[0], run.returncode), file=sys.stderr)
            return 1
        with open(out) as f:
            d = json.load(f)
    objs, cache = {}, {}
    for pp in d['pps']:
        name = object_name(pp['fs'], d['ftbl'], cache)
        if name is None:
            continue
        o = objs.setdefault(name, {'size': 0, 'rb': 0, 'wb': 0})
        # tb sums every block allocated at the site (e.g. a regrown list) and
        # mb counts only blocks live at the global peak: the mean block size
        # is the meaningful size.
        o['size'] = max(o['size'], pp['tb'] // max(pp['tbk'], 1))
        o['rb'] += pp['rb']
        o['wb'] += pp['wb']
    rows = sorted(objs.items(), key=lambda kv: -(kv[1]['rb'] + kv[1]['wb']))
    mib = 1024.0 * 1024.0
    hdr = ('object', 'size_MiB', 'read_MiB', 'write_MiB', 'acc_per_byte')
    if markdown:
        print('| ' + ' | '.join(hdr) + ' |')
        print('|' + '---|' * len(hdr))
    else:
        print('%-14s %10s %12s %12s %13s' % hdr)
    for name, o in rows:
        apb = (o['rb'] + o['wb']) / o['size'] if o['size'] else 0.0
        cells = (name, '%.2f' % (o['size'] / mib), '%.1f' % (o['rb'] / mib),
                 '%.1f' % (o['wb'] / mib), '%.1f' % apb)
        if markdown:
            print('| ' + ' | '.join(cells) + ' |')
        else:
            print('%-14s %10s %12s %12s %13s' % cells)
    big = max(o['size'] for o in objs.values())
    large = [(n, o['rb'] + o['wb']) for n, o in objs.items() if o['size'] * 16 >= big]
    hot = max(large, key=lambda x: x[1])
    cold = min(large, key=lambda x: x[1])
    ratio = hot[1] / cold[1] if cold[1] else float('inf')
    print('%shottest/coldest large object: %s (%.1f MiB) / %s (%.1f MiB) = %.1fx' %
          ('\n' if markdown else '', hot[0], hot[1] / mib, cold[0], cold[1] / mib, ratio))
    if min_ratio is not None and not ratio >= min_ratio:
        print('FAIL: ratio %.1f below %.1f' % (ratio, min_ratio))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
