"""PyTorch side of pshuffle: a map-style Dataset over the local store and a
Sampler that stands in for torch.utils.data.DistributedSampler, its
set_epoch(e) driving the exchange.

    sh = pshuffle.Shuffler(comm, seed=7, strategy="global")
    ingest(sh, my_map_style_dataset)          # or ingest_dir(sh, root)
    sampler = PartialShuffleSampler(sh, drop_last=False)
    loader = make_loader(PartialShuffleDataset(sh, decode_item), batch_size=32,
                         sampler=sampler, num_workers=2)
    for epoch in range(sampler.start_epoch, epochs):
        sampler.set_epoch(epoch)      # commits the previous exchange, starts this one
        for x, y in loader: ...
    sampler.finish()                  # commits the last exchange

As with DistributedSampler, every rank yields the same number of indices
(len(sampler)): ceil(N/M), padding with repeated samples, or floor(N/M)
with drop_last=True, so DDP ranks run the same number of steps.

Workers are forked from the training process for each epoch and only read
the store (no MPI). persistent_workers=True cannot work (a persistent
worker keeps the previous epoch's store): make_loader() refuses it, and a
dataset item read by a stale worker raises an error saying so.
"""
import io
import math
import os

import torch
import torch.utils.data as tud

from . import Shuffler, PShuffleError

__all__ = ["PartialShuffleDataset", "PartialShuffleSampler", "make_loader", "ingest", "ingest_dir",
           "decode_item"]

PERSISTENT_WORKERS_MSG = ("pshuffle: persistent_workers=True is not supported: a persistent DataLoader worker "
                          "keeps the store of the epoch it was forked in, while the exchange changes it every "
                          "epoch; use persistent_workers=False (workers are forked again each epoch)")


class PartialShuffleDataset(tud.Dataset):
    """Map-style dataset over this rank's samples (ascending id order).
    Item i is transform(bytes, label) if a transform is given, else
    (bytes, label). With PartialShuffleSampler, indices carry the store
    epoch they were drawn for, and a worker whose copy of the store is of
    another epoch (persistent_workers=True) raises instead of serving stale
    samples."""

    def __init__(self, shuffler: Shuffler, transform=None):
        self.sh = shuffler
        self.transform = transform

    def __len__(self):
        return len(self.sh)

    def __getitem__(self, i):
        if isinstance(i, tuple):
            epoch, i = i
            if epoch != self.sh.epoch:
                raise RuntimeError(PERSISTENT_WORKERS_MSG + f" (index drawn for store epoch {epoch}, this "
                                   f"worker's store is at epoch {self.sh.epoch})")
        _, label, _ = self.sh.info(i)
        data = self.sh.read(i)
        return self.transform(data, label) if self.transform else (data, label)


def _dist_check(sh, num_replicas, rank):
    if num_replicas is not None and num_replicas != sh.nranks:
        raise ValueError(f"num_replicas={num_replicas}, but the shuffler's communicator has {sh.nranks} ranks")
    if rank is not None and rank != sh.rank:
        raise ValueError(f"rank={rank}, but this is rank {sh.rank} of the shuffler's communicator")
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        if dist.get_world_size() != sh.nranks or dist.get_rank() != sh.rank:
            raise ValueError(f"torch.distributed has rank {dist.get_rank()} of {dist.get_world_size()}, the "
                             f"shuffler's communicator rank {sh.rank} of {sh.nranks}: they must be the same "
                             f"processes in the same order")


