"""Recording a command's memory accesses into a trace, or running it with a
placement (ctypes over libhetmem).

    import hetmem.record
    res = hetmem.record.record(["./app", "input"], "run.hmt", backend="soft")
    res["samples"], res["exit_code"]
    res = hetmem.record.run(["./app", "input"], "placement.json", capacity={"hbm": 16 << 30})
    res["placements"][0]["device"], res["unmatched_rules"]

The C library does the work (include/hetmem/record.h, as `hetmem record`
does); errors raise HetmemError with the library's one-line detail, before
the command runs when they are about the options, the backend or the output.
"""
import ctypes

from ._lib import load
from .estimate import HetmemError

__all__ = ["record", "run", "HetmemError"]

_MSG = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


class _Placement(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_uint64), ("size", ctypes.c_uint64), ("site", ctypes.c_uint64),
                ("bound_bytes", ctypes.c_uint64), ("name", ctypes.c_char_p), ("phase", ctypes.c_char_p),
                ("requested", ctypes.c_char_p), ("device", ctypes.c_char_p), ("flags", ctypes.c_uint),
                ("nodes", ctypes.c_uint64), ("source", ctypes.c_char_p)]


class _Device(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("capacity", ctypes.c_uint64), ("peak", ctypes.c_uint64),
                ("at_exit", ctypes.c_uint64), ("processes", ctypes.c_int), ("nodes", ctypes.c_uint64)]


_PLACED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_Placement))
# Flags of a placement (HM_PLACED_* in hetmem/record.h).
_FLAGS = (("spilled", 1), ("moved", 2), ("phase_rule", 4), ("unbound", 8), ("global", 16), ("failed", 32))


class _Opts(ctypes.Structure):
    _fields_ = [("output", ctypes.c_char_p), ("backend", ctypes.c_char_p), ("period", ctypes.c_uint64),
                ("bind", ctypes.c_char_p), ("machine", ctypes.c_char_p), ("min_size", ctypes.c_uint64),
                ("depth", ctypes.c_uint), ("per_cpu", ctypes.c_int), ("preload", ctypes.c_char_p),
                ("on_message", _MSG), ("ctx", ctypes.c_void_p), ("placement", ctypes.c_char_p),
                ("capacity", ctypes.c_char_p), ("on_placement", _PLACED)]


_COUNTS = ("samples", "samples_with_addr", "taken", "lost", "unresolved", "allocs", "frees", "sites", "phases",
           "names", "processes", "runtime_errors", "unwritten")


class _Result(ctypes.Structure):
    _fields_ = ([("status", ctypes.c_int), ("wall_ns", ctypes.c_uint64)] +
                [(n, ctypes.c_uint64) for n in _COUNTS] +
                [("spool_limit_reached", ctypes.c_int), ("spool_limit_uncounted", ctypes.c_int),
                 ("spools", ctypes.c_int), ("spools_truncated", ctypes.c_int),
                 ("percpu_kept", ctypes.c_uint64), ("percpu_foreign", ctypes.c_uint64),
                 ("soft_stats", ctypes.c_char * 160),
                 ("placements", ctypes.c_uint64), ("spilled", ctypes.c_uint64)])


_proto_done = False


def _lib():
    global _proto_done
    lib = load()
    if not _proto_done:
        P, I = ctypes.c_void_p, ctypes.c_int
        sig = {
            "hm_recorder_open": (I, [ctypes.POINTER(P), ctypes.POINTER(_Opts), ctypes.POINTER(ctypes.c_char_p)]),
            "hm_recorder_run": (I, [P, ctypes.POINTER(_Result)]),
            "hm_recorder_close": (None, [P]),
            "hm_recorder_backend": (ctypes.c_char_p, [P]),
            "hm_recorder_exit_code": (I, [I]),
            "hm_recorder_ndevices": (I, [P]),
            "hm_recorder_device": (I, [P, I, ctypes.POINTER(_Device)]),
            "hm_recorder_unmatched": (ctypes.c_char_p, [P]),
            "hm_errdetail": (ctypes.c_char_p, []),
            "hm_strerror": (ctypes.c_char_p, [I]),
        }
        for name, (res, args) in sig.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        _proto_done = True
    return lib


def _fail(lib, rc):
    d = lib.hm_errdetail()
    raise HetmemError((d or lib.hm_strerror(rc)).decode(errors="replace"))


def _b(s):
    return None if s is None else str(s).encode()


