#!/usr/bin/python3
"""Runs a proxy app natively and under `hetmem sim`, and checks both runs.

usage: bench/apps/check.py APP SIZE [--build DIR] [--machine M] [--json FILE]

APP is a key of bench/apps/apps.json and SIZE one of its sizes (test,
small). Both programs (DIR/bench/apps/APP and APP.sim, DIR default build)
run in a fresh temporary folder, since miniFE and HPCG write their reports
into the current one. Each run must pass the app's own verification (below),
and the simulated run must compute the same answer as the native one (the
instrumentation changes no arithmetic):

  xsbench  "Verification checksum: N"; N equal in both runs. XSBench knows the
           right checksum only at its published sizes (-s small/large with the
           default lookups) and exits 1 at any other: exit 1 is accepted, an
           unequal checksum is not.
  lulesh   "Final Origin Energy" equal in both runs, and LULESH's symmetry check
           "MaxRelDiff" at most 1e-8 (the problem is symmetric).
  minife   exit 0 and "solution matches analytic solution" (verify_solution=1);
           "Final Resid Norm" equal in both runs.
  hpcg     exit 0, both "Result=PASSED" lines of its report (spectral
           convergence and departure from symmetry); the scaled residuals of
           its CG runs equal in both runs.
  babelstream  exit 0 and no "Validation failed" (its check of every array
           against the expected values); it prints no computed value, so
           nothing is compared between the builds.
  pennant  exit 0 and "Run complete"; its "Energy check" lines (total,
           internal and kinetic energy at the start and at the end) and the
           final cycle and time equal in both runs. Where upstream ships a
           reference output next to the deck (test/sedov/sedov.xy.std, the
           `test` size), the .xy file the run writes (density, energy and
           pressure of every zone) must match it: every value within 1e-6 of
           the largest magnitude of its field (the reference was made with
           another compiler, so the smallest values differ in their last
           digits), and both runs' .xy files identical.
  nekbone  exit 0; every CG solve ("cg:" lines: the residual norm before
           the first iteration and after the last, 100 iterations) reduces
           the residual by at least 1e-6 (Nekbone itself checks nothing);
           the "cg:" lines and the size line ("nelt = ..., nx1 = ...") equal
           in both runs.

An argument "{dir}/FILE" names FILE in the app's folder (bench/apps/APP,
PENNANT's input decks); check.py copies FILE into each run's folder and
passes its base name, since PENNANT writes its output next to its deck.

Prints one line per run and the native run's peak resident size (its
footprint); exits 1 with the reason on the first failed check. --json FILE
keeps `hetmem sim --json` of the simulated run.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def fail(msg):
    sys.stderr.write("check: %s\n" % msg)
    sys.exit(1)


def apps():
    with open(os.path.join(HERE, "apps.json")) as f:
        return json.load(f)


def run(cmd, cwd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = p.stdout
    # HPCG reports into files of the folder it ran in.
    for f in sorted(glob.glob(os.path.join(cwd, "HPCG-Benchmark*.txt")) + glob.glob(os.path.join(cwd, "hpcg*.txt"))):
        with open(f) as fh:
            text += fh.read()
    return p.returncode, text, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, r1.ru_maxrss


def found(pattern, text, what):
    m = re.findall(pattern, text)
    if not m:
        fail("%s: no '%s' in its output" % (what, pattern))
    return m


def xy_fields(path):
    """PENNANT's .xy output: {field: [values in zone order]}."""
    fields, cur = {}, None
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "#":
                cur = fields.setdefault(w[1], [])
            elif cur is None or len(w) != 2:
                fail("%s: not a PENNANT .xy file (line '%s')" % (path, line.strip()))
            else:
                cur.append(float(w[1]))
    return fields


