"""Runtime estimates of data placements from per-device traces (ctypes over libhetmem).

    from hetmem.estimate import Estimator
    est = Estimator(["app.ddr.hmt", "app.hbm.hmt"])       # or Estimator(summary="s.json")
    est.estimate({"default": "ddr", "rules": [{"name": "a", "device": "hbm"}]})
    s = est.state()                                         # incremental, for search and RL
    s.move(est.object_index(name="a"), "hbm")               # -> estimated runtime in seconds

The C library does the work (include/hetmem/estimate.h); errors raise
HetmemError with the library's one-line detail.
"""
import ctypes
import json
import os

from ._lib import load

__all__ = ["Estimator", "State", "HetmemError", "MODELS"]

MODELS = ("linear", "default")


class HetmemError(RuntimeError):
    """A hetmem call failed; the message is the library's detail."""


class _Estimate(ctypes.Structure):
    _fields_ = [("runtime_ns", ctypes.c_double), ("lo_ns", ctypes.c_double),
                ("hi_ns", ctypes.c_double), ("migration_ns", ctypes.c_double),
                ("sampling_ns", ctypes.c_double), ("model_ns", ctypes.c_double), ("spread_ns", ctypes.c_double)]


class _Calibration(ctypes.Structure):
    _fields_ = [("overlap", ctypes.c_double), ("mean_err_before", ctypes.c_double),
                ("mean_err_after", ctypes.c_double), ("mix", ctypes.c_double), ("mix_cap", ctypes.c_double)]


class _Object(ctypes.Structure):
    _fields_ = [("site", ctypes.c_uint64), ("name", ctypes.c_char_p), ("size", ctypes.c_uint64),
                ("allocations", ctypes.c_uint64), ("samples", ctypes.c_double), ("movable", ctypes.c_int),
                ("source", ctypes.c_char_p)]


_proto_done = False


