"""PyTorch side of pshuffle: the user's own data behind a DistributedSampler.

Two ways in, each a map-style Dataset whose indices are plain integers
(0..len-1), as any Dataset's:

- ShuffledFolder(root, shuffler, loader, transform, target_transform):
  the rank's own folder tree in ImageFolder/DatasetFolder layout
  (root/CLASS/.../FILE), or a list of sample files under root. pshuffle
  exchanges the files' raw bytes; received samples are written as files
  into the rank's tree (atomically), sent ones are removed, and the index
  is rebuilt. loader(path) and transform run at every __getitem__, so
  random augmentation is fresh every epoch. torchvision is not needed.
- ShuffledDataset(dataset, shuffler, transform, target_transform): any
  map-style Dataset. Rank r stores items [r*N/M, (r+1)*N/M) through an
  encoder (default: a tensor's or array's raw buffer with dtype and shape,
  decoded with frombuffer); transform runs after decoding, at every
  access, never at ingest. RANDOMNESS INSIDE THE DATASET'S __getitem__ IS
  FROZEN AT INGEST: move it to transform=.

PartialShuffleSampler(dataset) stands in for DistributedSampler: every rank
yields the same number of plain indices into that dataset, set_epoch(e)
drives the exchange, state_dict()/load_state_dict() resume mid-epoch.

    sh = pshuffle.Shuffler(comm, seed=7, strategy="global", store_dir=STORE)
    ds = ShuffledFolder(f"/local/train/rank{rank}", sh, transform=augment)
    sampler = PartialShuffleSampler(ds)
    loader = DataLoader(ds, batch_size=64, sampler=sampler, num_workers=2)
    for epoch in range(sampler.start_epoch, epochs):
        sampler.set_epoch(epoch)
        for x, y in loader: ...
    sampler.finish()

Workers are forked from the training process for each epoch and only read
(no MPI). persistent_workers=True cannot work (a persistent worker keeps
the previous epoch's index): make_loader() refuses it, and a stale worker
raises instead of serving samples the rank no longer holds.
"""
import math
import mmap
import os
import pickle
import struct
import time

import numpy as np
import torch
import torch.utils.data as tud

from . import PShuffleError, Shuffler, partition_perm

__all__ = ["ShuffledFolder", "ShuffledDataset", "PartialShuffleDataset", "PartialShuffleSampler", "make_loader",
           "encode", "decode", "default_loader"]

PERSISTENT_WORKERS_MSG = ("pshuffle: persistent_workers=True is not supported: a persistent DataLoader worker "
                          "keeps the index of the epoch it was forked in, while the exchange changes it every "
                          "epoch; use persistent_workers=False (workers are forked again each epoch)")

# -- the default encoder -------------------------------------------------------
# An item (x, y) with an integer y is stored as encode(x) with y in the
# sample's label; anything else whole, with label -1. A value is a tag byte
# and a header padded to 8 bytes, then its raw bytes:
#   T dtype ndim shape[ndim] (u64)   a torch tensor, decoded by torch.frombuffer
#   N len dtype.str ndim shape       a numpy array, decoded by numpy.frombuffer
#   B                                bytes
#   U count, then per element u64 length + value (padded to 8)   a tuple
#   P                                anything else, pickled
_TDT = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8, torch.int8, torch.int16,
        torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128]
_TCODE = {d: i for i, d in enumerate(_TDT)}


def _pad8(n):
    return (n + 7) & ~7


def _enc(x, out):
    if torch.is_tensor(x) and x.dtype in _TCODE and not x.is_sparse:
        x = x.detach().cpu().contiguous()
        h = struct.pack(f"<cBB{x.dim()}Q", b"T", _TCODE[x.dtype], x.dim(), *x.shape)
        out.append(h + bytes(_pad8(len(h)) - len(h)))
        out.append(x.reshape(-1).view(torch.uint8).numpy().tobytes() if x.numel() else b"")
    elif isinstance(x, np.ndarray) and not x.dtype.hasobject and x.dtype.str.encode().isascii():
        ds = x.dtype.str.encode()
        h = struct.pack(f"<cB{len(ds)}sB{x.ndim}Q", b"N", len(ds), ds, x.ndim, *x.shape)
        out.append(h + bytes(_pad8(len(h)) - len(h)))
        out.append(np.ascontiguousarray(x).tobytes())
    elif isinstance(x, (bytes, bytearray)):
        out.append(b"B" + bytes(7))
        out.append(bytes(x))
    elif isinstance(x, tuple) and len(x) < 256:
        out.append(struct.pack("<cB", b"U", len(x)) + bytes(6))
        for v in x:
            part = []
            _enc(v, part)
            b = b"".join(part)
            out.append(struct.pack("<Q", len(b)) + b + bytes(_pad8(len(b)) - len(b)))
    else:
        out.append(b"P" + bytes(7))
        out.append(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL))


