"""ctypes binding of libpshuffle. Internal: use pshuffle.Shuffler."""
import ctypes
import ctypes.util
import os
import shutil
from ctypes import (POINTER, Structure, byref, c_char_p, c_double, c_int, c_int32,
                    c_size_t, c_uint32, c_uint64, c_void_p)

PS_Q_CONST, PS_Q_EXP, PS_Q_LINEAR, PS_Q_TABLE = 0, 1, 2, 3
PS_CONFIG_VERSION = 1


class Schedule(Structure):
    _fields_ = [("kind", c_int), ("q0", c_double), ("q_rate", c_double), ("q_min", c_double),
                ("q_table", POINTER(c_double)), ("q_table_len", c_uint32)]


class Config(Structure):
    _fields_ = [("version", c_uint32), ("seed", c_uint64), ("q", Schedule), ("store_dir", c_char_p),
                ("window_bytes", c_uint64), ("fsync", c_int), ("resume", c_int),
                ("hook", c_void_p), ("hook_arg", c_void_p), ("progress_thread", c_int)]


class Sample(Structure):
    _fields_ = [("id", c_uint64), ("label", c_int32), ("size", c_uint64), ("hash", c_uint64)]


class Stats(Structure):
    _fields_ = [("epoch", c_uint64), ("q", c_double),
                ("samples_sent", c_uint64), ("samples_recv", c_uint64),
                ("bytes_sent", c_uint64), ("bytes_recv", c_uint64), ("samples_kept", c_uint64),
                ("exchange_ns", c_uint64), ("overlap_ns", c_uint64), ("blocked_ns", c_uint64),
                ("peak_samples", c_uint64), ("peak_bytes", c_uint64),
                ("chunks_sent", c_uint64), ("chunks_recv", c_uint64),
                ("rounds", c_uint64), ("bytes_recv_overlapped", c_uint64)]


_HERE = os.path.dirname(os.path.abspath(__file__))
_FILE = "libpshuffle.so"


def _read_version():
    try:
        with open(os.path.join(_HERE, "VERSION")) as f:
            return f.read().strip()
    except OSError:
        return "unknown"


VERSION = _read_version()


def candidates():
    """Where libpshuffle.so is looked for before the linker's path: next to
    the package; relative to the prefix it is installed in
    (PREFIX/lib/python3.X/dist-packages/pshuffle -> PREFIX/lib) or to the
    source tree it sits in (pshuffle/python/pshuffle -> build/lib); next to
    the `pshuffle` program on PATH (PREFIX/bin -> PREFIX/lib)."""
    yield os.path.join(_HERE, _FILE)
    d = _HERE
    for _ in range(4):
        d = os.path.dirname(d)
        yield os.path.join(d, "lib", _FILE)
        yield os.path.join(d, "build", "lib", _FILE)
    exe = shutil.which("pshuffle")
    if exe:
        yield os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(exe)), "..", "lib", _FILE))


def _find():
    path = os.environ.get("PSHUFFLE_LIB")
    if path:
        if not os.path.exists(path):
            raise ImportError("pshuffle: PSHUFFLE_LIB=%s: no such file" % path)
        return path
    for p in candidates():
        if os.path.exists(p):
            return p
    found = ctypes.util.find_library("pshuffle")
    if not found:
        raise ImportError("pshuffle: libpshuffle.so not found next to the package, under its prefix, "
                          "next to the 'pshuffle' program or in the linker's path: install it "
                          "(make install) or set PSHUFFLE_LIB to its path")
    return found


def load():
    # MPI must be loaded (globally, for Open MPI's plugins) before us.
    from mpi4py import MPI  # noqa: F401
    lib = ctypes.CDLL(_find(), mode=ctypes.RTLD_GLOBAL)
    P = c_void_p
    sig = {
        "ps_strerror": (c_char_p, [c_int]),
        "ps_err_name": (c_char_p, [c_int]),
        "ps_errdetail": (c_char_p, []),
        "ps_config_init": (None, [POINTER(Config)]),
        "ps_open_f": (c_int, [POINTER(P), c_int, POINTER(Config)]),
        "ps_close": (None, [P]),
        "ps_resumed": (c_int, [P]),
        "ps_epoch": (c_uint64, [P]),
        "ps_rank": (c_int, [P]),
        "ps_nranks": (c_int, [P]),
        "ps_add": (c_int, [P, c_uint64, c_int32, c_void_p, c_size_t]),
        "ps_load_files": (c_int, [P, POINTER(c_char_p), c_size_t, POINTER(c_int32)]),
        "ps_load_packed": (c_int, [P, c_char_p, c_char_p]),
        "ps_start": (c_int, [P]),
        "ps_size": (c_uint64, [P]),
        "ps_total": (c_uint64, [P]),
        "ps_info": (c_int, [P, c_uint64, POINTER(Sample)]),
        "ps_read": (c_int, [P, c_uint64, c_void_p, c_size_t]),
        "ps_order": (c_int, [P, POINTER(c_uint64), c_uint64]),
        "ps_exchange_begin": (c_int, [P, c_uint64]),
        "ps_progress": (c_int, [P, POINTER(c_int)]),
        "ps_exchange_end": (c_int, [P]),
        "ps_stats": (c_int, [P, POINTER(Stats)]),
        "ps_label_hist": (c_int, [P, POINTER(c_uint64), c_int, POINTER(c_uint64)]),
        "ps_plan_count": (c_uint64, [c_double, c_uint64]),
        "ps_plan_order": (None, [POINTER(c_uint64), c_uint64, c_uint64, c_uint64, c_int]),
        "ps_partition_perm": (None, [POINTER(c_uint64), c_uint64, c_uint64, c_uint64, c_int]),
        "ps_exchange_begin_to": (c_int, [P, c_uint64, c_uint64, c_int]),
        "ps_exchange_begin_dest": (c_int, [P, c_uint64, POINTER(c_int32)]),
        "ps_agree_error": (c_int, [P, c_uint64, c_char_p]),
        "ps_ids": (c_int, [P, POINTER(c_uint64), c_uint64]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


__all__ = ["load", "candidates", "VERSION", "Config", "Schedule", "Sample", "Stats", "byref"]
