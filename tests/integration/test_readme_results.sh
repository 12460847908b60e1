#!/usr/bin/env bash
# The README's "Results" figures come from the docs/results pages: every
# bullet of its headline list names its page(s) (docs/results/NAME.md), and
# every number in the bullet is one of those pages' numbers, rounded to the
# digits the README shows (a percentage may also be a page's fraction:
# 99.1% for 0.9910). A figure changed on a page and not in the README, or
# the other way round, fails here. HETMEM_DOCS_SRC (default: the source
# tree) names the tree whose README and pages are read.
set -u
S=${HETMEM_DOCS_SRC:-$HETMEM_SRC}
python3 - "$S" << 'PY'
import os, re, sys
from decimal import Decimal, ROUND_HALF_UP

src = sys.argv[1]
readme = open(os.path.join(src, "README.md")).read()
if "\n## Results\n" not in readme:
    sys.exit("FAIL: README.md has no '## Results' section")
sec = readme.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
bullets = re.findall(r"^- (.*?)(?=^- |^\S|\Z)", sec, re.S | re.M)
NUM = re.compile(r"(?<![\w.^])\d[\d,]*(?:\.\d+)?(%?)")
PAGE = re.compile(r"docs/results/([\w.-]+\.md)")


def numbers(text):
    """The numbers of a text, without thousands separators, with whether a
    % follows. Numbers inside words (f0e3cac, 2^20's exponent) are not."""
    return [(m.group(0).rstrip("%").replace(",", ""), bool(m.group(1))) for m in NUM.finditer(text)]


def decimals(n):
    return len(n.split(".")[1]) if "." in n else 0


def backed(n, pct, page):
    d = decimals(n)
    q = Decimal(1).scaleb(-d)
    v = Decimal(n)
    for p in page:
        pv = Decimal(p)
        if decimals(p) >= d and pv.quantize(q, rounding=ROUND_HALF_UP) == v:
            return True
        if decimals(p) < d and pv == v:
            return True
        if pct and pv <= 1 and decimals(p) >= d + 2 and (pv * 100).quantize(q, rounding=ROUND_HALF_UP) == v:
            return True
    return False


fails = checked = 0
if not bullets:
    sys.exit("FAIL: no bullets in the README's Results section")
for b in bullets:
    head = " ".join(b.split())[:60]
    pages = sorted(set(PAGE.findall(b)))
    if not pages:
        print("FAIL: README Results bullet names no docs/results page: %s..." % head)
        fails += 1
        continue
    text = ""
    for p in pages:
        f = os.path.join(src, "docs", "results", p)
        if not os.path.exists(f):
            print("FAIL: %s... names docs/results/%s, which does not exist" % (head, p))
            fails += 1
            continue
        text += open(f).read() + "\n"
    page = set(n for n, _ in numbers(text))
    body = PAGE.sub(" ", re.sub(r"bench/[\w-]+", " ", b))
    missing = []
    for n, pct in numbers(body):
        checked += 1
        if not backed(n, pct, page):
            missing.append(n + ("%" if pct else ""))
    if missing:
        print("FAIL: %s... (%s): not on the page: %s" % (head, ", ".join(pages), " ".join(missing)))
        fails += 1
    else:
        print("ok: %s... (%s)" % (head, ", ".join(pages)))
# The table of pages lists pages that exist.
for p in re.findall(r"^\| `docs/results/([\w.-]+\.md)` \|", sec, re.M):
    if not os.path.exists(os.path.join(src, "docs", "results", p)):
        print("FAIL: the Results table lists docs/results/%s, which does not exist" % p)
        fails += 1
print("%d numbers in %d bullets checked, %d bullets failed" % (checked, len(bullets), fails))
sys.exit(1 if fails else 0)
PY
