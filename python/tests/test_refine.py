"""hetmem.optimize.refine: the measured loop of hetmem optimize --refine with
a Python measure, on the hand-derived case of tests/unit/test_optimize.c
(test_refine): three 128 MiB objects with 45%, 35% and 20% of one class's
misses, near (the default, room for two objects) and far. Round 1 picks
object 0 on far (3.84 ms), measured 8.0 ms; round 2 object 2 on far (7.809
ms on the model calibrated on round 1), measured 8.3 ms; the last search
picks object 2 on far again (7.947 ms on both runs), so round 1's placement,
the fastest measured, is returned, estimated at its 8.0 ms."""
import json
import os
import tempfile

import pytest

from hetmem.estimate import Estimator
from hetmem.optimize import UNLIMITED, refine

SHARE = (45, 35, 20)


def summary():
    wins = []
    for w in range(20):
        stats = [[o, d, m, (36 if d else 30) * m, m, (36 if d else 30) * m, 0, m]
                 for d in range(2) for o, m in enumerate(SHARE)]
        wins.append({"phase": 0, "region": w, "t_ns": [0.32e6, 0.42666667e6], "stats": stats})
    return {"format": "hetmem-estimate-summary", "version": 1, "default": 0,
            "devices": [{"name": "near", "runtime_ns": 6.4e6, "period": 1000, "bandwidth_gbs": 20,
                         "read_latency_ns": 100},
                        {"name": "far", "runtime_ns": 8.5333333e6, "period": 1000, "bandwidth_gbs": 15,
                         "read_latency_ns": 100}],
            "objects": [{"site": "0x%x" % (o + 1), "size": 128 << 20} for o in range(3)],
            "windows": wins}


def on_far(placement):
    """The set of objects (0, 1, 2) a placement puts on far."""
    return frozenset(int(r["site"], 16) - 1 for r in placement.get("rules", []) if r["device"] == "far")


@pytest.fixture
def est():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "s.json")
        with open(p, "w") as f:
            json.dump(summary(), f)
        e = Estimator(summary=p)
        yield e
        e.close()


def test_best_measured_round_is_returned(est):
    truth = {frozenset({0}): 8.0e-3, frozenset({2}): 8.3e-3}
    ran = []

    def measure(placement, k):
        ran.append((k, on_far(placement)))
        return truth[on_far(placement)]

    r = refine(est, measure, rounds=2, capacity={"near": 256 << 20, "far": UNLIMITED}, budget=2000)
    assert ran == [(1, frozenset({0})), (2, frozenset({2}))]
    assert r["kept"] == "measured" and r["round"] == 1 and r["measured_s"] == pytest.approx(8.0e-3)
    assert on_far(r["placement"]) == frozenset({0})
    assert r["runtime_s"] == pytest.approx(8.0e-3, rel=1e-4)
    assert r["last"]["round"] == 2 and r["last"]["runtime_s"] == pytest.approx(7.947e-3, rel=1e-3)
    assert [x["predicted_s"] for x in r["rounds"]] == pytest.approx([3.84e-3, 7.809e-3], rel=1e-3)


def test_measure_errors_propagate(est):
    def measure(placement, k):
        raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError, match="the run failed"):
        refine(est, measure, rounds=1, capacity={"near": 256 << 20}, budget=2000)
    with pytest.raises(ValueError, match="not a positive time"):
        refine(est, lambda p, k: 0, rounds=1, capacity={"near": 256 << 20}, budget=2000)
