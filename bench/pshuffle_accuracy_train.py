"""Accuracy of partial shuffling on Fashion-MNIST (helper of bench/pshuffle-accuracy).

    mpirun -n 8 /usr/bin/python3 pshuffle_accuracy_train.py train --out runs.jsonl [...]
    /usr/bin/python3 pshuffle_accuracy_train.py report runs.jsonl [--md X.md --png X.png]

`train` runs, in one MPI job, a list of (seed, partition, strategy, norm)
configurations one after the other, in the order given by --configs (or the
cross product of --seeds, --partitions, --strategies, --norms). The data
path is the one a user writes: the training set is an ordinary map-style
Dataset (FashionMNIST below, uint8 images and integer labels, laid out so
that rank r's share of the initial partition is its contiguous slice),
wrapped in ShuffledDataset with the augmentation passed as transform= (by
default a random crop after a 2-pixel padding and a random horizontal flip,
applied at every access); PartialShuffleSampler hands a DataLoader
(num_workers >= 1) plain integer indices into it and drives the per-epoch
exchange (overlapped with the epoch's training); DDP over gloo averages the
gradients. After every epoch the model is evaluated on the test set twice:
with rank 0's BatchNorm running statistics (what a checkpoint of the DDP
model holds, so what a user gets) and with the statistics recomputed on a
batch drawn uniformly from the whole training set (neither augmented).
Rank 0 appends every finished run as one JSON line to --out, marked with
its data path and augmentation, so a long study that is stopped keeps what
it finished; --resume skips the runs of the same setting already in --out.
"""
import argparse, copy, gzip, json, os, socket, sys, time

import numpy as np

C = 10
PARTITIONS = ("iid", "sorted", "dirichlet")
# Strategies: "global", "local", a constant Q ("0.1"), or "sched" (below).
SCHED = ("exp", 0.5, 0.5, 0.05)  # Q_e = max(0.05, 0.5 * 0.5**e): 0.5, 0.25, 0.125, 0.0625, 0.05, ...
SCHED_NAME = "0.5*0.5^e, min 0.05"
FACE = "ShuffledDataset"  # the data path every run of this script takes (recorded in each run)
AUGMENTS = {"crop-flip": "random crop of 28x28 after a 2-pixel zero padding and a random horizontal flip, "
                         "drawn at every access (transform=)",
            "none": "none"}
# How the runs made before the user-facing data path were read (their raw
# lines have no "face" field): the store's own items, no augmentation.
OLD_SETTING = ("PartialShuffleDataset", "none")


