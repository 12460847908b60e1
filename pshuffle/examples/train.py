"""Training with partial shuffling: mpirun -n 4 python3 train.py [--q 0.3 | --strategy global]

Each rank holds 1/M of a synthetic classification set; every epoch it
exchanges a fraction Q of it with other ranks while training (overlapped),
and DDP (gloo) averages the gradients. Any --samples works: the sampler
pads (or drops, with --drop-last) as DistributedSampler, so every rank runs
the same number of steps.
"""
import argparse, os, socket, struct, sys
import numpy as np
import torch, torch.distributed as dist
from mpi4py import MPI
# Run from a source tree, the example uses the package beside it
# (pshuffle/python), which finds build/lib/libpshuffle.so by itself.
_PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
if os.path.isfile(os.path.join(_PKG, "pshuffle", "__init__.py")) and _PKG not in sys.path:
    sys.path.insert(0, _PKG)
import pshuffle
from pshuffle.torch import PartialShuffleDataset, PartialShuffleSampler, make_loader

ap = argparse.ArgumentParser()
ap.add_argument("--strategy", default="partial", choices=["global", "local", "partial"])
ap.add_argument("--q", type=float, default=None, help="partial strategy: Q (default 0.3)")
ap.add_argument("--drop-last", action="store_true")
ap.add_argument("--epochs", type=int, default=4)
ap.add_argument("--samples", type=int, default=4096)
ap.add_argument("--store", default=None, help="directory store (default: memory)")
ap.add_argument("--workers", type=int, default=2)
args = ap.parse_args()

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
# torch.distributed next to MPI: rank 0 picks a port and tells the others.
if rank == 0:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
else:
    port = None
port = comm.bcast(port, root=0)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)

# A synthetic set, 10 classes, sorted by label on disk: the worst case for
# local shuffling, since rank r starts with only a few classes.
D, C = 32, 10
rng = np.random.default_rng(0)
centers = rng.normal(size=(C, D)).astype(np.float32)
q = args.q if args.q is not None or args.strategy != "partial" else 0.3
sh = pshuffle.Shuffler(comm, seed=7, strategy=args.strategy, q=q, store_dir=args.store)
if not sh.resumed:
    lo, hi = args.samples * rank // size, args.samples * (rank + 1) // size
    for i in range(lo, hi):
        y = i * C // args.samples
        x = centers[y] + np.random.default_rng(i).normal(scale=1.5, size=D).astype(np.float32)
        sh.add(i, y, x.tobytes())
sh.start()

def decode(blob, label):
    return torch.frombuffer(bytearray(blob), dtype=torch.float32), label

sampler = PartialShuffleSampler(sh, drop_last=args.drop_last)
loader = make_loader(PartialShuffleDataset(sh, decode), batch_size=64, sampler=sampler,
                     num_workers=args.workers)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(D, C))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(sampler.start_epoch, args.epochs):
    sampler.set_epoch(epoch)
    total, steps = 0.0, 0
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward(); opt.step(); total += loss.item(); steps += 1
    steps = comm.gather(steps, root=0)
    hist = sh.label_hist(C)
    classes = sum(1 for h in hist if h)
    if rank == 0:
        print(f"epoch {epoch}: loss {total / len(loader):.3f}, rank 0 holds {classes}/{C} classes, "
              f"steps per rank {steps}")
sampler.finish()
st = comm.gather(sh.stats(), root=0)
if rank == 0:
    print("last exchange: sent", [s["samples_sent"] for s in st], "received", [s["samples_recv"] for s in st])
dist.destroy_process_group()
sh.close()
