"""pshuffle: partial distributed shuffling of training data over MPI.

Strategies: "global" (each epoch a fresh uniformly random partition of all
samples, as DistributedSampler over the whole dataset; only the samples
that change rank move), "local" (nothing moves), "partial" (each rank puts
round(Q*n) random samples in a pool that is dealt uniformly to all ranks,
its own included). Every exchange leaves per-rank counts within one of each
other. The plan is a pure function of (seed, epoch, Q, counts), computed on
every rank without communication. See docs/pshuffle.md.

    from mpi4py import MPI
    import pshuffle
    sh = pshuffle.Shuffler(MPI.COMM_WORLD, seed=1, strategy="partial", q=0.3)
    for i, blob in my_slice: sh.add(i, label, blob)
    sh.start()
    for e in range(sh.epoch, epochs):
        sh.exchange_begin(e)
        for i in sh.order(): train(sh.read(i)); sh.progress()
        sh.exchange_end()
"""
import ctypes
import os

from . import _lib

__all__ = ["Shuffler", "PShuffleError", "exp_schedule", "linear_schedule"]
__version__ = _lib.VERSION

_L = None


def _libc():
    global _L
    if _L is None:
        _L = _lib.load()
    return _L


class PShuffleError(RuntimeError):
    """A libpshuffle failure: .code (negative int), .name ("PS_ECORRUPT",
    "ENOSPC"...), and the message with the library's detail."""

    def __init__(self, code, what=""):
        if isinstance(code, str):
            # Rebuilt from its message alone, as DataLoader does with an
            # exception raised in a worker: keep the message.
            super().__init__(code)
            head = code.split(":", 1)[0]
            self.code, self.name = None, head if head.isidentifier() and head.isupper() else ""
            return
        L = _libc()
        self.code = code
        self.name = L.ps_err_name(code).decode()
        detail = L.ps_errdetail().decode(errors="replace")
        msg = L.ps_strerror(code).decode()
        if detail:
            msg += ": " + detail
        msg = f"{what}: {msg}" if what else msg
        super().__init__(f"{self.name}: {msg}")


def _check(code, what):
    if code != 0:
        raise PShuffleError(code, what)


def exp_schedule(q0, rate, q_min=0.0):
    """Q_e = max(q_min, q0 * rate**e)."""
    return ("exp", q0, rate, q_min)


def linear_schedule(q0, step, q_min=0.0):
    """Q_e = max(q_min, q0 - step*e)."""
    return ("linear", q0, step, q_min)