def _int_label(y):
    if isinstance(y, bool):
        return None
    if isinstance(y, (int, np.integer)) or (torch.is_tensor(y) and y.dim() == 0 and not y.is_floating_point()
                                            and y.dtype != torch.bool):
        v = int(y)
        if -2**31 <= v < 2**31 and v != -1:
            return v
    return None


def encode(item):
    """The default encoder: (bytes, label). An item (x, y) with an integer
    y is stored as x's raw bytes (tensor or array: dtype, shape and buffer)
    with y as the sample's label; anything else is stored whole with
    label -1."""
    if isinstance(item, tuple) and len(item) == 2:
        y = _int_label(item[1])
        if y is not None:
            out = []
            _enc(item[0], out)
            return b"".join(out), y
    out = []
    _enc(item, out)
    return b"".join(out), -1


def _dec(buf, off, end):
    tag = buf[off:off + 1]
    if tag == b"T":
        code, nd = buf[off + 1], buf[off + 2]
        shape = struct.unpack_from(f"<{nd}Q", buf, off + 3)
        p = off + _pad8(3 + 8 * nd)
        dt = _TDT[code]
        n = math.prod(shape)
        if n == 0:
            return torch.empty(shape, dtype=dt)
        return torch.frombuffer(buf, dtype=dt, count=n, offset=p).view(shape)
    if tag == b"N":
        ln = buf[off + 1]
        ds = bytes(buf[off + 2:off + 2 + ln]).decode()
        nd = buf[off + 2 + ln]
        shape = struct.unpack_from(f"<{nd}Q", buf, off + 3 + ln)
        p = off + _pad8(3 + ln + 8 * nd)
        dt = np.dtype(ds)
        return np.frombuffer(buf, dtype=dt, count=math.prod(shape), offset=p).reshape(shape)
    if tag == b"B":
        return bytes(buf[off + 8:end])
    if tag == b"U":
        k = buf[off + 1]
        p, vals = off + 8, []
        for _ in range(k):
            ln = struct.unpack_from("<Q", buf, p)[0]
            vals.append(_dec(buf, p + 8, p + 8 + ln))
            p += 8 + _pad8(ln)
        return tuple(vals)
    if tag == b"P":
        return pickle.loads(bytes(buf[off + 8:end]))
    raise ValueError(f"pshuffle: not an item written by pshuffle.torch.encode (tag {bytes(tag)!r})")


_TSPEC = {}  # tensor header bytes -> (dtype, count, shape): a dataset has few distinct ones


def decode(buf, label):
    """Inverse of encode(): (x, label) when the label is set, else the item.
    Tensors and arrays share `buf` (no copy)."""
    if buf[:1] == b"T":  # the common case, kept short: the header is parsed once per shape
        hl = (3 + 8 * buf[2] + 7) & ~7
        key = bytes(buf[:hl])
        spec = _TSPEC.get(key)
        if spec is None:
            shape = struct.unpack_from(f"<{buf[2]}Q", buf, 3)
            spec = (_TDT[buf[1]], math.prod(shape), shape)
            if len(_TSPEC) < 4096:
                _TSPEC[key] = spec
        dt, n, shape = spec
        x = torch.frombuffer(buf, dtype=dt, count=n, offset=hl).view(shape) if n else torch.empty(shape, dtype=dt)
    else:
        x = _dec(buf, 0, len(buf))
    return (x, label) if label != -1 else x


# -- the views -----------------------------------------------------------------
class _View(tud.Dataset):
    """What the datasets share: the shuffler, a padding slot (index
    len(shuffler), when the sampler pads this epoch as DistributedSampler
    does), and a generation number shared with forked workers, so that a
    persistent worker notices that the index moved on."""

    def __init__(self, shuffler):
        self.shuffler = shuffler
        self._pads = []  # (id, label, bytes) of this epoch's copies of other ranks' samples
        self._gen = 0
        self._shm = mmap.mmap(-1, 8)  # MAP_SHARED|MAP_ANONYMOUS: seen by forked workers
        shuffler._on_commit.append(self._committed)
        if not hasattr(shuffler, "_views"):
            shuffler._views = []
        shuffler._views.append(self)

    def _bump(self):
        self._gen += 1
        self._shm[:8] = struct.pack("<Q", self._gen)

    def _fresh(self):
        if struct.unpack("<Q", self._shm[:8])[0] != self._gen:
            raise RuntimeError(PERSISTENT_WORKERS_MSG)

    def _committed(self):
        self._pads = []
        self._reindex()
        self._bump()

    def _reindex(self):
        pass

    def _set_pads(self, pads):
        self._pads = list(pads)
        self._bump()

    def __len__(self):
        return len(self.shuffler) + len(self._pads)

    def _raw(self, i):
        """(id, label, bytearray) of index i."""
        self._fresh()
        n = len(self.shuffler)
        i = int(i)
        if n <= i < n + len(self._pads):
            sid, label, data = self._pads[i - n]
            return sid, label, bytearray(data)
        if not 0 <= i < n:
            raise IndexError(f"pshuffle: index {i} outside 0..{len(self) - 1}")
        sid, label, _ = self.shuffler.info(i)
        return sid, label, self.shuffler.read_into(i)


