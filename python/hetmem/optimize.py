"""Placement search under capacities (ctypes over libhetmem's hm_optimize_run and hm_optimize_refine).

    from hetmem.estimate import Estimator
    from hetmem.optimize import optimize
    est = Estimator(summary="app.summary.json")
    r = optimize(est, "exhaustive", capacity={"mcdram": 64 << 20})
    r["runtime_s"], r["placement"]

refine() is the measured loop of hetmem optimize --refine with a caller's
measure(placement, round) -> seconds (a run on hardware, a simulation).

The C library does the search (include/hetmem/optimize.h, docs/optimizer.md);
errors raise HetmemError with the library's one-line detail.
"""
import ctypes
import json

from .estimate import HetmemError, _Calibration, _check, _lib, _model, _Estimate

__all__ = ["optimize", "reference", "refine", "ALGOS", "REFERENCES", "UNLIMITED", "HetmemError"]

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


class _Round(ctypes.Structure):
    _fields_ = [("predicted_ns", ctypes.c_double), ("measured_ns", ctypes.c_double), ("calibrated", _Estimate),
                ("cal", _Calibration), ("placement_json", ctypes.c_char_p)]


class _Refine(ctypes.Structure):
    _fields_ = [("result", _Result), ("why", ctypes.c_int), ("returned_round", ctypes.c_int),
                ("best_round", ctypes.c_int), ("last_round", ctypes.c_int), ("last", _Estimate),
                ("nrounds", ctypes.c_int), ("rounds", ctypes.POINTER(_Round))]


_Measure = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_Result),
                            ctypes.POINTER(ctypes.c_double))

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
        lib.hm_optimize_refine.restype = ctypes.c_int
        lib.hm_optimize_refine.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Opts), ctypes.c_int, _Measure,
                                           ctypes.c_void_p, ctypes.POINTER(_Refine)]
        lib.hm_optimize_refine_free.restype = None
        lib.hm_optimize_refine_free.argtypes = [ctypes.POINTER(_Refine)]
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


def _est(e):
    return {"runtime_s": e.runtime_ns / 1e9, "ci_s": (e.lo_ns / 1e9, e.hi_ns / 1e9)}


def refine(est, measure, rounds=1, algo="anneal", capacity=None, phased=False, budget=0, time_s=0.0, seed=1,
           split=False):
    """The measured loop of hetmem optimize --refine (docs/optimizer.md):
    `rounds` times, search, run the pick with measure(placement, round) ->
    measured seconds, and calibrate the default model on every run so far;
    then search once more. Returns the fastest measured round's placement
    unless the last search's unmeasured pick lies below it across its whole
    95% interval. `est` stays calibrated on the runs.

    Returns optimize()'s dict for the placement returned (runtime_s and ci_s:
    the calibrated model's estimate, in sample for a measured round) with
    kept ("measured" or "search"), round (the round returned, or None),
    measured_s (None for "search"), last (the last search's pick:
    runtime_s, ci_s, round) and rounds (predicted_s before the run,
    measured_s, calibrated_s, mix, overlap, placement). An exception in
    measure stops the loop and is raised again.
    """
    lib = _olib()
    o, keep = _opts(est, algo, capacity, phased, "default", budget, time_s, seed, split)
    raised = []

    def cb(_ctx, k, pick, out):
        try:
            txt = ctypes.cast(pick.contents.placement_json, ctypes.c_char_p).value.decode()
            t = float(measure(json.loads(txt), k))
            if not t > 0:
                raise ValueError("measure returned %r for round %d: not a positive time in seconds" % (t, k))
            out[0] = t * 1e9
            return 0
        except BaseException as x:  # stop the loop; raised again below
            raised.append(x)
            return -1016  # HM_ENOTIMPL stands for "the caller's measure failed"

    fn = _Measure(cb)
    r = _Refine()
    rc = lib.hm_optimize_refine(est._h, ctypes.byref(o), int(rounds), fn, None, ctypes.byref(r))
    del keep
    if raised:
        raise raised[0]
    _check(lib, rc)
    try:
        rs = [r.rounds[k] for k in range(r.nrounds)]
        out = {"rounds": [{"round": k + 1, "predicted_s": x.predicted_ns / 1e9, "measured_s": x.measured_ns / 1e9,
                           "calibrated_s": x.calibrated.runtime_ns / 1e9, "mix": x.cal.mix, "overlap": x.cal.overlap,
                           "placement": json.loads(x.placement_json.decode())} for k, x in enumerate(rs)],
               "kept": "measured" if r.returned_round else "search",
               "round": r.returned_round or None,
               "measured_s": rs[r.returned_round - 1].measured_ns / 1e9 if r.returned_round else None,
               "last": dict(_est(r.last), round=r.last_round or None)}
        res = _Result()
        ctypes.memmove(ctypes.byref(res), ctypes.byref(r.result), ctypes.sizeof(_Result))
        ctypes.memset(ctypes.byref(r.result), 0, ctypes.sizeof(_Result))
        out.update(_out(lib, res, est))
        return out
    finally:
        lib.hm_optimize_refine_free(ctypes.byref(r))