class PartialShuffleSampler(tud.Sampler):
    """DistributedSampler's interface over a pshuffle store.

    shuffle: visit the local samples in a random order each epoch (a
    function of the shuffler's seed, epoch and rank); False visits them in
    ascending id order. Which samples a rank holds is the shuffler's
    strategy's business ("local" keeps them). seed: must be the shuffler's
    seed if given (the shuffler's seed drives both the exchange and the
    order). drop_last: as DistributedSampler, every rank yields floor(N/M)
    indices; else ceil(N/M), repeating samples from the start of the order
    to pad. num_replicas/rank: optional, checked against the communicator;
    both are also checked against torch.distributed when it is initialised.

    overlap=True: set_epoch(e) finishes the exchange of the previous epoch
    (collective) and starts epoch e's, which progresses while the epoch is
    iterated (every progress_every indices); samples received during epoch
    e are visited from epoch e+1. overlap=False: the exchange of epoch e
    runs whole in set_epoch(e+1). warmup=True: one exchange runs before
    epoch 0 (in the constructor on a fresh store), so epoch 0 is already
    shuffled by the strategy; sampler epoch e then uses store epoch e+1.
    """

    def __init__(self, shuffler: Shuffler, num_replicas=None, rank=None, shuffle=True, seed=None,
                 drop_last=False, progress_every=8, overlap=True, warmup=False):
        self.sh = shuffler
        _dist_check(shuffler, num_replicas, rank)
        if seed is not None and (int(seed) & (2**64 - 1)) != shuffler.seed:
            raise ValueError(f"seed={seed}: the sampler uses the shuffler's seed ({shuffler.seed}); "
                             f"pass the seed to pshuffle.Shuffler")
        self.num_replicas, self.rank = shuffler.nranks, shuffler.rank
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.every = max(1, int(progress_every))
        self.overlap = overlap
        self.offset = 1 if warmup else 0
        if warmup and shuffler.epoch == 0:
            shuffler.exchange(0)
        self.epoch = None
        self._order = None

    @property
    def start_epoch(self):
        """The first epoch to train (after a resume, where the store is)."""
        return max(0, self.sh.epoch - self.offset)

    @property
    def total_size(self):
        return self.num_samples * self.num_replicas

    @property
    def num_samples(self):
        n, m = self.sh.total, self.num_replicas
        return n // m if self.drop_last else math.ceil(n / m)

    def set_epoch(self, epoch):
        """Collective: every rank calls it with the same epoch. Calling it
        again with the same epoch does nothing; skipping epochs runs the
        skipped exchanges (blocking) so the store reaches the epoch asked
        for; going back to an epoch before the store's raises ValueError."""
        epoch = int(epoch)
        if epoch == self.epoch:
            return
        if self.sh.in_exchange:
            self.sh.exchange_end()
        target = epoch + self.offset
        if target < self.sh.epoch:
            raise ValueError(f"set_epoch({epoch}): the store is at epoch {self.sh.epoch - self.offset} and "
                             f"cannot go back (after a resume, start the loop at sampler.start_epoch)")
        while self.sh.epoch < target:
            self.sh.exchange(self.sh.epoch)
        self.epoch = epoch
        n = len(self.sh)
        order = self.sh.order() if self.shuffle else list(range(n))
        want = self.num_samples
        if n == 0 and want:
            raise RuntimeError(f"rank {self.rank} holds no samples at epoch {epoch} and cannot pad to {want}: "
                               f"start with samples on every rank, or use warmup=True (every exchange "
                               f"balances the ranks)")
        if len(order) < want:
            order = (order * math.ceil(want / len(order)))[:want]
        self._order = [(self.sh.epoch, i) for i in order[:want]]
        if self.overlap:
            self.sh.exchange_begin(self.sh.epoch)

    def finish(self):
        """Collective: commits the exchange of the last epoch (without
        overlap, runs it)."""
        if self.sh.in_exchange:
            self.sh.exchange_end()
        elif not self.overlap and self.epoch is not None and self.sh.epoch == self.epoch + self.offset:
            self.sh.exchange(self.sh.epoch)

    def __iter__(self):
        if self._order is None:
            raise RuntimeError("PartialShuffleSampler: call set_epoch(e) before iterating")
        for k, i in enumerate(self._order):
            if k % self.every == 0:
                self.sh.progress()
            yield i

    def __len__(self):
        return self.num_samples


def make_loader(dataset, *args, persistent_workers=False, **kw):
    """torch.utils.data.DataLoader, refusing persistent_workers=True at
    construction (see PERSISTENT_WORKERS_MSG)."""
    if persistent_workers:
        raise ValueError(PERSISTENT_WORKERS_MSG)
    return tud.DataLoader(dataset, *args, persistent_workers=False, **kw)


def _encode(x):
    buf = io.BytesIO()
    torch.save(x, buf)
    return buf.getvalue()


def decode_item(blob, label):
    """Inverse of ingest()'s default encoding: (x, label)."""
    return torch.load(io.BytesIO(blob), weights_only=False), label


def _label(y):
    try:
        return int(y)
    except (TypeError, ValueError):
        return -1


def ingest(sh, dataset, encode=None, raw_files=True):
    """Loads a map-style Dataset into the shuffler's initial partition and
    starts it. Collective. Rank r takes items [r*N/M, (r+1)*N/M); sample id
    = item index. Datasets that list their files as .samples = [(path,
    class)] (torchvision's ImageFolder/DatasetFolder) are stored as the raw
    file bytes when raw_files is set (decode them with the dataset's own
    loader); other items (x, y) are stored as encode(x) (default:
    torch.save, read back with decode_item) with label int(y), or -1.
    Does nothing but start() on a resumed store."""
    if not sh.resumed:
        n, m, r = len(dataset), sh.nranks, sh.rank
        samples = getattr(dataset, "samples", None) if raw_files else None
        if samples is not None and len(samples) == n:
            sh.load_files([p for p, _ in samples], [int(c) for _, c in samples])
        else:
            enc = encode or _encode
            err = None
            for i in range(n * r // m, n * (r + 1) // m):
                try:
                    item = dataset[i]
                    x, y = item if isinstance(item, tuple) and len(item) == 2 else (item, -1)
                    sh.add(i, _label(y), enc(x))
                except Exception as e:  # reported after the collective step below
                    err = f"item {i}: {type(e).__name__}: {e}"
                    break
            bad = sh.comm.allgather(err)
            msgs = [f"rank {k}: {b}" for k, b in enumerate(bad) if b]
            if msgs:
                raise RuntimeError("pshuffle.ingest: " + "; ".join(msgs))
    sh.start()


def ingest_dir(sh, root, extensions=None):
    """Loads a directory of files and starts the shuffler. Collective. With
    class subdirectories (root/CLASS/file, as ImageFolder) label = index of
    the class in sorted order, else -1; files are taken in sorted path
    order and stored as their raw bytes. Returns (paths, classes)."""
    root = os.fspath(root)
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    exts = tuple(e.lower() for e in extensions) if extensions else None
    paths, labels = [], []
    dirs = [(os.path.join(root, c), k) for k, c in enumerate(classes)] or [(root, -1)]
    for d, k in dirs:
        for dp, _, files in sorted(os.walk(d)):
            for f in sorted(files):
                if exts is None or f.lower().endswith(exts):
                    paths.append(os.path.join(dp, f))
                    labels.append(k)
    if not paths:
        raise ValueError(f"pshuffle.ingest_dir: no files under {root}")
    if not sh.resumed:
        sh.load_files(paths, labels)
    sh.start()
    return paths, classes
