#!/usr/bin/env python3
"""Component boundaries: fails when a source file includes a `.c` file, or
another component's internal (`*_int.h`, `*_internal.h`) or private header,
unless docs/design.md lists that include as a deliberate exception.

A component is a folder: src/<name>/, tools/<name>/, include/ (the public
headers), pshuffle/. What one component may include of another: the public
headers (include/hetmem/*.h), the shared helpers (src/common/*.h) and the
component's interface header named after it (src/os/os.h, src/arch/arch.h).
Anything else of another component is private to it.

The exceptions are the rows of the table under the heading "Deliberate
exceptions" in docs/design.md: | `including file` | `include as written` |
reason |. A row that no longer matches an include fails too, so that the
list stays the list of what is there.

Usage: check_includes.py [ROOT]     check the tree at ROOT (default: the
                                    repository holding this script)
       check_includes.py --self-test  check the checker on a made-up tree
"""
import os
import re
import sys
import tempfile

SCAN = ("src", "tools", "include", "pshuffle/src", "pshuffle/include", "pshuffle/tools")
SEARCH = ("src", "include", "pshuffle/include")  # the build's -I folders, after the file's own
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ROW_RE = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|(.*)\|\s*$")


def component(rel):
    """The component a repository-relative path belongs to."""
    parts = rel.split("/")
    if parts[0] == "pshuffle":
        return "pshuffle"
    if parts[0] == "include":
        return "include"
    if parts[0] in ("src", "tools") and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def exceptions(root):
    """(file, include) pairs listed as deliberate in docs/design.md."""
    path = os.path.join(root, "docs", "design.md")
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        sys.exit("check_includes: %s: %s" % (path, e.strerror))
    out, inside = {}, False
    for n, line in enumerate(lines, 1):
        if line.startswith("#"):
            inside = "deliberate exceptions" in line.lower()
            continue
        m = ROW_RE.match(line) if inside else None
        if m:
            if not m.group(3).strip():
                sys.exit("check_includes: docs/design.md:%d: an exception needs its reason" % n)
            out[(m.group(1), m.group(2))] = n
    return out


def resolve(root, rel, inc):
    """Repository-relative path of an include, or None when not in the tree."""
    for d in (os.path.dirname(rel),) + SEARCH:
        cand = os.path.normpath(os.path.join(d, inc))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def verdict(rel, target):
    """None when the include is allowed, else why not."""
    if not target.endswith(".h"):
        return "includes a .c file"
    own, theirs = component(rel), component(target)
    if own == theirs or theirs == "include":
        return None
    base = os.path.basename(target)
    if target.startswith("src/common/") and not base.endswith(("_int.h", "_internal.h")):
        return None
    if base.endswith(("_int.h", "_internal.h")):
        return "includes %s's internal header" % theirs
    if target == theirs + "/" + theirs.split("/")[-1] + ".h":
        return None
    return "includes %s's private header" % theirs


def check(root, out=sys.stdout):
    """Prints each violation; returns how many."""
    allowed = exceptions(root)
    used, bad = set(), 0
    for top in SCAN:
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        target = resolve(root, rel, inc)
                        if target is None:
                            why = "includes a file not in the tree" if inc.endswith(".h") else "includes a .c file"
                        else:
                            why = verdict(rel, target)
                        if why is None:
                            continue
                        if (rel, inc) in allowed:
                            used.add((rel, inc))
                            continue
                        print('%s:%d: "%s": %s (use a public or interface header, or list it with its reason '
                              'under "Deliberate exceptions" in docs/design.md)' % (rel, n, inc, why), file=out)
                        bad += 1
    for (rel, inc), n in sorted(allowed.items()):
        if (rel, inc) not in used:
            print('docs/design.md:%d: exception %s -> "%s" matches no include that needs one: remove it'
                  % (n, rel, inc), file=out)
            bad += 1
    return bad


def self_test():
    """The checker on a made-up tree: each kind of violation is caught, an
    exception lets one through, a stale exception is caught."""
    import io
    failures = 0
    with tempfile.TemporaryDirectory() as t:
        def put(rel, text):
            os.makedirs(os.path.dirname(os.path.join(t, rel)), exist_ok=True)
            with open(os.path.join(t, rel), "w") as fh:
                fh.write(text)
        put("include/hetmem/a.h", "")
        put("src/a/a.h", "")
        put("src/a/a_int.h", "")
        put("src/a/priv.h", "")
        put("src/a/a.c", '#include "a/a_int.h"\n#include "priv.h"\n')
        put("src/common/common.h", "")
        put("src/b/b.c", '#include "hetmem/a.h"\n#include "common/common.h"\n#include "a/a.h"\n')
        design = "# d\n## Deliberate exceptions\n| file | include | why |\n|---|---|---|\n%s"

        def run(body, rows=""):
            put("src/b/x.c", body)
            put("docs/design.md", design % rows)
            buf = io.StringIO()
            return check(t, buf), buf.getvalue()

        cases = [
            ("allowed includes", "", "", 0, ""),
            ("another component's _int.h", '#include "a/a_int.h"\n', "", 1, "internal header"),
            ("another component's private header", '#include "a/priv.h"\n', "", 1, "private header"),
            ("a .c file", '#include "a/a.c"\n', "", 1, ".c file"),
            ("a .c file of its own", '#include "b.c"\n', "", 1, ".c file"),
            ("a listed exception", '#include "a/a_int.h"\n', "| `src/b/x.c` | `a/a_int.h` | why |\n", 0, ""),
            ("a stale exception", "", "| `src/b/x.c` | `a/a_int.h` | why |\n", 1, "matches no include"),
        ]
        for name, body, rows, want, text in cases:
            got, msg = run(body, rows)
            if got != want or text not in msg:
                print("self-test: %s: %d violations (want %d)%s" % (name, got, want, ": " + msg.strip() if msg else ""))
                failures += 1
        put("docs/design.md", design % "| `src/b/x.c` | `a/a_int.h` | |\n")
        pid = os.fork()
        if pid == 0:
            sys.stderr = open(os.devnull, "w")
            try:
                exceptions(t)
            except SystemExit:
                os._exit(3)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if os.WEXITSTATUS(status) != 3:
            print("self-test: an exception without a reason was accepted")
            failures += 1
    print("self-test: %d of %d cases failed" % (failures, len(cases) + 1))
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad = check(root)
    if bad:
        print("check_includes: %d include(s) cross a component boundary" % bad)
        return 1
    print("check_includes: no include crosses a component boundary outside docs/design.md's exceptions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
