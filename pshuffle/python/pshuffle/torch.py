"""PyTorch side of pshuffle: a map-style Dataset over the local store and a
Sampler whose set_epoch(e) drives the exchange, as DistributedSampler's
set_epoch drives its shuffle.

    sampler = PartialShuffleSampler(sh)
    loader = DataLoader(PartialShuffleDataset(sh, decode), batch_size=32,
                        sampler=sampler, num_workers=2)
    for epoch in range(sh.epoch, epochs):
        sampler.set_epoch(epoch)      # commits epoch-1's exchange, starts epoch's
        for x, y in loader: ...
    sampler.finish()                  # commits the last exchange

Workers are forked from the training process each epoch and only read the
store (no MPI). persistent_workers=True is not supported: a persistent
worker would keep reading the previous epoch's store.
"""
import torch.utils.data as tud

from . import Shuffler


class PartialShuffleDataset(tud.Dataset):
    """Map-style dataset over this rank's samples (ascending id order).
    Item i is transform(bytes, label) if a transform is given, else
    (bytes, label)."""

    def __init__(self, shuffler: Shuffler, transform=None):
        self.sh = shuffler
        self.transform = transform

    def __len__(self):
        return len(self.sh)

    def __getitem__(self, i):
        _, label, _ = self.sh.info(i)
        data = self.sh.read(i)
        return self.transform(data, label) if self.transform else (data, label)


class PartialShuffleSampler(tud.Sampler):
    """Yields this epoch's local visiting order and progresses the exchange
    while it does (every `progress_every` indices). set_epoch(e) finishes
    the exchange of the previous epoch (collective) and starts epoch e's;
    samples received during epoch e are visited from epoch e+1. With
    overlap=False the exchange of epoch e runs whole in set_epoch(e+1)."""

    def __init__(self, shuffler: Shuffler, progress_every=8, overlap=True):
        self.sh = shuffler
        self.every = max(1, int(progress_every))
        self.overlap = overlap
        self.epoch = None
        self._order = None

    def set_epoch(self, epoch):
        """Collective: every rank calls it with the same epoch."""
        if self.sh.in_exchange:
            self.sh.exchange_end()
        elif not self.overlap and self.epoch is not None and self.sh.epoch == self.epoch == epoch - 1:
            self.sh.exchange(self.epoch)
        if epoch != self.sh.epoch:
            raise ValueError(f"set_epoch({epoch}): the store is at epoch {self.sh.epoch} "
                             f"(after a resume, start the loop at shuffler.epoch)")
        self.epoch = epoch
        self._order = self.sh.order()
        if self.overlap:
            self.sh.exchange_begin(epoch)

    def finish(self):
        """Collective: commits the exchange of the last epoch (without overlap,
        runs it)."""
        if self.sh.in_exchange:
            self.sh.exchange_end()
        elif not self.overlap and self.epoch is not None and self.sh.epoch == self.epoch:
            self.sh.exchange(self.epoch)

    def __iter__(self):
        if self._order is None:
            raise RuntimeError("PartialShuffleSampler: call set_epoch(e) before iterating")
        for k, i in enumerate(self._order):
            if k % self.every == 0:
                self.sh.progress()
            yield i

    def __len__(self):
        return len(self.sh)