def verify(app, code, text, what, wd, args):
    """The app's own verification; returns the values both runs must share."""
    if app == "xsbench":
        return found(r"Verification checksum: (\d+)", text, what)
    if app == "lulesh":
        for d in found(r"MaxRelDiff\s*=\s*(\S+)", text, what):
            if float(d) > 1e-8:
                fail("%s: symmetry check MaxRelDiff = %s > 1e-8" % (what, d))
        return found(r"Final Origin Energy\s*=\s*(\S+)", text, what)
    if app == "minife":
        found(r"solution matches analytic solution", text, what)
        return found(r"Final Resid Norm: (\S+)", text, what)
    if app == "hpcg":
        passed = re.findall(r"::Result=PASSED", text)
        if len(passed) < 2:
            fail("%s: %d of 2 'Result=PASSED' lines in its report" % (what, len(passed)))
        return found(r"Scaled Residual \[(\S+)\]", text, what)
    if app == "babelstream":
        # check_solution() prints "Validation failed" and exits 1 on a wrong
        # result; on success it prints nothing but the timings, so there is no
        # computed value to compare between the builds.
        if "Validation failed" in text:
            fail("%s: %s" % (what, [l for l in text.splitlines() if "Validation failed" in l][0]))
        return found(r"Number of elements: (\d+)", text, what)
    if app == "pennant":
        found(r"Run complete", text, what)
        got = found(r"Energy check:\s+total energy\s+=\s+(\S+)", text, what)
        got += ["%s/%s" % x for x in found(r"\(internal =\s+(\S+), kinetic =\s+(\S+)\)", text, what)]
        got += ["%s/%s" % x for x in found(r"cycle =\s+(\d+),.*\ntime  =\s+(\S+),", text, what)]
        deck = args[0]
        std = deck[:-len(".pnt")] + ".xy.std"
        if os.path.exists(std):
            xy = os.path.join(wd, os.path.basename(deck)[:-len(".pnt")] + ".xy")
            if not os.path.exists(xy):
                fail("%s: wrote no %s to compare with %s" % (what, os.path.basename(xy), std))
            mine, ref = xy_fields(xy), xy_fields(std)
            if sorted(mine) != sorted(ref):
                fail("%s: fields %s, the reference has %s" % (what, sorted(mine), sorted(ref)))
            for f in ref:
                if len(mine[f]) != len(ref[f]):
                    fail("%s: %d values of %s, the reference has %d" % (what, len(mine[f]), f, len(ref[f])))
                scale = max(abs(v) for v in ref[f])
                worst = max(range(len(ref[f])), key=lambda i: abs(mine[f][i] - ref[f][i]))
                if abs(mine[f][worst] - ref[f][worst]) > 1e-6 * scale:
                    fail("%s: %s of zone %d is %.8e, the reference %s has %.8e (largest %s %.3e)"
                         % (what, f, worst + 1, mine[f][worst], std, ref[f][worst], f, scale))
            with open(xy) as fh:
                got.append(hashlib.sha256(fh.read().encode()).hexdigest()[:16])
        return got
    if app == "nekbone":
        cg = found(r"cg:\s*(\d+)\s+(\S+)(.*)", text, what)
        starts = [float(r) for i, r, _ in cg if int(i) == 0]
        ends = [float(r) for i, r, _ in cg if int(i) != 0]
        if not starts or len(starts) != len(ends):
            fail("%s: %d CG solves started and %d finished" % (what, len(starts), len(ends)))
        for k, (r0, r1) in enumerate(zip(starts, ends)):
            if not r1 <= 1e-6 * r0:
                fail("%s: CG solve %d reduced the residual from %g only to %g (want <= 1e-6 of it)"
                     % (what, k + 1, r0, r1))
        return found(r"(nelt =\s+\d+, np =\s+\d+, nx1 =\s+\d+)", text, what) + \
            [" ".join(x.split()) for x in re.findall(r"cg:.*", text)]
    fail("%s: no verification rule" % app)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("app")
    ap.add_argument("size")
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--machine", default="ddr5")
    ap.add_argument("--json")
    ap.add_argument("--min-size", help="hetmem sim --min-size (default: hetmem's, 64K)")
    a = ap.parse_args()
    known = apps()
    if a.app not in known:
        fail("%s: unknown app (known: %s)" % (a.app, ", ".join(sorted(known))))
    spec = known[a.app]
    if a.size not in spec["sizes"]:
        fail("%s: unknown size '%s' (known: %s)" % (a.app, a.size, ", ".join(spec["sizes"])))
    appdir = os.path.join(HERE, a.app)
    # "{dir}/FILE": the file in the app's folder (args, for verify), copied
    # into each run's folder and passed by its base name (given).
    args = [x.replace("{dir}", appdir) for x in spec["sizes"][a.size]]
    given = [os.path.basename(x) if x != y else x for x, y in zip(args, spec["sizes"][a.size])]
    a.build = os.path.abspath(a.build)  # the runs change folder
    native = os.path.join(a.build, "bench", "apps", a.app)
    sim = native + ".sim"
    hetmem = os.path.join(a.build, "bin", "hetmem")
    for f in (native, sim, hetmem):
        if not os.access(f, os.X_OK):
            fail("%s is not built (cmake --build %s --target bench-apps)" % (f, a.build))
    tmp = tempfile.mkdtemp(prefix="hm-check-")
    try:
        out = os.path.join(tmp, "sim.json")
        values = {}
        for what, cmd in (("native", [native] + given),
                          ("sim", [hetmem, "sim", "-m", a.machine, "--json", out]
                           + (["--min-size", a.min_size] if a.min_size else []) + ["--", sim] + given)):
            wd = os.path.join(tmp, what)
            os.mkdir(wd)
            for x, y in zip(args, given):
                if x != y:
                    shutil.copy(x, wd)
            code, text, cpu, rss = run(cmd, wd)
            if code not in spec["exit_ok"]:
                tail = text.strip().splitlines()[-1:] or [""]
                fail("%s %s: exit status %d (%s)" % (a.app, what, code, tail[0]))
            values[what] = verify(a.app, code, text, "%s %s" % (a.app, what), wd, args)
            extra = ""
            if what == "native":
                extra = ", peak resident %.1f MiB" % (rss / 1024.0)
            else:
                extra = ", simulated %.4f s" % json.load(open(out))["runtime_s"]
            print("%s %s (%s): exit %d, verified %s, %.2f s CPU%s"
                  % (a.app, what, " ".join(given), code, " ".join(values[what]), cpu, extra))
        if values["native"] != values["sim"]:
            fail("%s: the simulated run computed %s, the native one %s" % (a.app, values["sim"], values["native"]))
        if a.json:
            shutil.copy(out, a.json)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
