"""Placement search under capacities (ctypes over libhetmem's hm_optimize_run).

    from hetmem.estimate import Estimator
    from hetmem.optimize import optimize
    est = Estimator(summary="app.summary.json")
    r = optimize(est, "exhaustive", capacity={"mcdram": 64 << 20})
    r["runtime_s"], r["placement"]

The C library does the search (include/hetmem/optimize.h, docs/optimizer.md);
errors raise HetmemError with the library's one-line detail.
"""
import ctypes
import json

from .estimate import HetmemError, _check, _lib, _model, _Estimate

__all__ = ["optimize", "reference", "ALGOS", "REFERENCES", "UNLIMITED", "HetmemError"]

ALGOS = ("rl", "greedy", "anneal", "exhaustive", "random")
REFERENCES = ("default", "slowest", "fastest", "first_touch")
UNLIMITED = (1 << 64) - 1


class _Opts(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_int), ("model", ctypes.c_int), ("phased", ctypes.c_int), ("split", ctypes.c_int),
                ("capacity", ctypes.POINTER(ctypes.c_uint64)), ("budget", ctypes.c_uint64),
                ("time_s", ctypes.c_double), ("seed", ctypes.c_uint64),
                ("policy_in", ctypes.c_char_p), ("policy_out", ctypes.c_char_p), ("split_step", ctypes.c_int)]


class _Result(ctypes.Structure):
    _fields_ = [("state", ctypes.c_void_p), ("placement_json", ctypes.c_void_p), ("estimate", _Estimate),
                ("estimator_calls", ctypes.c_uint64), ("wall_s", ctypes.c_double), ("complete", ctypes.c_int),
                ("episodes", ctypes.c_uint64)]


_proto_done = False


def _olib():
    global _proto_done
    lib = _lib()
    if not _proto_done:
        for name, args in (("hm_optimize_run", [ctypes.c_void_p, ctypes.POINTER(_Opts), ctypes.POINTER(_Result)]),
                           ("hm_optimize_reference", [ctypes.c_void_p, ctypes.POINTER(_Opts), ctypes.c_int,
                                                      ctypes.POINTER(_Result)])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = ctypes.c_int, args
        lib.hm_optimize_result_free.restype = None
        lib.hm_optimize_result_free.argtypes = [ctypes.POINTER(_Result)]
        _proto_done = True
    return lib


def _opts(est, algo, capacity, phased, model, budget, time_s, seed, split=0):
    if algo not in ALGOS:
        raise ValueError("unknown algorithm %r (algorithms: %s)" % (algo, ", ".join(ALGOS)))
    o = _Opts(algo=ALGOS.index(algo), model=_model(model), phased=int(bool(phased)),
              budget=int(budget), time_s=float(time_s), seed=int(seed), split=int(bool(split)),
              split_step=0 if split is True or not split else int(split))
    keep = None
    if capacity is not None:
        caps = []
        for d in est.devices:
            c = capacity.get(d)
            if c is None:
                c = est.capacity(d) or UNLIMITED
            caps.append(int(c))
        for d in capacity:
            est.device_index(d)
        keep = (ctypes.c_uint64 * len(caps))(*caps)
        o.capacity = keep
    return o, keep


def _out(lib, r, est):
    try:
        txt = ctypes.cast(r.placement_json, ctypes.c_char_p).value.decode()
        return {"runtime_s": r.estimate.runtime_ns / 1e9,
                "ci_s": (r.estimate.lo_ns / 1e9, r.estimate.hi_ns / 1e9),
                "migration_s": r.estimate.migration_ns / 1e9, "estimator_calls": r.estimator_calls,
                "wall_s": r.wall_s, "complete": bool(r.complete), "episodes": r.episodes,
                "placement": json.loads(txt)}
    finally:
        lib.hm_optimize_result_free(ctypes.byref(r))


def optimize(est, algo="rl", capacity=None, phased=False, model="default", budget=0, time_s=0.0, seed=1,
             split=False):
    """Runs one search on Estimator `est`.

    capacity: {device: bytes}; devices left out keep the traces' capacity
    (None: all do). budget: estimator calls (0: the algorithm's default).
    split: True for page splits on the default grid (10%), or the grid step
    in percent (hetmem optimize --split, --split-step).
    Returns a dict: runtime_s, ci_s, migration_s, estimator_calls, wall_s,
    complete, episodes, placement (a placement-file dict).
    """
    lib = _olib()
    o, keep = _opts(est, algo, capacity, phased, model, budget, time_s, seed, split)
    r = _Result()
    _check(lib, lib.hm_optimize_run(est._h, ctypes.byref(o), ctypes.byref(r)))
    del keep
    return _out(lib, r, est)


def reference(est, which, capacity=None, phased=False, model="default"):
    """A reference placement ("default", "slowest", "fastest" or "first_touch"), as optimize()."""
    if which not in REFERENCES:
        raise ValueError("unknown reference %r (references: %s)" % (which, ", ".join(REFERENCES)))
    lib = _olib()
    o, keep = _opts(est, "greedy", capacity, phased, model, 0, 0.0, 1)
    r = _Result()
    _check(lib, lib.hm_optimize_reference(est._h, ctypes.byref(o), REFERENCES.index(which), ctypes.byref(r)))
    del keep
    return _out(lib, r, est)
