#!/usr/bin/env python3
"""Scatter of estimated against measured runtime from `hetmem validate --json`.

usage: plot-validate.py VALIDATE.json OUT.png
"""
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: plot-validate.py VALIDATE.json OUT.png")
    with open(argv[1]) as f:
        doc = json.load(f)
    rows = doc["rows"]
    fig, ax = plt.subplots(figsize=(5, 5))
    lo = min(r["measured_s"] for r in rows)
    hi = max(r["measured_s"] for r in rows)
    for model, marker in (("linear", "x"), ("default", "o")):
        xs = [r["measured_s"] for r in rows if model in r["estimates"]]
        ys = [r["estimates"][model]["runtime_s"] for r in rows if model in r["estimates"]]
        if xs:
            err = doc["summary"][model]["mean_abs_err_pct"]
            ax.scatter(xs, ys, marker=marker, label=f"{model} (mean |err| {err:.1f}%)", alpha=0.8)
            lo, hi = min(lo, *ys), max(hi, *ys)
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="exact")
    ax.set_xlabel("measured runtime (s)")
    ax.set_ylabel("estimated runtime (s)")
    cmd = os.path.basename(doc.get("command", [""])[0])
    ax.set_title(f"{cmd} on {doc.get('machine', '')} (gap {doc.get('gap', 1):.2f}x)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)


if __name__ == "__main__":
    main(sys.argv)