class Shuffler:
    """A partial shuffler over an mpi4py communicator (duplicated inside).

    strategy: "global" (Q=1 every epoch: a fresh uniform partition of the
    whole dataset), "local" (Q=0), or "partial" (the default) with q: a
    float (constant Q, default 0.1), a list of per-epoch values (the last
    one repeats), or exp_schedule()/linear_schedule(). store_dir: None for an
    in-memory store, else a directory (node-local disk) that survives
    crashes; with resume=True a later job continues from its last committed
    epoch. progress_thread=True progresses each exchange from a thread
    (mpi4py initialises MPI with MPI_THREAD_MULTIPLE by default); None
    (default) uses one when MPI provides MPI_THREAD_MULTIPLE. Collective
    methods are marked so in their docstring.

    Reading (info/read/order/size) never calls MPI, so a forked DataLoader
    worker may use it; the MPI side (exchange_*, progress) belongs to the
    process that created the shuffler.
    """

    def __init__(self, comm=None, seed=0, q=None, store_dir=None, window_bytes=None,
                 fsync=True, resume=True, progress_thread=None, strategy="partial",
                 chunk_bytes=None):
        """Collective."""
        if strategy not in ("global", "local", "partial"):
            raise ValueError(f"strategy {strategy!r}: expected 'global', 'local' or 'partial'")
        if strategy != "partial":
            if q is not None:
                raise ValueError(f"strategy {strategy!r} takes no q (it is Q={1 if strategy == 'global' else 0})")
            q = 1.0 if strategy == "global" else 0.0
        elif q is None:
            q = 0.1
        self.strategy = strategy
        self.seed = int(seed) & (2**64 - 1)
        if comm is None:
            from mpi4py import MPI
            comm = MPI.COMM_WORLD
        L = _libc()
        self._h = None
        self._pid = os.getpid()
        cfg = _lib.Config()
        L.ps_config_init(ctypes.byref(cfg))
        cfg.seed = int(seed) & (2**64 - 1)
        self._table = None
        if isinstance(q, tuple) and q and q[0] in ("exp", "linear"):
            cfg.q.kind = _lib.PS_Q_EXP if q[0] == "exp" else _lib.PS_Q_LINEAR
            cfg.q.q0, cfg.q.q_rate, cfg.q.q_min = float(q[1]), float(q[2]), float(q[3])
        elif isinstance(q, (list, tuple)):
            self._table = (ctypes.c_double * len(q))(*[float(x) for x in q])
            cfg.q.kind = _lib.PS_Q_TABLE
            cfg.q.q_table = ctypes.cast(self._table, ctypes.POINTER(ctypes.c_double))
            cfg.q.q_table_len = len(q)
        else:
            cfg.q.kind = _lib.PS_Q_CONST
            cfg.q.q0 = float(q)
        self._dir = os.fsencode(store_dir) if store_dir is not None else None
        cfg.store_dir = self._dir
        if chunk_bytes is not None:  # the former name of window_bytes
            window_bytes = chunk_bytes
        if window_bytes is not None:  # else the default: 64 MiB, or $PSHUFFLE_WINDOW
            cfg.window_bytes = int(window_bytes)
        cfg.fsync = 1 if fsync else 0
        cfg.resume = 1 if resume else 0
        cfg.progress_thread = -1 if progress_thread is None else (1 if progress_thread else 0)
        h = ctypes.c_void_p()
        _check(L.ps_open_f(ctypes.byref(h), comm.py2f(), ctypes.byref(cfg)), "open")
        self.comm = comm  # the mpi4py communicator given (the library uses a duplicate)
        self._h = h
        self._in_exchange = False
        self._fsync = bool(fsync)
        self.store_dir = store_dir
        self.history = []  # stats() of every exchange finished by this process
        # Called after every committed exchange (datasets re-index there).
        self._on_commit = []

    # -- lifetime -----------------------------------------------------------
    def close(self):
        """Frees the shuffler. Only in the process that opened it: a forked
        DataLoader worker must not touch the MPI state it inherited."""
        if self._h is not None and os.getpid() == self._pid:
            _libc().ps_close(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        raise TypeError("a pshuffle.Shuffler cannot be pickled; DataLoader workers must be forked "
                        "(multiprocessing_context='fork', the Linux default)")

    def _handle(self):
        if self._h is None:
            raise PShuffleError(-2005, "shuffler is closed")
        return self._h

    # -- state ----------------------------------------------------------------
    @property
    def rank(self):
        return _libc().ps_rank(self._handle())

    @property
    def nranks(self):
        return _libc().ps_nranks(self._handle())

    @property
    def epoch(self):
        """The epoch whose exchange comes next (after resume: the epoch to continue from)."""
        return int(_libc().ps_epoch(self._handle()))

    @property
    def resumed(self):
        return bool(_libc().ps_resumed(self._handle()))

    @property
    def in_exchange(self):
        return self._in_exchange

    def __len__(self):
        return int(_libc().ps_size(self._handle()))

    @property
    def size(self):
        return len(self)

    @property
    def total(self):
        """Samples held by all ranks together (local: no MPI call)."""
        return int(_libc().ps_total(self._handle()))

    # -- initial partition --------------------------------------------------
    def add(self, sample_id, label, data):
        """Adds a sample to this rank's initial partition (local, before start())."""
        mv = memoryview(data).cast("B")
        buf = (ctypes.c_char * len(mv)).from_buffer_copy(mv) if len(mv) else None
        _check(_libc().ps_add(self._handle(), int(sample_id), int(label), buf, len(mv)), "add")

    def load_files(self, paths, labels=None):
        """Rank r reads files [r*N/M, (r+1)*N/M) of `paths`; id = index. Collective."""
        arr = (ctypes.c_char_p * len(paths))(*[os.fsencode(p) for p in paths])
        lab = (ctypes.c_int32 * len(paths))(*labels) if labels is not None else None
        _check(_libc().ps_load_files(self._handle(), arr, len(paths), lab), "load_files")

    def load_packed(self, data_path, index_path):
        """Rank r reads its slice of a packed dataset (docs/pshuffle.md). Collective."""
        _check(_libc().ps_load_packed(self._handle(), os.fsencode(data_path), os.fsencode(index_path)),
               "load_packed")

    def start(self):
        """Seals the initial partition. Collective."""
        _check(_libc().ps_start(self._handle()), "start")

    # -- reading (local, fork-safe) ----------------------------------------
    def info(self, idx):
        """(id, label, size) of the idx-th sample (ascending id order)."""
        s = _lib.Sample()
        _check(_libc().ps_info(self._handle(), int(idx), ctypes.byref(s)), "info")
        return int(s.id), int(s.label), int(s.size)

    def read(self, idx):
        """The idx-th sample's bytes (checksum verified for a directory store)."""
        s = _lib.Sample()
        L = _libc()
        _check(L.ps_info(self._handle(), int(idx), ctypes.byref(s)), "read")
        buf = ctypes.create_string_buffer(max(1, s.size))
        _check(L.ps_read(self._handle(), int(idx), buf, s.size), "read")
        return buf.raw[: s.size]

    def read_into(self, idx):
        """The idx-th sample's bytes in a new bytearray, which
        torch.frombuffer and numpy.frombuffer take without a copy."""
        s = _lib.Sample()
        L = _libc()
        h = self._handle()
        _check(L.ps_info(h, int(idx), ctypes.byref(s)), "read")
        buf = bytearray(s.size)
        cbuf = (ctypes.c_char * s.size).from_buffer(buf) if s.size else ctypes.create_string_buffer(1)
        _check(L.ps_read(h, int(idx), cbuf, s.size), "read")
        return buf

    def ids(self):
        """Ids of the samples held, in canonical (ascending) order: a numpy
        uint64 array."""
        import numpy as np
        n = len(self)
        arr = (ctypes.c_uint64 * max(1, n))()
        _check(_libc().ps_ids(self._handle(), arr, n), "ids")
        return np.frombuffer(arr, dtype=np.uint64, count=n)

    def order(self):
        """This epoch's visiting order: a list, a permutation of range(len(self))."""
        n = len(self)
        arr = (ctypes.c_uint64 * max(1, n))()
        _check(_libc().ps_order(self._handle(), arr, n), "order")
        return list(arr[:n])

    def label_hist(self, nbins):
        """Counts of labels 0..nbins-1 on this rank (others are not counted)."""
        arr = (ctypes.c_uint64 * max(1, nbins))()
        _check(_libc().ps_label_hist(self._handle(), arr, int(nbins), None), "label_hist")
        return list(arr[:nbins])

    # -- exchange (MPI; the opening process only) --------------------------
    def exchange_begin(self, epoch):
        """Starts the exchange of `epoch` (== self.epoch). Collective."""
        _check(_libc().ps_exchange_begin(self._handle(), int(epoch)), "exchange_begin")
        self._in_exchange = True

    def exchange_begin_to(self, part_epoch, shuffle=True):
        """Starts an exchange that moves every sample to its rank in the
        seeded partition of `part_epoch` (partition_perm()), whatever the
        holdings now: any epoch, forward or back. The ids must be 0..N-1.
        Collective."""
        _check(_libc().ps_exchange_begin_to(self._handle(), self.epoch, int(part_epoch), 1 if shuffle else 0),
               "exchange_begin_to")
        self._in_exchange = True

    def exchange_begin_dest(self, dest):
        """Starts an exchange that sends the i-th sample (canonical order)
        to rank dest[i] (a sequence of len(self) ints, computed alike on
        every rank). Collective."""
        n = len(self)
        arr = (ctypes.c_int32 * max(1, n))(*[int(d) for d in dest])
        if len(dest) != n:
            raise ValueError(f"exchange_begin_dest: {len(dest)} destinations for {n} samples")
        _check(_libc().ps_exchange_begin_dest(self._handle(), self.epoch, arr), "exchange_begin_dest")
        self._in_exchange = True

    def agree(self, msg=None, epoch=0):
        """Collective: every rank brings None or its error message; if any
        rank has one, every rank raises PShuffleError with the same line
        ("pshuffle: rank R: msg", R the lowest failing rank) before going on
        to anything collective. `epoch` must be the same on every rank. A rank that does not arrive within
        PSHUFFLE_TIMEOUT ends the job with a message."""
        L = _libc()
        code = L.ps_agree_error(self._handle(), int(epoch), msg.encode(errors="replace") if msg else None)
        if code:
            e = PShuffleError("pshuffle: " + L.ps_errdetail().decode(errors="replace"))
            e.code, e.name = code, L.ps_err_name(code).decode()
            raise e

    def progress(self):
        """Advances the exchange without blocking; True once this rank's messages are done."""
        if not self._in_exchange:
            return True
        done = ctypes.c_int(0)
        _check(_libc().ps_progress(self._handle(), ctypes.byref(done)), "progress")
        return bool(done.value)

    def exchange_end(self):
        """Completes the exchange and commits the next epoch. Collective."""
        self._in_exchange = False
        _check(_libc().ps_exchange_end(self._handle()), "exchange_end")
        self.history.append(self.stats())
        for f in list(self._on_commit):
            f()

    def exchange(self, epoch):
        """exchange_begin + exchange_end. Collective."""
        self.exchange_begin(epoch)
        self.exchange_end()

    def stats(self):
        """Statistics of the last finished exchange, as a dict."""
        st = _lib.Stats()
        _check(_libc().ps_stats(self._handle(), ctypes.byref(st)), "stats")
        return {name: getattr(st, name) for name, _ in _lib.Stats._fields_}


def partition_perm(n, epoch, seed, shuffle=True):
    """The seeded partition of an epoch (ps_partition_perm): a numpy uint64
    array, a permutation of range(n); rank r holds its positions r, r+M,
    ..., as DistributedSampler deals its permutation."""
    import numpy as np
    arr = (ctypes.c_uint64 * max(1, int(n)))()
    _libc().ps_partition_perm(arr, int(n), int(seed) & (2**64 - 1), int(epoch), 1 if shuffle else 0)
    return np.frombuffer(arr, dtype=np.uint64, count=int(n))


def plan_order(n, epoch, seed, rank):
    """The visiting order of a rank's n samples in an epoch (ps_plan_order)."""
    arr = (ctypes.c_uint64 * max(1, int(n)))()
    _libc().ps_plan_order(arr, int(n), int(seed) & (2**64 - 1), int(epoch), int(rank))
    return list(arr[:n])


def plan_count(q, n):
    """round(q*n), the number of samples a rank of n sends with this Q."""
    return int(_libc().ps_plan_count(float(q), int(n)))