def err(msg):
    print(f"pshuffle-accuracy: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def load_idx(path):
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        err(f"{path}: {e}")
    magic = int.from_bytes(raw[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        err(f"{path}: {data.size} bytes of data, header says {dims}")
    return data.reshape(dims)


def load_fmnist(d):
    x = load_idx(os.path.join(d, "train-images-idx3-ubyte.gz")).reshape(-1, 784)
    y = load_idx(os.path.join(d, "train-labels-idx1-ubyte.gz"))
    tx = load_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784)
    ty = load_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz"))
    return x, y, tx, ty


def partition(y, kind, size, seed, alpha=0.1):
    """Indices of the training set held by each rank at epoch 0 (a list of
    `size` sorted arrays of equal sizes, within one)."""
    n = len(y)
    bounds = [n * r // size for r in range(size + 1)]
    if kind == "iid":
        perm = np.random.default_rng([seed, 11]).permutation(n)
        return [np.sort(perm[bounds[r]:bounds[r + 1]]) for r in range(size)]
    if kind == "sorted":
        perm = np.argsort(y, kind="stable")  # by label: about C/M classes per rank
        return [np.sort(perm[bounds[r]:bounds[r + 1]]) for r in range(size)]
    if kind == "dirichlet":
        # Each rank draws its class mix from Dir(alpha); ranks are then filled
        # to equal sizes by drawing labels from their mix among the samples
        # still unassigned (the balanced variant: skew in labels, not sizes).
        rng = np.random.default_rng([seed, 13])
        pools = [list(rng.permutation(np.flatnonzero(y == c))) for c in range(C)]
        mix = rng.dirichlet([alpha] * C, size=size)
        out = []
        for r in range(size):
            want = bounds[r + 1] - bounds[r]
            got = []
            while len(got) < want:
                avail = np.array([len(p) > 0 for p in pools], dtype=float)
                p = mix[r] * avail
                p = p / p.sum() if p.sum() > 0 else avail / avail.sum()
                take = rng.multinomial(want - len(got), p)
                for c in range(C):
                    k = min(int(take[c]), len(pools[c]))
                    got.extend(pools[c][:k])
                    del pools[c][:k]
            out.append(np.sort(np.array(got, dtype=np.int64)))
        return out
    err(f"unknown partition {kind!r} (expected one of {', '.join(PARTITIONS)})")


def parse_strategy(s):
    if s in ("global", "local", "sched"):
        return s
    try:
        q = float(s)
    except ValueError:
        err(f"strategy {s!r}: expected global, local, sched or a Q in (0, 1)")
    if not 0 < q < 1:
        err(f"strategy {s!r}: Q must lie in (0, 1) (use local for 0, global for a full reshuffle)")
    return f"{q:g}"


def make_model(norm):
    import torch.nn as nn

    def N(c):
        return nn.BatchNorm2d(c) if norm == "bn" else nn.GroupNorm(4, c)
    # A small CNN: strided convolutions keep it cheap enough for 8 ranks on 2 cores.
    return nn.Sequential(nn.Conv2d(1, 8, 5, stride=2, padding=2), N(8), nn.ReLU(),
                         nn.Conv2d(8, 16, 3, stride=2, padding=1), N(16), nn.ReLU(),
                         nn.Flatten(), nn.Linear(16 * 7 * 7, C))


MEAN, STD = 0.286, 0.353


def to_input(u8):
    import torch
    return ((torch.from_numpy(np.ascontiguousarray(u8)).float() / 255.0 - MEAN) / STD).view(-1, 1, 28, 28)


class FashionMNIST:
    """The user's own map-style Dataset (it knows nothing of pshuffle): item i
    is (uint8 image tensor of shape (1, 28, 28), integer label). Deterministic:
    no randomness here, the augmentation is the transform's."""

    def __init__(self, images, labels):
        self.x, self.y = images, labels

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        import torch
        return torch.from_numpy(self.x[i]).view(1, 28, 28), int(self.y[i])


def make_transform(augment):
    """The transform handed to ShuffledDataset: uint8 (1, 28, 28) in, a
    normalised float image out; with "crop-flip", a random 28x28 crop of the
    image padded by 2 zero pixels on each side and a horizontal flip with
    probability 1/2, drawn from torch's generator (which DataLoader seeds per
    worker and epoch) at every access."""
    import torch
    import torch.nn.functional as F

    def plain(x):
        return (x.float() / 255.0 - MEAN) / STD

    def crop_flip(x):
        x = F.pad(x.float() / 255.0, (2, 2, 2, 2))
        i, j = (int(v) for v in torch.randint(0, 5, (2,)))
        x = x[:, i:i + 28, j:j + 28]
        if torch.rand(()) < 0.5:
            x = x.flip(-1)
        return (x - MEAN) / STD
    return crop_flip if augment == "crop-flip" else plain


def configs_from(args):
    if args.configs:
        out = []
        for c in args.configs:
            parts = c.split(":")
            if len(parts) != 4:
                err(f"--configs {c!r}: expected SEED:PARTITION:STRATEGY:NORM")
            seed, part, strat, norm = parts
            if not seed.isdigit():
                err(f"--configs {c!r}: seed must be a non-negative integer")
            if part not in PARTITIONS:
                err(f"--configs {c!r}: partition must be one of {', '.join(PARTITIONS)}")
            if norm not in ("bn", "gn"):
                err(f"--configs {c!r}: norm must be bn or gn")
            out.append((int(seed), part, parse_strategy(strat), norm))
        return out
    return [(s, p, parse_strategy(q), n) for s in args.seeds for p in args.partitions
            for q in args.strategies for n in args.norms]


def setting_of(run):
    """(data path, augmentation) of a raw run."""
    return (run["face"], run["augment"]) if "face" in run else OLD_SETTING


def key(seed, part, strat, norm):
    return f"{seed}:{part}:{strat}:{norm}"


def train(args):
    configs = configs_from(args)
    if args.epochs < 1 or args.batch < 1 or args.workers < 1:
        err("--epochs, --batch and --workers must be >= 1 (the study uses DataLoader workers)")
    import torch, torch.distributed as dist
    from mpi4py import MPI
    import pshuffle
    from pshuffle.torch import PartialShuffleSampler, ShuffledDataset, make_loader

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    if rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    else:
        port = None
    port = comm.bcast(port, root=0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)

    x, y, tx, ty = load_fmnist(args.data)
    if args.train_samples:
        if args.train_samples > len(y):
            err(f"--train-samples {args.train_samples}: the training set has {len(y)}")
        keep = np.sort(np.random.default_rng(1).permutation(len(y))[: args.train_samples])
        x, y = x[keep], y[keep]
    if args.test_samples:
        tx, ty = tx[: args.test_samples], ty[: args.test_samples]
    # Evaluation is sharded over the ranks; correct counts are summed.
    my_tx, my_ty = to_input(tx[rank::size]), torch.from_numpy(ty[rank::size].astype(np.int64))
    # The mixed batch for recomputing BatchNorm statistics: drawn uniformly
    # from the whole training set, the same on every rank.
    mixed = to_input(x[np.random.default_rng(5).choice(len(y), min(args.bn_batch, len(y)), replace=False)])

    done = set()
    if args.resume and rank == 0 and os.path.exists(args.out):
        with open(args.out) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a torn last line from a killed job
                if (r.get("epochs") == args.epochs and r.get("train_samples") == len(y)
                        and setting_of(r) == (FACE, args.augment)):
                    done.add(r["key"])
    done = comm.bcast(done, root=0)

    def evaluate(model):
        model.eval()
        with torch.no_grad():
            return (model(my_tx).argmax(1) == my_ty).sum().item()

    def recompute_bn(model):
        m = copy.deepcopy(model)
        bns = [b for b in m.modules() if isinstance(b, torch.nn.BatchNorm2d)]
        for b in bns:
            b.reset_running_stats(); b.momentum = None  # cumulative average over the chunks
        m.train()
        with torch.no_grad():
            for i in range(0, len(mixed), 256):
                m(mixed[i:i + 256])
        return m

    transform = make_transform(args.augment)
    for seed, part, strat, norm in configs:
        k = key(seed, part, strat, norm)
        if k in done:
            continue
        t0 = time.time()
        torch.manual_seed(seed)
        model = torch.nn.parallel.DistributedDataParallel(make_model(norm))
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)
        if strat in ("global", "local"):
            sh = pshuffle.Shuffler(comm, seed=seed, strategy=strat, store_dir=None, resume=False)
        else:
            sh = pshuffle.Shuffler(comm, seed=seed, strategy="partial", store_dir=None, resume=False,
                                   q=pshuffle.exp_schedule(*SCHED[1:]) if strat == "sched" else float(strat))
        # The user's dataset, laid out as the initial partition: rank r's
        # share is its contiguous slice [r*N/M, (r+1)*N/M), which is what
        # ShuffledDataset stores on rank r (the partition's bounds are the same).
        parts = partition(y, part, size, seed)
        order = np.concatenate(parts)
        mine = parts[rank]
        ds = ShuffledDataset(FashionMNIST(x[order], y[order]), sh, transform=transform)
        if len(sh) != len(mine) or sh.label_hist(C) != np.bincount(y[mine], minlength=C).tolist():
            print(f"pshuffle-accuracy: rank {rank}: ShuffledDataset stored {len(sh)} samples, the {part} "
                  f"partition gives it {len(mine)} with other labels", file=sys.stderr, flush=True)
            comm.Abort(1)
        hist0 = sh.label_hist(C)  # the initial partition, before any exchange
        # global: DistributedSampler's partition of epoch e (epoch 0 already a
        # uniform reshuffle). local and partial start from the initial
        # partition, as in the published scheme.
        sampler = PartialShuffleSampler(ds)
        loader = make_loader(ds, batch_size=args.batch, sampler=sampler, num_workers=args.workers)
        acc0, accmix, loss_curve, hists, t_comp, t_set = [], [], [], [], [], []
        for epoch in range(args.epochs):
            a = time.perf_counter()
            sampler.set_epoch(epoch)
            t_set.append(time.perf_counter() - a)
            hists.append(sh.label_hist(C))
            model.train()
            a = time.perf_counter()
            total, nb = 0.0, 0
            for xb, yb in loader:
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xb), yb)
                loss.backward(); opt.step()
                total += loss.item(); nb += 1
            t_comp.append(time.perf_counter() - a)
            sched.step()
            # Rank 0's running statistics: DDP broadcasts rank 0's buffers
            # before every forward, and a checkpoint of rank 0 holds them.
            for b in model.module.buffers():
                dist.broadcast(b, src=0)
            c0 = evaluate(model.module)
            cm = evaluate(recompute_bn(model.module)) if norm == "bn" else c0
            cnt = comm.allreduce(np.array([c0, cm, len(my_ty), total, nb], dtype=np.float64))
            acc0.append(cnt[0] / cnt[2]); accmix.append(cnt[1] / cnt[2]); loss_curve.append(cnt[3] / cnt[4])
            if rank == 0 and args.verbose:
                print(f"  {k} epoch {epoch}: loss {loss_curve[-1]:.3f}, acc {acc0[-1]:.4f} "
                      f"(mixed-batch BN {accmix[-1]:.4f}), {t_comp[-1]:.1f}s", flush=True)
        a = time.perf_counter()
        sampler.finish()
        t_set.append(time.perf_counter() - a)
        hists.append(sh.label_hist(C))
        hist = sh.history  # one entry per exchange (global: the warm-up first)
        ex = [dict(epoch=h["epoch"], q=h["q"], samples_sent=h["samples_sent"], bytes_sent=h["bytes_sent"],
                   exchange_s=h["exchange_ns"] / 1e9, overlap_s=h["overlap_ns"] / 1e9,
                   blocked_s=h["blocked_ns"] / 1e9, peak_samples=h["peak_samples"],
                   peak_bytes=h["peak_bytes"]) for h in hist]
        per_rank = comm.gather(dict(ex=ex, t_comp=t_comp, t_set=t_set, hist=hists, hist0=hist0, n0=len(mine)), root=0)
        sh.close()
        del loader, sampler, ds
        wall = comm.allreduce(time.time() - t0, op=MPI.MAX)
        if rank == 0:
            totals = [int(sum(sum(p["hist"][e]) for p in per_rank)) for e in range(len(hists))]
            rec = dict(key=k, face=FACE, augment=args.augment, seed=seed, partition=part, strategy=strat,
                       norm=norm, ranks=size,
                       epochs=args.epochs, train_samples=len(y), test_samples=len(ty), batch=args.batch,
                       lr=args.lr, workers=args.workers, acc=acc0, acc_mixed_bn=accmix, loss=loss_curve,
                       totals=totals, wall_s=wall, per_rank=per_rank, torch=torch.__version__)
            with open(args.out, "a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f"{k:28s} final {100 * acc0[-1]:.2f}% (mixed-batch BN {100 * accmix[-1]:.2f}%), best "
                  f"{100 * max(acc0):.2f}%, {wall:.0f}s", flush=True)
            if any(t != len(y) for t in totals):
                print(f"pshuffle-accuracy: {k}: samples lost or duplicated: totals per epoch {totals}, "
                      f"expected {len(y)}", file=sys.stderr, flush=True)
                comm.Abort(1)
    dist.destroy_process_group()
    return 0


