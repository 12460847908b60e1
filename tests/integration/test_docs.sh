#!/usr/bin/env bash
# The documentation's commands run as written: every shell block of the
# README's "Quick start" and "Examples" and of each docs/*.md "Quick start",
# in document order, each document in a fresh folder that mirrors the clone
# (its files as symbolic links, build/ this build) with build/bin on PATH.
# A block preceded by "<!-- doc-test: skip: REASON -->" is skipped with its
# reason; a JSON block preceded by "<!-- doc-test: check: COMMAND -->" is
# written to a file and COMMAND runs with {} replaced by its name.
# HETMEM_DOCS_SRC (default: the source tree) names the tree whose documents
# are read.
set -u
S=${HETMEM_DOCS_SRC:-$HETMEM_SRC}
B=$HETMEM_BUILD
if grep -q '^HETMEM_SANITIZE:STRING=..*' "$B/CMakeCache.txt" 2> /dev/null; then
  echo "skip: sanitized build: hetmem-cc programs link the uninstrumented runtime"; exit 77
fi
[ -x "$B/bin/hetmem-cc" ] || { echo "skip: hetmem-cc is not built (Zydis missing)"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/hetmem-docs.XXXXXX")
trap 'rm -rf "$W"' EXIT
python3 - "$S" "$B" "$W" << 'PY'
import os, re, subprocess, sys

src, build, work = sys.argv[1:4]
FENCE = re.compile(r"^```(\w*)\s*$")
MARK = re.compile(r"^<!-- doc-test: (skip|check): (.*?) -->\s*$")


def sections(path):
    """(title, lines) of the parts of a document whose blocks run."""
    lines = open(path).read().split("\n")
    name = os.path.relpath(path, src)
    out, cur, fenced = [], None, False
    for i, l in enumerate(lines):
        if l.startswith("```"):
            fenced = not fenced
        head = None if fenced else re.match(r"^(#+) (.*)", l)
        if head:
            cur = None
            if head.group(2).strip().lower() == "quick start":
                cur = (name + ": " + head.group(2), [])
                out.append(cur)
        elif name == "README.md" and re.match(r"^Examples[:,]", l):
            cur = (name + ": Examples", [])
            out.append(cur)
        if cur is not None:
            cur[1].append((i + 1, l))
    return out


def blocks(lines):
    """(line, kind, marker, text) of the fenced blocks in lines."""
    res, mark, i = [], None, 0
    while i < len(lines):
        no, l = lines[i]
        m = MARK.match(l)
        if m:
            mark = (m.group(1), m.group(2))
        f = FENCE.match(l)
        if f and f.group(1):
            j = i + 1
            while j < len(lines) and not lines[j][1].startswith("```"):
                j += 1
            res.append((no, f.group(1), mark, "\n".join(t for _, t in lines[i + 1:j])))
            mark, i = None, j + 1
            continue
        if l.strip() and not m:
            mark = None
        i += 1
    return res


def tree(dest):
    """A folder that mirrors the clone: links to its files, build/ = this build."""
    os.makedirs(dest)
    for e in os.listdir(src):
        if e in (".git", "build") or e.startswith("build-"):
            continue
        os.symlink(os.path.join(src, e), os.path.join(dest, e))
    os.symlink(build, os.path.join(dest, "build"))


docs = [os.path.join(src, "README.md")] + sorted(
    os.path.join(src, "docs", f) for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md"))
env = dict(os.environ, PATH=os.path.join(build, "bin") + ":" + os.environ["PATH"])
for k in ("HETMEM_LIB", "PSHUFFLE_LIB", "PYTHONPATH"):
    env.pop(k, None)
fails = ran = skipped = 0
for d in docs:
    secs = sections(d)
    if not secs:
        continue
    cwd = os.path.join(work, os.path.basename(d).replace(".md", ""))
    tree(cwd)
    for title, lines in secs:
        bl = blocks(lines)
        if not any(k in ("sh", "bash") for _, k, _, _ in bl):
            print("FAIL: %s: no shell block" % title)
            fails += 1
        for no, kind, mark, text in bl:
            where = "%s:%d" % (os.path.relpath(d, src), no)
            if mark and mark[0] == "skip":
                print("skip: %s (%s): %s" % (where, title, mark[1]))
                skipped += 1
                continue
            if kind in ("sh", "bash"):
                script, what = text, "shell block"
            elif mark and mark[0] == "check":
                f = os.path.join(cwd, "block-%d.%s" % (no, kind))
                open(f, "w").write(text + "\n")
                script, what = mark[1].replace("{}", os.path.basename(f)), "%s block, checked with: %s" % (kind, mark[1])
            else:
                continue
            try:
                p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240)
                rc, out = p.returncode, p.stdout.decode(errors="replace")
            except subprocess.TimeoutExpired as e:
                rc, out = "timeout", (e.stdout or b"").decode(errors="replace")
            ran += 1
            if rc == 0:
                print("ok: %s (%s): %s" % (where, title, what))
            else:
                fails += 1
                print("FAIL: %s (%s): %s exited %s\n--- block\n%s\n--- output (last 40 lines)\n%s" % (
                    where, title, what, rc, script, "\n".join(out.splitlines()[-40:])))
print("%d blocks ran, %d skipped, %d failed" % (ran, skipped, fails))
sys.exit(1 if fails or not ran else 0)
PY
