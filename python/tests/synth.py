"""Synthetic estimator summaries with known runtimes (as tests/unit/test_optimize.c).

Every object has windows of its own in which only it is sampled, so under
the linear model the estimate is the sum over objects (and phases) of the
window time on the device the object is on: T = sum_o t[o][p][dev(o, p)].
Device 0 is the slowest and the default.
"""
import json
import random

NAMES = {2: ["slow", "fast"], 3: ["slow", "mid", "fast"]}
LAT = {2: [300, 100], 3: [300, 200, 100]}


def instance(nobj, ndev, seed, nph=1, devcap=64 << 30):
    """Sizes 1..20 MiB, windows 10..30 ms on the slow device, 10..60% faster
    elsewhere (the last device fastest); with nph > 1 each object is active
    in a random non-empty subset of the phases 1..nph-1."""
    rng = random.Random(seed)
    objs = []
    for o in range(nobj):
        size = (1 + int(rng.random() * 20)) << 20
        t = {}
        active = [0] if nph == 1 else [p for p in range(1, nph) if rng.random() < 0.6] or [1 + o % (nph - 1)]
        for p in active:
            slow, gain = 10e6 + rng.random() * 20e6, 0.1 + 0.5 * rng.random()
            t[p] = [slow] + [slow * (1 - gain * (0.6 + 0.4 * (d == ndev - 1))) for d in range(1, ndev)]
        objs.append({"size": size, "t": t})
    return {"ndev": ndev, "nph": nph, "objects": objs, "devcap": devcap}


def summary(inst):
    """The summary JSON text of an instance."""
    nd, nph = inst["ndev"], inst["nph"]
    names, lat = NAMES[nd], LAT[nd]
    total = [sum(t[d] for o in inst["objects"] for t in o["t"].values()) for d in range(nd)]
    windows = []
    for p in range(nph):
        for i, o in enumerate(inst["objects"]):
            if p not in o["t"]:
                continue
            windows.append({"phase": p, "instructions": 1000000, "t_ns": o["t"][p],
                            "stats": [[i, d, 1000, 1000 * lat[d] * 1.4, 1000] for d in range(nd)]})
    return json.dumps({
        "format": "hetmem-estimate-summary", "version": 1, "default": 0,
        "devices": [{"name": names[d], "runtime_ns": total[d], "period": 1000, "capacity": inst["devcap"],
                     "bandwidth_gbs": 5.0 * (d + 1), "read_latency_ns": lat[d]} for d in range(nd)],
        "phases": ["(no phase)"] + ["phase%d" % p for p in range(1, nph)],
        "objects": [{"site": "0x%016x" % (0x1000 + i), "name": "obj%d" % i, "size": o["size"], "allocations": 1,
                     "pages": [10] * 100} for i, o in enumerate(inst["objects"])],
        "windows": windows})


def runtime_ns(inst, where):
    """Known linear-model runtime when object i sits on device where[i]."""
    return sum(t[where[i]] for i, o in enumerate(inst["objects"]) for t in o["t"].values())