# --------------------------------------------------------------------------- report

ORDER_P = {p: i for i, p in enumerate(("sorted", "dirichlet", "iid"))}


def strat_order(s):
    return {"global": (0, 0), "local": (1, 0), "sched": (3, 0)}.get(s, (2, -float(s) if s[0].isdigit() else 0))


def strat_name(s):
    return {"global": "global", "local": "local", "sched": f"Q={SCHED_NAME}"}.get(s, f"Q={s}")


def load_runs(path):
    runs = []
    with open(path) as f:
        for line in f:
            try:
                runs.append(json.loads(line))
            except ValueError:
                pass
    if not runs:
        err(f"{path}: no finished runs")
    settings = sorted({setting_of(r) for r in runs})
    if len(settings) > 1:
        err(f"{path}: mixes runs of data paths and augmentations {settings}: report each setting from its own file")
    return runs


def pm(v):
    v = 100 * np.asarray(v, dtype=float)
    return f"{v.mean():.2f} ± {v.std(ddof=1):.2f}" if len(v) > 1 else f"{v.mean():.2f}"


def report(args):
    runs = load_runs(args.jsonl)
    by = {}
    for r in runs:
        by.setdefault((r["norm"], r["partition"], r["strategy"]), []).append(r)
    keys = sorted(by, key=lambda k: (k[0] != "bn", ORDER_P[k[1]], strat_order(k[2])))
    E = max(r["epochs"] for r in runs)
    lines = ["| norm | partition | strategy | seeds | final acc, rank 0's BN stats | best | final, BN stats on a mixed batch | Δ final vs global |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for k in keys:
        rs = sorted(by[k], key=lambda r: r["seed"])
        fin = [r["acc"][-1] for r in rs]
        g = by.get((k[0], k[1], "global"))
        if g and k[2] != "global":
            # Paired by seed where both ran: same initial weights and partition.
            gs = {r["seed"]: r["acc"][-1] for r in g}
            d = [r["acc"][-1] - gs[r["seed"]] for r in rs if r["seed"] in gs]
            delta = (f"{100 * np.mean(d):+.2f}" + (f" ± {100 * np.std(d, ddof=1):.2f}" if len(d) > 1 else "")
                     + ("" if len(d) == len(rs) else f" ({len(d)} paired)")) if d else "–"
        else:
            delta = "–"
        mixed = pm([r["acc_mixed_bn"][-1] for r in rs]) if k[0] == "bn" else "(no BN)"
        lines.append(f"| {k[0].upper()} | {k[1]} | {strat_name(k[2])} | {len(rs)} | {pm(fin)} | "
                     f"{pm([max(r['acc']) for r in rs])} | {mixed} | {delta} |")
    acc_table = "\n".join(lines)

    # Bytes, storage and time: first seed of each (partition, strategy), BN.
    lines = ["| partition | strategy | exchanged per epoch, all ranks (MiB, mean over epochs) | samples sent per rank per epoch | peak samples stored per rank (max) | initial per rank | compute per epoch (s, median) | exchange per epoch (s, median) | exposed exchange per epoch (s, median) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k in keys:
        if k[0] != "bn":
            continue
        r = sorted(by[k], key=lambda r: r["seed"])[0]
        pr = r["per_rank"]
        skip = 1 if k[2] == "global" else 0  # the blocking exchange to epoch 0's partition (before: the warm-up)
        nex = min(len(p["ex"]) for p in pr)
        idx = range(skip, nex)
        byt = [sum(p["ex"][e]["bytes_sent"] for p in pr) for e in idx]
        sent = [np.mean([p["ex"][e]["samples_sent"] for p in pr]) for e in idx]
        peak = max(p["ex"][e]["peak_samples"] for p in pr for e in range(nex))
        comp = np.median([max(p["t_comp"][e] for p in pr) for e in range(r["epochs"])])
        moved = nex > skip and any(p["ex"][e]["samples_sent"] for p in pr for e in idx)
        exch = f"{np.median([max(p['ex'][e]['exchange_s'] for p in pr) for e in idx]):.3f}" if moved else "– (none)"
        blk = np.median([max(p["ex"][e]["blocked_s"] for p in pr) for e in idx]) if nex > skip else 0.0
        lines.append(f"| {k[1]} | {strat_name(k[2])} | {np.mean(byt) / 2**20:.2f} | {np.mean(sent):.0f} | {peak} | "
                     f"{max(p['n0'] for p in pr)} | {comp:.2f} | {exch} | {blk:.3f} |")
    cost_table = "\n".join(lines)

    # Verdicts computed from the numbers: the skewed partitions, Q >= 0.1
    # against global (the figure: within 0.5 points), local against global.
    lines = []
    for n in ("bn", "gn"):
        for p in ("sorted", "dirichlet", "iid"):
            g = by.get((n, p, "global"))
            if not g:
                continue
            gs = {r["seed"]: r["acc"][-1] for r in g}
            gm = np.mean([r["acc"] for r in g], axis=0)
            # Plateau: the first epoch from which global's mean curve stays
            # within one point of its final value.
            first = next(e for e in range(len(gm)) if all(gm[e:] >= gm[-1] - 0.01))
            lines.append(f"- {n.upper()}, {p}: global ends at {100 * gm[-1]:.2f}% (mean of {len(g)} seed{'s' if len(g) > 1 else ''}) and stays "
                         f"within one point of that from epoch {first + 1} of {len(gm)}.")
            def gap(s):  # worst first: the largest mean loss against global
                d = [r["acc"][-1] - gs[r["seed"]] for r in by[(n, p, s)] if r["seed"] in gs]
                return np.mean(d) if d else 0.0
            for s in sorted((k[2] for k in by if k[0] == n and k[1] == p and k[2] != "global"), key=gap):
                d = [r["acc"][-1] - gs[r["seed"]] for r in by[(n, p, s)] if r["seed"] in gs]
                if not d:
                    continue
                sd = np.std(d, ddof=1) if len(d) > 1 else float("nan")
                se = sd / np.sqrt(len(d)) if len(d) > 1 else float("nan")
                within = abs(np.mean(d)) <= 0.005
                lines.append(f"  - {strat_name(s)}: final test accuracy {100 * np.mean(d):+.2f} points against global"
                             + (f" (± {100 * sd:.2f} over {len(d)} seeds, standard error {100 * se:.2f})"
                                if len(d) > 1 else " (1 seed)")
                             + ("; inside" if within else "; outside") + " the 0.5-point target")
    verdict = "\n".join(lines)

    # Mixing of the label-sorted start: share of a rank's samples whose class
    # it held at epoch 0 (mean over ranks, first seed), per store epoch.
    mix = []
    sk = [k for k in keys if k[0] == "bn" and k[1] == "sorted"]
    if sk:
        E1 = max(len(sorted(by[k], key=lambda r: r["seed"])[0]["per_rank"][0]["hist"]) for k in sk)
        show = sorted({0, 1, 2, 4, E1 - 1} & set(range(E1)))
        mix = ["| strategy | " + " | ".join(f"store epoch {e}" for e in show) + " |", "|---|" + "---:|" * len(show)]
        # The rank's classes at epoch 0: recorded before any exchange (hist0);
        # in runs without it, the local run's first store (nothing has moved
        # then, and the label-sorted partition does not depend on the seed).
        loc = by.get(("bn", "sorted", "local"))
        h0s = None
        if loc:
            h0s = [p.get("hist0", p["hist"][0]) for p in sorted(loc, key=lambda r: r["seed"])[0]["per_rank"]]
        for k in sk:
            pr = sorted(by[k], key=lambda r: r["seed"])[0]["per_rank"]
            row = []
            for e in show:
                v = []
                for rk, p in enumerate(pr):
                    if e >= len(p["hist"]):
                        continue
                    h0 = np.array(p.get("hist0") or (h0s[rk] if h0s else p["hist"][0]), float)
                    h = np.array(p["hist"][e], float)
                    v.append((h * (h0 > 0)).sum() / max(1.0, h.sum()))
                row.append(f"{100 * np.mean(v):.1f}%" if v else "–")
            mix.append(f"| {strat_name(k[2])} | " + " | ".join(row) + " |")
    mix = "\n".join(mix)
    perfect = None
    if sk and h0s:
        tot = np.sum(np.array(h0s, float), axis=0)
        perfect = float(np.mean([(tot * (np.array(h) > 0)).sum() / tot.sum() for h in h0s]))

    print(acc_table)
    print()
    print(verdict)
    print()
    print(cost_table)
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        panels = [(n, p) for n in ("bn", "gn") for p in ("sorted", "dirichlet", "iid")
                  if any(k[0] == n and k[1] == p for k in keys)]
        cols = min(3, len(panels))
        rows = (len(panels) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
        allstrat = sorted({k[2] for k in keys}, key=strat_order)
        color = {st: f"C{i}" for i, st in enumerate(allstrat)}  # the same colour in every panel
        for ax, (n, p) in zip(axes.flat, panels):
            lo = 1.0
            for k in [k for k in keys if k[0] == n and k[1] == p]:
                curves = np.array([r["acc"] for r in by[k]])
                ep = np.arange(1, curves.shape[1] + 1)
                ln, = ax.plot(ep, 100 * curves.mean(0), marker="o", ms=3, label=strat_name(k[2]), color=color[k[2]])
                lo = min(lo, float(curves.mean(0)[-1]))
                if len(curves) > 1:
                    ax.fill_between(ep, 100 * curves.min(0), 100 * curves.max(0), color=ln.get_color(), alpha=0.12)
            ax.set_title(f"{'BatchNorm' if n == 'bn' else 'GroupNorm'}, {p} partition", fontsize=10)
            ax.set_xlabel("epoch"); ax.set_ylabel("test accuracy (%)")
            ax.set_ylim(max(0, 100 * lo - 10), None)
            ax.grid(alpha=0.3); ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        nseeds = len({r["seed"] for r in runs})
        fig.suptitle(f"Fashion-MNIST, {runs[0]['train_samples']} training images, {runs[0]['ranks']} ranks, "
                     f"small CNN, augmentation: {setting_of(runs[0])[1]};\nmean over seeds (band: min..max), "
                     f"rank 0's BN statistics", fontsize=10)
        fig.tight_layout()
        fig.savefig(args.png, dpi=100)
    if args.md:
        nseeds = len({r["seed"] for r in runs})
        with open(args.md, "w") as f:
            face, aug = setting_of(runs[0])
            f.write(f"Data path: `{face}`"
                    + (" over the user's own map-style Dataset, the sampler's integer indices into it"
                       if face == FACE else " (the store's own items)")
                    + f"; augmentation: {AUGMENTS.get(aug, aug)}.\n")
            f.write(f"Raw runs: {len(runs)} ({nseeds} seed{'s' if nseeds > 1 else ''}), "
                    f"{runs[0]['train_samples']:,} training images, {runs[0]['test_samples']:,} test images, "
                    f"{runs[0]['ranks']} ranks, {E} epochs, batch {runs[0]['batch']} per rank, "
                    f"{runs[0]['workers']} DataLoader worker(s) per rank; wall time per run "
                    f"{min(r['wall_s'] for r in runs):.0f}..{max(r['wall_s'] for r in runs):.0f} s.\n\n")
            f.write("Runs held (norm, partition: strategy and seeds):\n\n")
            for k in keys:
                f.write(f"- {k[0].upper()}, {k[1]}, {strat_name(k[2])}: seed"
                        f"{'s' if len(by[k]) > 1 else ''} {', '.join(str(r['seed']) for r in sorted(by[k], key=lambda r: r['seed']))}\n")
            f.write("\n#### Test accuracy (%), mean ± std over seeds\n\n" + acc_table + "\n\n")
            f.write("#### Against global shuffling (final accuracy, paired by seed; worst first)\n\n" + verdict + "\n\n")
            f.write(f"![test accuracy per epoch]({os.path.basename(args.png or 'pshuffle-accuracy.png')})\n\n")
            if mix:
                f.write("#### Mixing of the label-sorted start (BatchNorm runs, first seed)\n\n"
                        "Share of a rank's samples whose class the rank held at epoch 0 (mean over ranks); "
                        "store epoch e is what epoch e trains on (global: "
                        + ("DistributedSampler's partition of epoch e" if setting_of(runs[0])[0] == FACE
                           else "after its warm-up exchange") + "); "
                        + (f"a uniform partition would give {100 * perfect:.1f}% (each rank starts with one "
                           "to three of the ten classes).\n\n" if perfect else "\n\n") + mix + "\n\n")
            f.write("#### Bytes, storage and time per epoch (BatchNorm runs, first seed)\n\n"
                    "Exchanged: payload bytes sent by all ranks together ("
                    + ("808 B per image: its 784 bytes and the encoder's dtype and shape"
                       if setting_of(runs[0])[0] == FACE else "784 B per image") + "). Times are the "
                    "maximum over ranks, median over epochs: *compute* is the epoch's training loop (with the "
                    "exchange progressing behind it), *exchange* the time from `ps_exchange_begin` to the "
                    "completion of the last message, *exposed* the time spent in `ps_exchange_end` (commit and "
                    "agreement included) that training waited for.\n\n" + cost_table + "\n")
    return 0


def main():
    ap = argparse.ArgumentParser(prog="pshuffle_accuracy_train.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    t.add_argument("--out", required=True, help="JSON lines, one per finished run (appended)")
    t.add_argument("--resume", action="store_true", help="skip the runs already in --out")
    t.add_argument("--configs", nargs="+", help="SEED:PARTITION:STRATEGY:NORM, in the order to run")
    t.add_argument("--partitions", nargs="+", default=["sorted"], choices=PARTITIONS)
    t.add_argument("--strategies", nargs="+", default=["global", "local", "0.1"])
    t.add_argument("--norms", nargs="+", default=["bn"], choices=["bn", "gn"])
    t.add_argument("--seeds", nargs="+", type=int, default=[1])
    t.add_argument("--epochs", type=int, default=10)
    t.add_argument("--batch", type=int, default=32, help="per rank")
    t.add_argument("--lr", type=float, default=0.05)
    t.add_argument("--workers", type=int, default=1, help="DataLoader workers per rank (>= 1)")
    t.add_argument("--bn-batch", type=int, default=2048, help="mixed batch for recomputed BN statistics")
    t.add_argument("--train-samples", type=int, default=0, help="random subset of the training set (0: all)")
    t.add_argument("--test-samples", type=int, default=0, help="first N test samples (0: all)")
    t.add_argument("--augment", default="crop-flip", choices=sorted(AUGMENTS),
                   help="the transform's random augmentation, at every access (default crop-flip)")
    t.add_argument("--verbose", action="store_true")
    r = sub.add_parser("report")
    r.add_argument("jsonl")
    r.add_argument("--md")
    r.add_argument("--png")
    args = ap.parse_args()
    return train(args) if args.cmd == "train" else report(args)


if __name__ == "__main__":
    sys.exit(main())