class PartialShuffleDataset(_View):
    """The store itself: item i is decode(bytes, label) (default: the raw
    bytes and the label)."""

    def __init__(self, shuffler, decode=None):
        super().__init__(shuffler)
        self.decode = decode

    def __getitem__(self, i):
        _, label, data = self._raw(i)
        return self.decode(data, label) if self.decode else (bytes(data), label)


def _meta_path(sh):
    if not sh.store_dir:
        return None
    return os.path.join(os.fspath(sh.store_dir), f"rank-{sh.rank:05d}", "dataset.json")


def _load_meta(sh):
    import json
    try:
        with open(_meta_path(sh)) as f:
            return json.load(f)
    except (OSError, ValueError, TypeError):
        return None


def _save_meta(sh, meta):
    """What the store was made from, kept beside it (every rank: the
    stores may be on node-local disks), to refuse a changed dataset on
    resume."""
    import json
    p = _meta_path(sh)
    if p:
        with open(p + ".tmp", "w") as f:
            json.dump(meta, f)
            if sh._fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(p + ".tmp", p)


def _count_check(sh, what, count):
    if sh.resumed and sh.total != count:
        return (f"the store at {sh.store_dir} holds {sh.total} samples, {what} has {count}: it changed since the "
                f"store was made (start afresh with resume=False, or restore the data)")
    return None