def record(argv, output, backend="auto", period=0, bind=None, machine=None, min_size=0, depth=0,
           per_cpu=False, preload=None, on_message=None):
    """Runs argv (a list; argv[0] looked up through PATH) under the hetmem
    runtime and writes its trace to output. The options are those of
    `hetmem record` (period in events, or nanoseconds for soft and perf-sw;
    0 and None take the defaults). on_message(str) gets the runtimes'
    messages. Returns the counts as a dict: samples, allocs, ..., status
    (the wait status), exit_code (the command's, or 128 + signal), wall_s
    and backend. A command that fails is recorded all the same."""
    lib = _lib()
    args = [_b(a) for a in argv]
    if not args:
        raise HetmemError("record: empty command")
    c_argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    cb = _MSG(lambda ctx, msg: on_message(msg.decode(errors="replace"))) if on_message else _MSG()
    o = _Opts(_b(output), _b(backend), int(period), _b(bind), _b(machine), int(min_size), int(depth),
              1 if per_cpu else 0, _b(preload), cb, None, None, None, _PLACED())
    r = ctypes.c_void_p()
    rc = lib.hm_recorder_open(ctypes.byref(r), ctypes.byref(o), c_argv)
    if rc < 0:
        _fail(lib, rc)
    try:
        chosen = lib.hm_recorder_backend(r).decode()
        res = _Result()
        rc = lib.hm_recorder_run(r, ctypes.byref(res))
        if rc < 0:
            _fail(lib, rc)
    finally:
        lib.hm_recorder_close(r)
    out = {n: getattr(res, n) for n in _COUNTS}
    out.update(status=res.status, exit_code=lib.hm_recorder_exit_code(res.status), wall_s=res.wall_ns / 1e9,
               backend=chosen, spools=res.spools, spools_truncated=res.spools_truncated,
               spool_limit_reached=res.spool_limit_reached, spool_limit_uncounted=res.spool_limit_uncounted,
               soft_stats=res.soft_stats.decode(errors="replace"))
    return out


def _nodes(mask):
    return [i for i in range(64) if mask >> i & 1]


def _s(b):
    return None if b is None else b.decode(errors="replace")


def run(argv, placement, capacity=None, min_size=0, preload=None, on_message=None):
    """Runs argv with its objects bound to memory devices per the placement
    file, as `hetmem run` does (nothing sampled or traced). capacity maps a
    device of the placement to its bytes (default: its nodes' memory).
    Returns a dict: placements (one dict per object placed: addr, size,
    site, name, phase, requested, device, nodes, bound_bytes, source and the
    flags spilled, moved, phase_rule, unbound, global, failed), devices (name,
    capacity, peak, at_exit, processes, nodes), unmatched_rules, status,
    exit_code, wall_s, unwritten and spool_limit_reached."""
    lib = _lib()
    args = [_b(a) for a in argv]
    if not args:
        raise HetmemError("run: empty command")
    c_argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    cap = ",".join("%s=%d" % (d, int(v)) for d, v in (capacity or {}).items())
    placed = []

    def on_placement(ctx, pp):
        p = pp.contents
        e = dict(addr=p.addr, size=p.size, site="0x%016x" % p.site, name=_s(p.name), phase=_s(p.phase),
                 requested=_s(p.requested), device=_s(p.device), nodes=_nodes(p.nodes),
                 bound_bytes=p.bound_bytes, source=_s(p.source))
        e.update((k, bool(p.flags & f)) for k, f in _FLAGS)
        placed.append(e)

    cb = _MSG(lambda ctx, msg: on_message(msg.decode(errors="replace"))) if on_message else _MSG()
    pcb = _PLACED(on_placement)
    o = _Opts(None, None, 0, None, None, int(min_size), 0, 0, _b(preload), cb, None, _b(placement), _b(cap), pcb)
    r = ctypes.c_void_p()
    rc = lib.hm_recorder_open(ctypes.byref(r), ctypes.byref(o), c_argv)
    if rc < 0:
        _fail(lib, rc)
    try:
        res = _Result()
        rc = lib.hm_recorder_run(r, ctypes.byref(res))
        if rc < 0:
            _fail(lib, rc)
        devices = []
        d = _Device()
        for i in range(lib.hm_recorder_ndevices(r)):
            lib.hm_recorder_device(r, i, ctypes.byref(d))
            devices.append(dict(name=_s(d.name), capacity=d.capacity, peak=d.peak, at_exit=d.at_exit,
                                processes=d.processes, nodes=_nodes(d.nodes)))
        unmatched = [u for u in _s(lib.hm_recorder_unmatched(r)).split("\n") if u]
    finally:
        lib.hm_recorder_close(r)
    return dict(placements=placed, devices=devices, unmatched_rules=unmatched, status=res.status,
                exit_code=lib.hm_recorder_exit_code(res.status), wall_s=res.wall_ns / 1e9, unwritten=res.unwritten,
                spool_limit_reached=res.spool_limit_reached)
