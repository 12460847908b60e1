"""A user's own folder tree, shuffled across ranks, with fresh augmentation.

    mpirun -n 2 python3 imagefolder.py --make-data DIR [--epochs 3]

--make-data DIR writes a small ImageFolder-style tree per rank,
DIR/rank<R>/<class>/<name>.raw (3x32x32 bytes each, a noisy colour per
class), if it is not there yet, then trains. Each rank's tree is its share
of the data; pshuffle (strategy "global": DistributedSampler's semantics)
moves the files between the trees every epoch, writing the received ones
into the rank's tree and removing the ones sent. The loader reads a file and
the transform (random crop, flip and brightness, written with torch alone)
runs at every access, so every epoch sees a new view of every sample.

One line per epoch: `epoch E views V`, where V is the number of distinct
augmented tensors of one fixed sample seen so far (on whichever rank held it
that epoch): V = E+1 when augmentation is fresh every epoch.
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
from pshuffle.torch import PartialShuffleSampler, ShuffledFolder, make_loader  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--make-data", metavar="DIR", required=True,
                help="data and store directory (the trees are written there when missing)")
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--per-rank", type=int, default=96, help="samples per rank in the trees made")
ap.add_argument("--classes", type=int, default=4)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--timeout", type=float, default=60,
                help="seconds torch.distributed (gloo) waits for a peer before failing")
args = ap.parse_args()
if args.epochs < 1 or args.per_rank < 1 or args.classes < 1 or args.batch < 1 or args.workers < 0 \
        or not args.timeout > 0:
    ap.error("--epochs, --per-rank, --classes and --batch must be >= 1, --workers >= 0, --timeout > 0")

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
root = os.path.join(args.make_data, f"rank{rank}")
H = W = 32


def make_tree():
    """This rank's share: samples rank, rank+M, ... of per_rank*M."""
    rng = np.random.default_rng(1234 + rank)
    colours = np.random.default_rng(0).integers(0, 256, size=(args.classes, 3))
    for k in range(rank, args.per_rank * size, size):
        c = k % args.classes
        d = os.path.join(root, f"class{c}")
        os.makedirs(d, exist_ok=True)
        img = np.clip(colours[c][:, None, None] + rng.normal(0, 40, size=(3, H, W)), 0, 255).astype(np.uint8)
        img[:, :, : W // 4] //= 2  # a dark band on the left, so that a flip shows
        tmp = os.path.join(d, f".tmp-{k:05d}.raw")
        img.tofile(tmp)
        os.replace(tmp, os.path.join(d, f"img{k:05d}.raw"))


def load_raw(path):  # the user's loader: a file to a tensor
    return torch.from_numpy(np.fromfile(path, dtype=np.uint8).reshape(3, H, W))


def augment(x):  # the user's transform: random crop (padding 4), flip, brightness
    x = x.float() / 255
    x = torch.nn.functional.pad(x, (4, 4, 4, 4), mode="reflect")
    i, j = torch.randint(0, 9, (2,)).tolist()
    x = x[:, i:i + H, j:j + W]
    if torch.rand(()) < 0.5:
        x = x.flip(2)
    return x * (0.8 + 0.4 * torch.rand(()))


def main():
    if not os.path.isdir(root):
        make_tree()
    # torch.distributed next to MPI: rank 0 picks a port and tells the others.
    # timeout= bounds every wait for a peer in DDP's all-reduce.
    port = None
    if rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = comm.bcast(port, root=0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=args.timeout))

    sh = pshuffle.Shuffler(comm, seed=5, strategy="global", store_dir=os.path.join(args.make_data, "store"),
                           resume=False)
    ds = ShuffledFolder(root, sh, loader=load_raw, transform=augment)
    sampler = PartialShuffleSampler(ds)
    loader = make_loader(ds, batch_size=args.batch, sampler=sampler, num_workers=args.workers)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(8, len(ds.classes))))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fixed = ds.names[0]  # one sample, followed wherever it goes
    views = set()
    for epoch in range(args.epochs):
        torch.manual_seed(1000 * epoch + rank)  # the workers' seeds: a new draw every epoch, as by default
        sampler.set_epoch(epoch)
        order = list(sampler)
        paths = [ds.samples[i][0] if i < len(ds.samples) else None for i in order]
        where = [k for k, p in enumerate(paths) if p and p.endswith(os.sep + fixed)]
        seen, total, steps = [], 0.0, 0
        for b, (x, y) in enumerate(loader):
            for k in where:
                if k // args.batch == b:
                    seen.append(x[k % args.batch].numpy().tobytes())
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
        got = [None] * size
        dist.all_gather_object(got, (seen, steps, total))  # gloo: bounded by --timeout
        for s, _, _ in got:
            views.update(s)
        if rank == 0:
            loss = sum(t for _, _, t in got) / max(1, sum(n for _, n, _ in got))
            print(f"epoch {epoch} views {len(views)}  (loss {loss:.3f}, steps per rank {[n for _, n, _ in got]})",
                  flush=True)
    sampler.finish()
    # DDP's process group must go while no gloo thread still holds a Python
    # tensor (torch 1.13 can deadlock tearing it down at exit otherwise).
    dist.barrier()
    del model, opt
    dist.destroy_process_group()
    sh.close()


try:
    main()
except Exception as e:
    # One line, then the whole job ends (the other ranks may be waiting).
    sys.stderr.write(f"imagefolder.py: rank {rank}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}\n")
    sys.stderr.flush()
    comm.Abort(1)
