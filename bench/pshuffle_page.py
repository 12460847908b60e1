"""Replaces one generated section of a results page (helper of the pshuffle benches).

    pshuffle_page.py PAGE SECTION FILE

The text of FILE goes between the lines `<!-- SECTION:begin -->` and
`<!-- SECTION:end -->` of PAGE; the rest of the page (its prose) is kept.
"""
import sys


def main():
    if len(sys.argv) != 4:
        print("usage: pshuffle_page.py PAGE SECTION FILE", file=sys.stderr)
        return 2
    page, sec, src = sys.argv[1:]
    begin, end = f"<!-- {sec}:begin -->", f"<!-- {sec}:end -->"
    try:
        text = open(page).read()
        body = open(src).read()
    except OSError as e:
        print(f"pshuffle_page: {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        print(f"pshuffle_page: {page}: no '{begin}' ... '{end}' section", file=sys.stderr)
        return 1
    text = text[: i + len(begin)] + "\n" + body.rstrip("\n") + "\n" + text[j:]
    with open(page, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