def _lib():
    global _proto_done
    lib = load()
    if _proto_done:
        return lib
    P, I, D, S, U64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_char_p, ctypes.c_uint64
    sig = {
        "hm_estimator_open": (I, [ctypes.POINTER(P), ctypes.POINTER(S), I, P]),
        "hm_estimator_open_summary": (I, [ctypes.POINTER(P), S]),
        "hm_estimator_save": (I, [P, S]),
        "hm_estimator_close": (None, [P]),
        "hm_estimator_ndevices": (I, [P]),
        "hm_estimator_device_name": (S, [P, I]),
        "hm_estimator_device_capacity": (U64, [P, I]),
        "hm_estimator_measured_ns": (D, [P, I]),
        "hm_estimator_default_device": (I, [P]),
        "hm_estimator_nphases": (I, [P]),
        "hm_estimator_phase_name": (S, [P, I]),
        "hm_estimator_nobjects": (I, [P]),
        "hm_estimator_object": (I, [P, I, ctypes.POINTER(_Object)]),
        "hm_estimator_estimate": (I, [P, P, I, ctypes.POINTER(_Estimate), P]),
        "hm_estimator_calibrate": (I, [P, ctypes.POINTER(P), ctypes.POINTER(D), I, ctypes.POINTER(_Calibration)]),
        "hm_placement_parse": (I, [ctypes.POINTER(P), S, S, ctypes.POINTER(S), I]),
        "hm_placement_close": (None, [P]),
        "hm_est_state_open": (I, [ctypes.POINTER(P), P, I, I]),
        "hm_est_state_close": (None, [P]),
        "hm_est_state_copy": (I, [P, P]),
        "hm_est_state_move": (I, [P, I, I, I, I, ctypes.POINTER(D)]),
        "hm_est_state_estimate": (I, [P, ctypes.POINTER(_Estimate)]),
        "hm_est_state_runtime": (D, [P]),
        "hm_est_state_device": (I, [P, I, I, ctypes.POINTER(I)]),
        "hm_est_state_bytes": (U64, [P, I]),
        "hm_est_state_placement_json": (P, [P]),
        "hm_errdetail": (S, []),
        "hm_strerror": (S, [I]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    lib._free = libc.free
    _proto_done = True
    return lib


def _check(lib, rc):
    if rc < 0:
        detail = lib.hm_errdetail()
        raise HetmemError((detail or lib.hm_strerror(rc)).decode())
    return rc


def _model(name):
    if name not in MODELS:
        raise ValueError("unknown model %r (models: %s)" % (name, ", ".join(MODELS)))
    return MODELS.index(name)


def _result(r):
    return {"runtime_s": r.runtime_ns / 1e9, "ci_s": (r.lo_ns / 1e9, r.hi_ns / 1e9),
            "migration_s": r.migration_ns / 1e9}


class Estimator:
    """An estimator over N device traces (one run per device), or a saved summary."""

    def __init__(self, traces=None, summary=None):
        self._lib = _lib()
        self._h = ctypes.c_void_p()
        if (traces is None) == (summary is None):
            raise ValueError("give either traces or summary")
        if summary is not None:
            _check(self._lib, self._lib.hm_estimator_open_summary(ctypes.byref(self._h), os.fsencode(summary)))
        else:
            arr = (ctypes.c_char_p * len(traces))(*[os.fsencode(t) for t in traces])
            _check(self._lib, self._lib.hm_estimator_open(ctypes.byref(self._h), arr, len(traces), None))

    def close(self):
        if self._h:
            self._lib.hm_estimator_close(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def devices(self):
        """Device names, in the traces' order."""
        n = self._lib.hm_estimator_ndevices(self._h)
        return [self._lib.hm_estimator_device_name(self._h, d).decode() for d in range(n)]

    @property
    def default_device(self):
        return self.devices[self._lib.hm_estimator_default_device(self._h)]

    @property
    def phases(self):
        n = self._lib.hm_estimator_nphases(self._h)
        return [self._lib.hm_estimator_phase_name(self._h, p).decode() for p in range(n)]

    def measured_s(self, device):
        return self._lib.hm_estimator_measured_ns(self._h, self.device_index(device)) / 1e9

    def capacity(self, device):
        """Bytes of the device available to the traced process (0: unknown)."""
        return self._lib.hm_estimator_device_capacity(self._h, self.device_index(device))

    def device_index(self, device):
        if isinstance(device, int):
            if not 0 <= device < len(self.devices):
                raise ValueError("device index %d out of range" % device)
            return device
        try:
            return self.devices.index(device)
        except ValueError:
            raise ValueError("%r is not a device of the traces (devices: %s)" % (device, ", ".join(self.devices)))

    @property
    def objects(self):
        """Objects, hottest first; the last one is the untracked data (not movable)."""
        out = []
        for i in range(self._lib.hm_estimator_nobjects(self._h)):
            o = _Object()
            _check(self._lib, self._lib.hm_estimator_object(self._h, i, ctypes.byref(o)))
            out.append({"index": i, "site": o.site, "name": o.name.decode() if o.name else None,
                        "size": o.size, "allocations": o.allocations, "samples": o.samples,
                        "movable": bool(o.movable),
                        "source": o.source.decode() if o.source else None})
        return out

    def object_index(self, name=None, site=None):
        for o in self.objects:
            if o["movable"] and ((name is not None and o["name"] == name) or (name is None and o["site"] == site)):
                return o["index"]
        raise KeyError("no object with name %r / site %r" % (name, site))

    def save(self, path):
        _check(self._lib, self._lib.hm_estimator_save(self._h, os.fsencode(path)))

    def _placement(self, placement):
        """A placement handle (closed by the caller) from a dict, JSON text or a path."""
        if isinstance(placement, dict):
            text = json.dumps(placement)
        elif isinstance(placement, str) and placement.lstrip().startswith("{"):
            text = placement
        else:
            with open(placement) as f:
                text = f.read()
        devs = self.devices
        arr = (ctypes.c_char_p * len(devs))(*[d.encode() for d in devs])
        pl = ctypes.c_void_p()
        _check(self._lib, self._lib.hm_placement_parse(ctypes.byref(pl), b"placement", text.encode(), arr, len(devs)))
        return pl

    def estimate(self, placement, model="default"):
        """Estimate of a placement: a dict in the placement-file format, JSON text or a path.
        The dict also has the interval's terms: sampling_s, model_s and spread_s."""
        pl = self._placement(placement)
        try:
            r = _Estimate()
            _check(self._lib, self._lib.hm_estimator_estimate(self._h, pl, _model(model), ctypes.byref(r), None))
        finally:
            self._lib.hm_placement_close(pl)
        out = _result(r)
        out.update(sampling_s=r.sampling_ns / 1e9, model_s=r.model_ns / 1e9, spread_s=r.spread_ns / 1e9)
        return out

    def calibrate(self, runs):
        """Calibrates the default model on measured runs of mixed placements, a list of
        (placement, measured seconds) (docs/estimator.md, "Calibration on measured mixed runs");
        every later estimate and state uses it, and [] undoes it. Returns the fitted values:
        overlap, mix, mix_cap, mean_error_before, mean_error_after."""
        pls = []
        try:
            for placement, _ in runs:
                pls.append(self._placement(placement))
            arr = (ctypes.c_void_p * max(len(pls), 1))(*pls)
            ns = (ctypes.c_double * max(len(pls), 1))(*[float(t) * 1e9 for _, t in runs])
            cal = _Calibration()
            _check(self._lib, self._lib.hm_estimator_calibrate(self._h, arr, ns, len(pls), ctypes.byref(cal)))
        finally:
            for pl in pls:
                self._lib.hm_placement_close(pl)
        return {"overlap": cal.overlap, "mix": cal.mix, "mix_cap": cal.mix_cap,
                "mean_error_before": cal.mean_err_before, "mean_error_after": cal.mean_err_after}

    def state(self, model="default", phased=False):
        """An incremental state with everything on the default device."""
        return State(self, model, phased)


class State:
    """An assignment of objects to devices (per phase when phased), re-estimated on each move."""

    def __init__(self, est, model="default", phased=False):
        self._est = est
        self._lib = est._lib
        self._h = ctypes.c_void_p()
        self.model, self.phased = model, bool(phased)
        _check(self._lib, self._lib.hm_est_state_open(ctypes.byref(self._h), est._h, _model(model), int(self.phased)))

    def close(self):
        if self._h:
            self._lib.hm_est_state_close(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def move(self, obj, device, pct=100, phase=None):
        """Moves object `obj` (index) to `device` (pct% of its pages); returns the estimate in seconds."""
        p = -1 if phase is None else (self._est.phases.index(phase) if isinstance(phase, str) else int(phase))
        out = ctypes.c_double()
        _check(self._lib, self._lib.hm_est_state_move(self._h, p, int(obj), self._est.device_index(device),
                                                      int(pct), ctypes.byref(out)))
        return out.value / 1e9

    @property
    def runtime_s(self):
        return self._lib.hm_est_state_runtime(self._h) / 1e9

    def estimate(self):
        r = _Estimate()
        _check(self._lib, self._lib.hm_est_state_estimate(self._h, ctypes.byref(r)))
        return _result(r)

    def device(self, obj, phase=None):
        """(device name, percent of pages there) of an object."""
        p = -1 if phase is None else (self._est.phases.index(phase) if isinstance(phase, str) else int(phase))
        pct = ctypes.c_int()
        d = _check(self._lib, self._lib.hm_est_state_device(self._h, p, int(obj), ctypes.byref(pct)))
        return self._est.devices[d], pct.value

    def bytes_on(self, device):
        return self._lib.hm_est_state_bytes(self._h, self._est.device_index(device))

    def copy(self):
        s = State(self._est, self.model, self.phased)
        _check(self._lib, self._lib.hm_est_state_copy(s._h, self._h))
        return s

    def placement(self):
        """The assignment as a placement dict (site/name rules, per-phase rules when phased)."""
        p = self._lib.hm_est_state_placement_json(self._h)
        if not p:
            raise MemoryError("placement JSON")
        try:
            return json.loads(ctypes.cast(p, ctypes.c_char_p).value.decode())
        finally:
            self._lib._free(p)