class ShuffledDataset(_View):
    """Any map-style Dataset, stored through an encoder. Collective.

    Rank r stores items [r*N/M, (r+1)*N/M) of `dataset` (sample id = item
    index) with encode(item) -> (bytes, label) and starts the shuffler.
    Item i is then decode(bytes, label), with transform applied to x and
    target_transform to y at every access. The default encoder stores a
    tensor's or array's raw buffer with its dtype and shape (decoded with
    frombuffer, sharing the read buffer) and an integer y in the sample's
    label. Whatever dataset[i] does is done once, at ingest: random
    augmentation must be passed as transform=, not done in the dataset.
    On a resumed directory store nothing is read from `dataset` except its
    length, which must equal the store's count."""

    def __init__(self, dataset, shuffler, transform=None, target_transform=None, encode=encode, decode=decode):
        sh = shuffler
        n = len(dataset)
        sh.agree(_count_check(sh, "the dataset", n))
        if not sh.resumed:
            msg = None
            m, r = sh.nranks, sh.rank
            try:
                for i in range(n * r // m, n * (r + 1) // m):
                    blob, label = encode(dataset[i])
                    sh.add(i, label, blob)
            except Exception as e:  # shared with every rank below
                msg = f"ingest of item {i}: {type(e).__name__}: {e}"
            sh.agree(msg)
        sh.start()
        if not sh.resumed:
            _save_meta(sh, {"kind": "dataset", "count": n})
        super().__init__(sh)
        self.transform, self.target_transform, self.decode = transform, target_transform, decode

    def __getitem__(self, i):
        _, label, data = self._raw(i)
        item = self.decode(data, label)
        if label != -1 or (isinstance(item, tuple) and len(item) == 2):
            x, y = item
            if self.transform is not None:
                x = self.transform(x)
            if self.target_transform is not None:
                y = self.target_transform(y)
            return x, y
        return self.transform(item) if self.transform is not None else item


def default_loader(path):
    """torchvision's default: the image as RGB (PIL)."""
    try:
        from PIL import Image
    except ImportError:
        raise RuntimeError("pshuffle: the default loader needs PIL (python3-pil); pass loader=") from None
    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
_PAD_DIR = ".pshuffle-pad"
_TMP = ".pshuffle-tmp."


def _scan(root, extensions, is_valid_file):
    """(relative path, class name) of the files under root/CLASS/, as
    DatasetFolder finds them (hidden files and folders skipped)."""
    out = []
    for c in sorted(d.name for d in os.scandir(root) if d.is_dir() and not d.name.startswith(".")):
        for dp, dns, fns in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            dns[:] = sorted(d for d in dns if not d.startswith("."))
            for f in sorted(fns):
                if f.startswith("."):
                    continue
                p = os.path.join(dp, f)
                ok = is_valid_file(p) if is_valid_file else (extensions is None or f.lower().endswith(extensions))
                if ok:
                    out.append((os.path.relpath(p, root), c))
    return out


class ShuffledFolder(_View):
    """The rank's own folder tree, ImageFolder/DatasetFolder style.
    Collective.

    root is this rank's tree (node-local disk): root/CLASS/.../FILE, the
    rank's share of the training set, different files on every rank (or
    pass files=[relative path or (relative path, class)] for any list of
    sample files under root). Class names are those of all ranks together,
    sorted (class_to_idx as ImageFolder); sample id = the index of its
    relative path among all ranks' files, sorted. After every exchange the
    samples received are written into root at their relative path
    (temporary file, fsync when the shuffler's fsync is on, rename), the
    samples sent away are removed, and .samples/.targets are rebuilt in the
    store's order. Item i is (transform(loader(path)), target_transform(class
    index)), so loader and transform run at every access.

    The shuffler's store keeps the bytes too (its crash-safe copy, with a
    directory store); the tree is rebuilt from it on resume, so a crash at
    any point leaves the tree either before or after the exchange, never in
    between. extensions defaults to the image ones when loader is the
    default, else to every file."""

    def __init__(self, root, shuffler, loader=None, transform=None, target_transform=None, extensions=None,
                 is_valid_file=None, files=None):
        sh = shuffler
        self.root = os.path.abspath(os.fspath(root))
        self.loader = loader or default_loader
        if extensions is None and loader is None and is_valid_file is None:
            extensions = IMG_EXTENSIONS
        exts = tuple(e.lower() for e in extensions) if extensions else None
        self.transform, self.target_transform = transform, target_transform
        if sh.resumed:
            self._resume(sh)
        else:
            self._fresh_start(sh, files, exts, is_valid_file)
        self._id_of = {n: k for k, n in enumerate(self.names)}
        self._present = set(self._id_of[rel] for rel in self._found)
        super().__init__(sh)
        self._reindex()

    def _fresh_start(self, sh, files, exts, is_valid_file):
        msg, mine = None, []
        try:
            self._clean_tmp()
            if files is not None:
                for f in files:
                    rel, c = (f, "") if isinstance(f, (str, os.PathLike)) else f
                    rel = os.path.normpath(os.fspath(rel))
                    if os.path.isabs(rel) or rel.startswith(".."):
                        raise ValueError(f"file {rel}: not a path under root")
                    mine.append((rel, c))
            else:
                mine = _scan(self.root, exts, is_valid_file)
        except Exception as e:
            msg = f"{self.root}: {type(e).__name__}: {e}"
        sh.agree(msg)
        # Every rank's file list, so that ids and classes are the same
        # everywhere (after the agreement: every rank is here).
        every = sh.comm.allgather(mine)
        owner, msg = {}, None
        for r, part in enumerate(every):
            for rel, c in part:
                if rel in owner and msg is None:
                    msg = f"file {rel} is in the trees of ranks {owner[rel][0]} and {r}"
                owner[rel] = (r, c)
        names = sorted(owner)
        if any(isinstance(c, (int, np.integer)) for _, c in owner.values()):
            self.classes = sorted({int(c) for _, c in owner.values()})
            self.class_to_idx = {c: c for c in self.classes}
            labels = [int(owner[n][1]) for n in names]
        else:
            self.classes = sorted({c for _, c in owner.values()})
            self.class_to_idx = {c: k for k, c in enumerate(self.classes)}
            labels = [self.class_to_idx[owner[n][1]] for n in names]
        if not names and msg is None:
            msg = f"no sample files under {self.root} on any rank"
        sh.agree(msg)
        self.names, self.labels = names, labels
        msg = None
        try:
            ids = {n: k for k, n in enumerate(names)}
            for rel, _ in mine:
                with open(os.path.join(self.root, rel), "rb") as f:
                    sh.add(ids[rel], labels[ids[rel]], f.read())
        except Exception as e:
            msg = f"{self.root}: {type(e).__name__}: {e}"
        sh.agree(msg)
        sh.start()
        _save_meta(sh, {"kind": "folder", "count": len(names), "names": names, "labels": labels,
                        "classes": self.classes})
        self._found = [rel for rel, _ in mine]

    def _resume(self, sh):
        """The file list comes from the store's side (the trees may be in
        the middle of a sync); the tree may hold only files of that list."""
        meta, msg, found = _load_meta(sh), None, []
        if not meta or meta.get("kind") != "folder":
            msg = f"the store at {sh.store_dir} has no file list of a ShuffledFolder: start afresh (resume=False)"
        else:
            msg = _count_check(sh, "its file list", meta["count"]) or _count_check(sh, "the file list",
                                                                                    len(meta["names"]))
        if msg is None:
            try:
                self._clean_tmp()
                known = set(meta["names"])
                for dp, dns, fns in os.walk(self.root):
                    dns[:] = sorted(d for d in dns if not d.startswith("."))
                    for f in sorted(fns):
                        if f.startswith("."):
                            continue
                        rel = os.path.relpath(os.path.join(dp, f), self.root)
                        if rel not in known:
                            msg = (f"{self.root}: file {rel} is not in the dataset the store at {sh.store_dir} was "
                                   f"made from: the data changed (start afresh with resume=False)")
                            break
                        found.append(rel)
                    if msg:
                        break
            except OSError as e:
                msg = f"{self.root}: {type(e).__name__}: {e}"
        sh.agree(msg)
        sh.start()
        self.names, self.labels, self.classes = meta["names"], meta["labels"], meta["classes"]
        self.class_to_idx = {c: (c if isinstance(c, int) else k) for k, c in enumerate(self.classes)}
        self._found = found

    def _clean_tmp(self):
        for dp, dns, fns in os.walk(self.root):
            for f in fns:
                if f.startswith(_TMP):
                    os.unlink(os.path.join(dp, f))
        pad = os.path.join(self.root, _PAD_DIR)
        if os.path.isdir(pad):
            import shutil
            shutil.rmtree(pad)

    def _write(self, rel, data):
        """Writes root/rel atomically: a complete file or none."""
        path = os.path.join(self.root, rel)
        d = os.path.dirname(path)
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f"{_TMP}{os.getpid()}.{os.path.basename(path)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if self.shuffler._fsync:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return d

    def _reindex(self):
        sh = self.shuffler
        ids = sh.ids()
        held = set(int(k) for k in ids)
        dirs = set()
        for i, k in enumerate(ids):
            k = int(k)
            if k not in self._present:
                dirs.add(self._write(self.names[k], sh.read_into(i)))
                self._present.add(k)
        for k in sorted(self._present - held):
            try:
                os.unlink(os.path.join(self.root, self.names[k]))
            except FileNotFoundError:
                pass
            self._present.discard(k)
        if sh._fsync:
            for d in dirs:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        self.samples = [(os.path.join(self.root, self.names[int(k)]), self.labels[int(k)]) for k in ids]
        self.targets = [c for _, c in self.samples]
        self.imgs = self.samples

    def _set_pads(self, pads):
        import shutil
        d = os.path.join(self.root, _PAD_DIR)
        if os.path.isdir(d):
            shutil.rmtree(d)
        out = []
        for sid, label, data in pads:
            rel = os.path.join(_PAD_DIR, self.names[sid])
            self._write(rel, data)
            out.append((sid, label, os.path.join(self.root, rel)))
        super()._set_pads(out)

    def __getitem__(self, i):
        self._fresh()
        i = int(i)
        n = len(self.samples)
        if n <= i < n + len(self._pads):
            path, target = self._pads[i - n][2], self._pads[i - n][1]
        elif 0 <= i < n:
            path, target = self.samples[i]
        else:
            raise IndexError(f"pshuffle: index {i} outside 0..{len(self) - 1}")
        x = self.loader(path)
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return x, target


# -- the sampler ---------------------------------------------------------------
def _dist_check(sh, num_replicas, rank):
    msg = None
    if num_replicas is not None and num_replicas != sh.nranks:
        msg = f"num_replicas={num_replicas}, but the shuffler's communicator has {sh.nranks} ranks"
    elif rank is not None and rank != sh.rank:
        msg = f"rank={rank}, but this is rank {sh.rank} of the shuffler's communicator"
    else:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            if dist.get_world_size() != sh.nranks or dist.get_rank() != sh.rank:
                msg = (f"torch.distributed has rank {dist.get_rank()} of {dist.get_world_size()}, the "
                       f"shuffler's communicator rank {sh.rank} of {sh.nranks}: they must be the same processes "
                       f"in the same order")
    return msg


def _timeout_s():
    try:
        v = float(os.environ.get("PSHUFFLE_TIMEOUT", "") or 300)
        return v if v > 0 else 300.0
    except ValueError:
        return 300.0  # the library refused it already at open


def _alltoall_bytes(comm, sends, what):
    """Each rank sends sends[d] (bytes) to rank d; returns what each rank
    sent here. Nonblocking with a deadline, as the library's own waits: a
    rank that does not arrive within PSHUFFLE_TIMEOUT ends the job."""
    from mpi4py import MPI
    m = comm.size
    scount = np.array([len(b) for b in sends], dtype=np.int64)
    rcount = np.zeros(m, dtype=np.int64)

    def wait(req):
        t0 = time.monotonic()
        while not req.Test():
            if time.monotonic() - t0 > _timeout_s():
                import sys
                sys.stderr.write(f"pshuffle: rank {comm.rank}: {what}: no answer from the other ranks within "
                                 f"{_timeout_s():g} s (PSHUFFLE_TIMEOUT); aborting the job\n")
                sys.stderr.flush()
                comm.Abort(70)
            time.sleep(0.0005)

    wait(comm.Ialltoall([scount, MPI.INT64_T], [rcount, MPI.INT64_T]))
    sc, rc = [int(v) for v in scount], [int(v) for v in rcount]
    sd = [sum(sc[:k]) for k in range(m)]
    rd = [sum(rc[:k]) for k in range(m)]
    sbuf = np.frombuffer(b"".join(sends) or b"\0", dtype=np.uint8)
    rbuf = np.empty(max(1, sum(rc)), dtype=np.uint8)
    wait(comm.Ialltoallv([sbuf, (sc, sd), MPI.BYTE], [rbuf, (rc, rd), MPI.BYTE]))
    return [rbuf[rd[r]:rd[r] + rc[r]].tobytes() for r in range(m)]


class PartialShuffleSampler(tud.Sampler):
    """DistributedSampler's semantics over a pshuffle store.

    source: the dataset handed to the DataLoader (ShuffledFolder,
    ShuffledDataset, PartialShuffleDataset) or its Shuffler. Indices are
    plain integers into that dataset.

    With the "global" strategy (DistributedSampler's own semantics): the
    samples of epoch e are those DistributedSampler would give this rank,
    positions r, r+M, ... of a uniformly random permutation of all N
    samples drawn from (seed, e) (ascending ids with shuffle=False), visited
    in that order; epoch 0 is already shuffled. set_epoch(e) accepts any
    epoch, forward or back: the store moves to epoch e's partition in one
    exchange (with overlap=True, the next epoch's exchange runs during
    training, so that a loop over consecutive epochs waits for none).
    Every rank yields ceil(N/M) indices, a rank with one sample fewer
    padded with the sample DistributedSampler would repeat (copied from the
    rank that holds it: at most one per rank, even when N < M), or
    floor(N/M) with drop_last=True (the tail of the permutation dropped).

    With "partial" and "local": the strategy's exchanges (the exchange of
    epoch e progresses during epoch e and is visible from e+1; warmup=True
    runs one before epoch 0); set_epoch only goes forward; a rank's own
    samples pad it, and a rank without samples cannot pad (an error on
    every rank).

    seed: the shuffler's seed (a different one is refused).
    num_replicas, rank: checked against the communicator and
    torch.distributed. Every collective step starts by agreeing that no
    rank failed: an error on one rank is raised on every rank with the same
    message.
    """

    def __init__(self, source, num_replicas=None, rank=None, shuffle=True, seed=None, drop_last=False,
                 progress_every=8, overlap=True, warmup=False):
        sh = source if isinstance(source, Shuffler) else getattr(source, "shuffler", None)
        if not isinstance(sh, Shuffler):
            raise TypeError("PartialShuffleSampler: pass the dataset made on a pshuffle.Shuffler (ShuffledFolder, "
                            "ShuffledDataset, PartialShuffleDataset) or the Shuffler")
        self.sh = sh
        msg = _dist_check(sh, num_replicas, rank)
        if msg is None and seed is not None and (int(seed) & (2**64 - 1)) != sh.seed:
            msg = f"seed={seed}: the sampler uses the shuffler's seed ({sh.seed}); pass the seed to pshuffle.Shuffler"
        try:
            sh.agree(msg)
        except PShuffleError as e:
            raise ValueError(str(e)) from None
        self.num_replicas, self.rank = sh.nranks, sh.rank
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.every = max(1, int(progress_every))
        self.overlap = overlap
        self.seeded = sh.strategy == "global"
        self.offset = 1 if warmup and not self.seeded else 0
        if self.offset and sh.epoch == 0:
            sh.exchange(0)
        self.epoch = None
        self._order = None
        self._part = None   # (epoch, shuffle): the seeded partition the store holds, when known
        self._next = None   # the one the exchange in flight moves to
        self._skip = 0      # indices of the epoch already consumed (load_state_dict)
        self._resume_epoch = None
        self._restripe = None  # (ranks, position) of a state saved on another number of ranks
        self._restripe_len = None
        self.yielded = 0    # indices of this epoch handed out by __iter__

    # -- sizes ------------------------------------------------------------
    @property
    def start_epoch(self):
        """The first epoch to train: 0, the epoch of a loaded state, or
        (partial/local) where a resumed store is."""
        if self._resume_epoch is not None:
            return self._resume_epoch
        return 0 if self.seeded else max(0, self.sh.epoch - self.offset)

    @property
    def num_samples(self):
        n, m = self.sh.total, self.num_replicas
        return n // m if self.drop_last else math.ceil(n / m)

    @property
    def total_size(self):
        return self.num_samples * self.num_replicas

    def __len__(self):
        if self.epoch is not None and self.epoch == self._resume_epoch:
            if self._restripe is not None:
                return self._restripe_len
            return self.num_samples - self._skip
        return self.num_samples

    def _views(self):
        return getattr(self.sh, "_views", [])

    # -- epochs -----------------------------------------------------------
    def set_epoch(self, epoch):
        """Collective: every rank calls it with the same epoch (else an
        error on every rank). Calling it again with the same epoch does
        nothing."""
        msg = None
        try:
            epoch = int(epoch)
            if epoch < 0:
                msg = f"set_epoch({epoch}): epochs start at 0"
        except (TypeError, ValueError):
            msg, epoch = f"set_epoch({epoch!r}): not an integer", -1
        if msg is None and not self.seeded and epoch + self.offset < self.sh.epoch and epoch != self.epoch:
            msg = (f"set_epoch({epoch}): the {self.sh.strategy} strategy's store is at epoch "
                   f"{self.sh.epoch - self.offset} and cannot go back (only strategy='global' goes to any epoch)")
        self.sh.agree(msg, epoch=max(epoch, 0))
        if epoch == self.epoch:
            return
        if self.seeded:
            self._set_epoch_seeded(epoch)
        else:
            self._set_epoch_pool(epoch)
        self.epoch = epoch
        self.yielded = 0
        if epoch != self._resume_epoch:
            self._skip = 0

    def _set_epoch_seeded(self, epoch):
        sh = self.sh
        if sh.in_exchange:
            sh.exchange_end()
            self._part = self._next
        n_all, m, r = sh.total, self.num_replicas, self.rank
        perm = partition_perm(n_all, epoch, sh.seed, self.shuffle)
        if self._restripe is not None and epoch == self._resume_epoch:
            self._order = self._restriped(epoch, perm)
        else:
            want = (epoch, self.shuffle)
            if self._part != want:
                sh.exchange_begin_to(epoch, self.shuffle)
                sh.exchange_end()
                self._part = want
            held = sh.ids()
            if len(held) != len(perm[r::m]):
                raise PShuffleError(f"pshuffle: rank {r} holds {len(held)} samples, epoch {epoch}'s partition gives "
                                    f"it {len(perm[r::m])}")
            holder = np.empty(n_all, dtype=np.int64)
            holder[perm.astype(np.int64)] = np.arange(n_all) % m  # position k is on rank k mod M
            k = self.num_samples
            # DistributedSampler's list of the epoch: position p < M*k holds perm[p % N].
            lst = perm[np.arange(m * k) % n_all] if n_all and k else perm[:0]
            self._order = self._visit(lst, holder)
        if self.overlap:
            sh.exchange_begin_to(epoch + 1, self.shuffle)
            self._next = (epoch + 1, self.shuffle)

    def _restriped(self, epoch, perm):
        """The rest of an epoch begun on another number of ranks: the tail
        of DistributedSampler's list for the old rank count, after the
        `position` indices every old rank consumed (its positions
        [0, position*M_old)), dealt as DistributedSampler deals a list to
        the new ranks (rank r: r, r+M, ..., padded by repeating from the
        start, or cut with drop_last). Each sample goes, in one exchange, to
        the rank that visits it first; the samples already consumed to
        their rank in this epoch's partition."""
        sh, m = self.sh, self.num_replicas
        m_old, pos = self._restripe
        n_all = sh.total
        t_old = (n_all // m_old if self.drop_last else -(-n_all // m_old)) * m_old
        rest = perm[np.arange(pos * m_old, t_old) % n_all].astype(np.int64) if n_all else perm[:0].astype(np.int64)
        k = len(rest) // m if self.drop_last else -(-len(rest) // m)
        lst = rest[np.arange(k * m) % len(rest)] if len(rest) and k else rest[:0]
        holder = np.empty(n_all, dtype=np.int64)
        holder[perm.astype(np.int64)] = np.arange(n_all) % m
        ids, first = np.unique(lst, return_index=True)
        holder[ids] = first % m
        held = sh.ids().astype(np.int64)
        sh.exchange_begin_dest(holder[held].tolist())
        sh.exchange_end()
        self._part = None  # not an epoch's partition: the next epoch moves to its own
        self._restripe_len = k
        return self._visit(lst, holder)

    def _visit(self, lst, holder):
        """This rank's indices into the dataset for the epoch list `lst`
        (rank q visits lst[q::M], as DistributedSampler deals), where
        holder[id] is the rank that holds each sample. A sample another
        rank holds (a padding repeat) is copied here first; every rank
        computes the same list, so all join the copy or none does."""
        sh, m, r = self.sh, self.num_replicas, self.rank
        held = sh.ids()
        lst = lst.astype(np.int64)
        q = np.arange(len(lst)) % m
        h = holder[lst] if len(lst) else lst
        away = np.nonzero(h != q)[0]
        pads, slot = [], {}
        if len(away):
            sends = [[] for _ in range(m)]
            done = set()
            for p in away:
                sid, dst = int(lst[p]), int(q[p])
                if int(h[p]) == r and (dst, sid) not in done:
                    done.add((dst, sid))
                    i = int(np.searchsorted(held, sid))
                    _, label, _ = sh.info(i)
                    data = bytes(sh.read_into(i))
                    sends[dst].append(struct.pack("<QqQ", sid, label, len(data)) + data)
            got = _alltoall_bytes(sh.comm, [b"".join(x) for x in sends], "copying padding samples")
            for blob in got:
                p = 0
                while p < len(blob):
                    sid, label, ln = struct.unpack_from("<QqQ", blob, p)
                    slot[sid] = len(held) + len(pads)
                    pads.append((sid, label, blob[p + 24:p + 24 + ln]))
                    p += 24 + ln
        for v in self._views():
            v._set_pads(pads)
        mine, hm = lst[r::m], h[r::m]
        order = np.searchsorted(held, mine.astype(np.uint64)).tolist()
        for j in np.nonzero(hm != r)[0]:
            order[j] = slot[int(mine[j])]
        return order

    def _set_epoch_pool(self, epoch):
        sh = self.sh
        if sh.in_exchange:
            sh.exchange_end()
        target = epoch + self.offset
        while sh.epoch < target:
            sh.exchange(sh.epoch)
        n = len(sh)
        want = self.num_samples
        msg = None
        if n == 0 and want:
            msg = (f"rank {self.rank} holds no samples at epoch {epoch} and cannot pad to {want}: with "
                   f"strategy='{sh.strategy}' a rank pads with its own samples (strategy='global' pads as "
                   f"DistributedSampler; warmup=True balances the ranks before epoch 0)")
        sh.agree(msg, epoch=epoch)
        order = sh.order() if self.shuffle else list(range(n))
        if len(order) < want:
            order = (order * math.ceil(want / len(order)))[:want]
        self._order = order[:want]
        for v in self._views():
            v._set_pads([])
        if self.overlap:
            sh.exchange_begin(sh.epoch)

    def finish(self):
        """Collective: commits the exchange in flight (partial/local without
        overlap: runs the last epoch's)."""
        if self.sh.in_exchange:
            self.sh.exchange_end()
            if self.seeded:
                self._part = self._next
        elif (not self.seeded and not self.overlap and self.epoch is not None
              and self.sh.epoch == self.epoch + self.offset):
            self.sh.exchange(self.sh.epoch)

    def __iter__(self):
        if self._order is None:
            raise RuntimeError("PartialShuffleSampler: call set_epoch(e) before iterating")
        skip = self._skip if self.epoch == self._resume_epoch else 0
        self.yielded = skip
        for k in range(skip, len(self._order)):
            if k % self.every == 0:
                self.sh.progress()
            self.yielded = k + 1
            yield self._order[k]

    # -- resume -------------------------------------------------------------
    def state_dict(self, consumed=None):
        """Where training stands: the epoch and how many of its indices
        this rank has consumed. consumed defaults to what __iter__ handed
        out, which is exact without DataLoader workers; with workers (which
        prefetch), pass the count the loop consumed (steps * batch size)."""
        pos = self.yielded if consumed is None else int(consumed)
        epoch = self.epoch
        if epoch is not None and pos >= len(self):  # the epoch is over: the next one, from its start
            epoch, pos = epoch + 1, 0
        elif epoch is not None and self._restripe is not None and epoch == self._resume_epoch and pos:
            raise ValueError("state_dict: this epoch was resumed on another number of ranks; save at its end "
                             "(or before its first index)")
        elif epoch is not None and self._restripe is not None and epoch == self._resume_epoch:
            return dict(self._loaded)  # nothing consumed yet: the loaded state still holds
        return {"epoch": epoch, "position": pos, "seed": self.sh.seed, "strategy": self.sh.strategy,
                "total": self.sh.total, "nranks": self.num_replicas, "shuffle": self.shuffle,
                "drop_last": self.drop_last}

    def load_state_dict(self, state):
        """Collective. The next set_epoch(state['epoch']) (start_epoch)
        resumes at the next index of that epoch. With strategy='global' the
        state may come from another number of ranks: the rest of the epoch
        is re-dealt to this job's ranks (see _restriped). A state of another
        seed, strategy, dataset size or sampler setting (or, for partial and
        local, rank count) is refused with one line on every rank."""
        msg = None
        try:
            for key, mine in (("seed", self.sh.seed), ("strategy", self.sh.strategy), ("total", self.sh.total),
                              ("nranks", self.num_replicas), ("shuffle", self.shuffle),
                              ("drop_last", self.drop_last)):
                if key == "nranks" and self.seeded and isinstance(state[key], int) and state[key] >= 1:
                    continue  # the rest of the epoch is re-dealt to this job's ranks
                if state[key] != mine:
                    what = "dataset size" if key == "total" else key
                    msg = f"load_state_dict: the state has {what} {state[key]}, this job {mine}"
                    break
            epoch, pos = state["epoch"], int(state["position"])
            n, mo = self.sh.total, int(state["nranks"])
            k_old = n // mo if self.drop_last else -(-n // mo)
            if msg is None and epoch is not None and not 0 <= pos <= k_old:
                msg = f"load_state_dict: position {pos} outside 0..{k_old}"
        except (KeyError, TypeError, ValueError) as e:
            msg = f"load_state_dict: not a pshuffle sampler state ({type(e).__name__}: {e})"
        self.sh.agree(msg)
        if epoch is None:
            return
        # Every rank consumed as many indices (equal lengths), so every rank
        # skips the same count; on another number of ranks, the rest of the
        # epoch is re-dealt (see _restriped).
        self._resume_epoch = int(epoch)
        self._loaded = dict(state)
        if int(state["nranks"]) != self.num_replicas:
            self._restripe, self._skip = (int(state["nranks"]), pos), 0
        else:
            self._restripe, self._skip = None, pos


def make_loader(dataset, *args, persistent_workers=False, **kw):
    """torch.utils.data.DataLoader, refusing persistent_workers=True at
    construction (see PERSISTENT_WORKERS_MSG)."""
    if persistent_workers:
        raise ValueError(PERSISTENT_WORKERS_MSG)
    return tud.DataLoader(dataset, *args, persistent_workers=False, **kw)
