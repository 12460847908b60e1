"""A user's own map-style Dataset under DDP with pshuffle.

    mpirun -n 4 python3 train.py [--strategy global | --q 0.3] [--store DIR --checkpoint FILE]

The dataset (Blobs below) is an ordinary map-style Dataset that knows
nothing of pshuffle. ShuffledDataset stores each rank's share of it through
the default encoder (raw tensor bytes), and PartialShuffleSampler hands
the DataLoader plain indices into it with DistributedSampler's semantics:
every rank runs the same number of steps (padding, or --drop-last), and the
random augmentation, passed as transform=, runs at every access. With
--store and --checkpoint a killed job resumes where it stopped: the store
from its last committed exchange, the model, the optimizer and the sampler
(epoch and position) from the checkpoint. A changed dataset (--samples) is
refused on resume.

No hang: torch.distributed gets timeout=--timeout (gloo waits that long for
a peer in DDP's all-reduce), pshuffle waits PSHUFFLE_TIMEOUT seconds
(default 300) in its own collectives; on any error the rank prints one
line and ends the whole job.
"""
import argparse
import datetime
import os
import socket
import sys

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

# Run from a source tree, the example uses the package beside it
# (pshuffle/python), which finds build/lib/libpshuffle.so by itself.
_PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
if os.path.isfile(os.path.join(_PKG, "pshuffle", "__init__.py")) and _PKG not in sys.path:
    sys.path.insert(0, _PKG)
import pshuffle  # noqa: E402
from pshuffle.torch import PartialShuffleSampler, ShuffledDataset, make_loader  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--strategy", default="partial", choices=["global", "local", "partial"])
ap.add_argument("--q", type=float, default=None, help="partial strategy: Q (default 0.3)")
ap.add_argument("--drop-last", action="store_true")
ap.add_argument("--epochs", type=int, default=4)
ap.add_argument("--samples", type=int, default=4096)
ap.add_argument("--store", default=None, help="directory store (default: memory)")
ap.add_argument("--checkpoint", default=None, help="model, optimizer and sampler state (with --store)")
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--timeout", type=float, default=60, help="torch.distributed timeout, seconds")
ap.add_argument("--pid-dir", default=None, help="write rank<R>.pid there (for tests)")
args = ap.parse_args()
if args.epochs < 0 or args.samples < 1 or args.workers < 0 or not args.timeout > 0:
    ap.error("--epochs >= 0, --samples >= 1, --workers >= 0 and --timeout > 0")

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
D, C = 32, 10


class Blobs(torch.utils.data.Dataset):
    """The user's dataset: 10 classes, sorted by label (the worst case for
    local shuffling: rank r starts with only a few classes)."""

    def __init__(self, n):
        self.n = n
        self.centers = torch.from_numpy(np.random.default_rng(0).normal(size=(C, D)).astype(np.float32))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        y = i * C // self.n
        g = torch.Generator().manual_seed(i)
        return self.centers[y] + 1.5 * torch.randn(D, generator=g), y


def augment(x):  # randomness belongs here, not in Blobs.__getitem__ (which runs once, at ingest)
    return x + 0.1 * torch.randn_like(x)


def main():
    if args.pid_dir:
        with open(os.path.join(args.pid_dir, f"rank{rank}.pid"), "w") as f:
            f.write(f"{os.getpid()}\n")
    port = None
    if rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = comm.bcast(port, root=0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=args.timeout))

    q = args.q if args.q is not None or args.strategy != "partial" else 0.3
    sh = pshuffle.Shuffler(comm, seed=7, strategy=args.strategy, q=q, store_dir=args.store)
    ds = ShuffledDataset(Blobs(args.samples), sh, transform=augment)
    sampler = PartialShuffleSampler(ds, drop_last=args.drop_last)
    loader = make_loader(ds, batch_size=64, sampler=sampler, num_workers=args.workers)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(D, C))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    if args.checkpoint and os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sampler.load_state_dict(state["sampler"])
        if rank == 0:
            print(f"resumed at epoch {sampler.start_epoch}", flush=True)
    for epoch in range(sampler.start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        total, steps = 0.0, 0
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
        hist = sh.label_hist(C)
        got = [None] * size
        dist.all_gather_object(got, steps)  # gloo, bounded by --timeout (an mpi4py gather would wait forever)
        if rank == 0:
            classes = sum(1 for h in hist if h)
            avg = f"{total / steps:.3f}" if steps else "- (no batch)"
            print(f"epoch {epoch}: loss {avg}, rank 0 holds {classes}/{C} classes, steps per rank {got}", flush=True)
            if args.checkpoint:
                st = {"model": model.module.state_dict(), "opt": opt.state_dict(),
                      "sampler": sampler.state_dict()}
                torch.save(st, args.checkpoint + ".tmp")
                os.replace(args.checkpoint + ".tmp", args.checkpoint)
    sampler.finish()
    got = [None] * size
    dist.all_gather_object(got, (sh.stats()["samples_sent"], sh.stats()["samples_recv"]))
    if rank == 0:
        print("last exchange: sent", [s for s, _ in got], "received", [r for _, r in got], flush=True)
    # DDP's process group must go while no gloo thread still holds a Python
    # tensor (torch 1.13 can deadlock tearing it down at exit otherwise).
    dist.barrier()
    del model, opt
    dist.destroy_process_group()
    sh.close()


try:
    main()
except Exception as e:
    # One line, then the whole job ends: the other ranks may be waiting for
    # this one in a collective.
    first = str(e).splitlines()[0] if str(e) else ""
    sys.stderr.write(f"train.py: rank {rank}: {type(e).__name__}: {first}\n")
    sys.stderr.flush()
    comm.Abort(1)
