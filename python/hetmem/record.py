"""Recording a command's memory accesses into a trace (ctypes over libhetmem).

    import hetmem.record
    res = hetmem.record.record(["./app", "input"], "run.hmt", backend="soft")
    res["samples"], res["exit_code"]

The C library does the work (include/hetmem/record.h, as `hetmem record`
does); errors raise HetmemError with the library's one-line detail, before
the command runs when they are about the options, the backend or the output.
"""
import ctypes

from ._lib import load
from .estimate import HetmemError

__all__ = ["record", "HetmemError"]

_MSG = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


class _Opts(ctypes.Structure):
    _fields_ = [("output", ctypes.c_char_p), ("backend", ctypes.c_char_p), ("period", ctypes.c_uint64),
                ("bind", ctypes.c_char_p), ("machine", ctypes.c_char_p), ("min_size", ctypes.c_uint64),
                ("depth", ctypes.c_uint), ("per_cpu", ctypes.c_int), ("preload", ctypes.c_char_p),
                ("on_message", _MSG), ("ctx", ctypes.c_void_p)]


_COUNTS = ("samples", "samples_with_addr", "taken", "lost", "unresolved", "allocs", "frees", "sites", "phases",
           "names", "processes", "runtime_errors", "unwritten")


class _Result(ctypes.Structure):
    _fields_ = ([("status", ctypes.c_int), ("wall_ns", ctypes.c_uint64)] +
                [(n, ctypes.c_uint64) for n in _COUNTS] +
                [("spool_limit_reached", ctypes.c_int), ("spool_limit_uncounted", ctypes.c_int),
                 ("spools", ctypes.c_int), ("spools_truncated", ctypes.c_int),
                 ("percpu_kept", ctypes.c_uint64), ("percpu_foreign", ctypes.c_uint64),
                 ("soft_stats", ctypes.c_char * 160)])


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
              1 if per_cpu else 0, _b(preload), cb, None)
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
