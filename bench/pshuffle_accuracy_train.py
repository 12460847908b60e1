"""Accuracy of partial shuffling on Fashion-MNIST (helper of bench/pshuffle-accuracy).

    mpirun -n 4 /usr/bin/python3 pshuffle_accuracy_train.py train --out runs.json [...]
    /usr/bin/python3 pshuffle_accuracy_train.py report runs.json --md X.md --png X.png

`train` runs, in one MPI job, every (partition, Q, seed) configuration one
after the other: each rank holds 1/M of the training set in a pshuffle
store, PartialShuffleSampler drives the per-epoch exchange (overlapped with
training), DDP (gloo) averages the gradients. After every epoch the model is
evaluated on the test set. Rank 0 writes every run (accuracy per epoch,
per-rank label histograms per epoch, exchange statistics) to a JSON file.

The model is an MLP with BatchNorm. DDP keeps BatchNorm per rank: batch
statistics come from the rank's own mini-batch, and the running statistics
used at evaluation are rank 0's (DDP broadcasts rank 0's buffers before every
forward). This is the setting in which the initial partition matters; see
docs/results/pshuffle-accuracy.md.
"""
import argparse, gzip, json, os, socket, sys, time

import numpy as np

C = 10


def load_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise SystemExit(f"pshuffle-accuracy: {path}: {data.size} bytes of data, header says {dims}")
    return data.reshape(dims)


def load_fmnist(d):
    x = load_idx(os.path.join(d, "train-images-idx3-ubyte.gz")).reshape(-1, 784)
    y = load_idx(os.path.join(d, "train-labels-idx1-ubyte.gz"))
    tx = load_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784)
    ty = load_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz"))
    return x, y, tx, ty


def partition(y, kind, rank, size, seed=0):
    """Original indices held by `rank` at epoch 0."""
    n = len(y)
    if kind == "iid":
        perm = np.random.default_rng(seed).permutation(n)
    elif kind == "skewed":
        perm = np.argsort(y, kind="stable")  # sorted by label: ~C/M classes per rank
    else:
        raise SystemExit(f"pshuffle-accuracy: unknown partition {kind!r}")
    return np.sort(perm[n * rank // size: n * (rank + 1) // size])


def train(args):
    import torch, torch.distributed as dist
    from mpi4py import MPI
    import pshuffle
    from pshuffle.torch import PartialShuffleDataset, PartialShuffleSampler

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
        keep = np.random.default_rng(1).permutation(len(y))[: args.train_samples]
        keep.sort(); x, y = x[keep], y[keep]
    if args.test_samples:
        tx, ty = tx[: args.test_samples], ty[: args.test_samples]
    # Evaluation is sharded over the ranks; correct counts are summed.
    my_tx = torch.from_numpy(tx[rank::size].astype(np.float32) / 255.0)
    my_ty = torch.from_numpy(ty[rank::size].astype(np.int64))

    def decode(blob, label):
        return torch.frombuffer(bytearray(blob), dtype=torch.uint8).float() / 255.0, label

    def make_model():
        layers = []
        dims = [784] + [args.hidden] * args.layers
        for a, b in zip(dims, dims[1:]):
            layers.append(torch.nn.Linear(a, b))
            if args.norm == "bn":
                layers.append(torch.nn.BatchNorm1d(b))
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(dims[-1], C))
        return torch.nn.Sequential(*layers)

    runs = []
    configs = [(p, q, s) for s in args.seeds for p in args.partitions for q in args.qs]
    for part, q, seed in configs:
        t0 = time.time()
        torch.manual_seed(seed)
        model = torch.nn.parallel.DistributedDataParallel(make_model())
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        sh = pshuffle.Shuffler(comm, seed=seed, q=q, store_dir=None, resume=False)
        mine = partition(y, part, rank, size)
        for i in mine:
            sh.add(int(i), int(y[i]), x[i].tobytes())
        sh.start()
        sampler = PartialShuffleSampler(sh)
        loader = torch.utils.data.DataLoader(PartialShuffleDataset(sh, decode),
                                             batch_size=args.batch, sampler=sampler, num_workers=0)
        acc, loss_curve, hists = [], [], []
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            # The store as this epoch reads it (received samples show from the next epoch).
            hists.append(comm.gather(sh.label_hist(C), root=0))
            model.train()
            total, nb = 0.0, 0
            for xb, yb in loader:
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xb), yb)
                loss.backward(); opt.step()
                total += loss.item(); nb += 1
            # Evaluate with rank 0's running statistics, which DDP would use
            # at the next forward anyway.
            for b in model.module.buffers():
                dist.broadcast(b, src=0)
            model.module.eval()
            with torch.no_grad():
                correct = (model.module(my_tx).argmax(1) == my_ty).sum().item()
            counts = comm.allreduce(np.array([correct, len(my_ty), total, nb], dtype=np.float64))
            acc.append(counts[0] / counts[1])
            loss_curve.append(counts[2] / counts[3])
            if rank == 0 and args.verbose:
                print(f"  {part} Q={q} seed={seed} epoch {epoch}: train loss {loss_curve[-1]:.3f}, "
                      f"test acc {acc[-1]:.4f}", flush=True)
        sampler.finish()
        hists.append(comm.gather(sh.label_hist(C), root=0))
        sent = comm.gather([h["samples_sent"] for h in sh.history], root=0)
        recv = comm.gather([h["samples_recv"] for h in sh.history], root=0)
        sh.close()
        wall = comm.allreduce(time.time() - t0, op=MPI.MAX)
        if rank == 0:
            totals = [int(sum(sum(r) for r in h)) for h in hists]
            runs.append(dict(partition=part, q=q, seed=seed, acc=acc, loss=loss_curve,
                             hist=hists, sent=sent, recv=recv, totals=totals, wall_s=wall))
            print(f"{part:6s} Q={q:<4} seed={seed}: final test acc {acc[-1]:.4f} "
                  f"(epochs: {' '.join(f'{a:.3f}' for a in acc)}) {wall:.0f}s", flush=True)
            if any(t != len(y) for t in totals):
                print(f"pshuffle-accuracy: samples lost or duplicated: totals per epoch {totals}, "
                      f"expected {len(y)}", file=sys.stderr, flush=True)
    if rank == 0:
        meta = dict(ranks=size, epochs=args.epochs, batch=args.batch, lr=args.lr, hidden=args.hidden,
                    layers=args.layers, norm=args.norm, train_samples=len(y), test_samples=len(ty),
                    torch=torch.__version__)
        with open(args.out, "w") as f:
            json.dump(dict(meta=meta, runs=runs), f)
    dist.destroy_process_group()
    bad = comm.allreduce(1 if rank == 0 and any(t != len(y) for r in runs for t in r["totals"]) else 0)
    return 1 if bad else 0


def report(args):
    doc = json.load(open(args.json))
    meta, runs = doc["meta"], doc["runs"]
    parts = sorted({r["partition"] for r in runs}, key=["iid", "skewed"].index)
    qs = sorted({r["q"] for r in runs})
    seeds = sorted({r["seed"] for r in runs})
    E = meta["epochs"]
    by = {}
    for r in runs:
        by.setdefault((r["partition"], r["q"]), []).append(r)

    def qname(q):
        return {0.0: "0 (local)", 1.0: "1 (global)"}.get(q, f"{q:g}")

    lines = ["| partition | Q | final test acc, median | per seed | test acc per epoch (median), % |",
             "|---|---:|---:|---|---|"]
    for p in parts:
        for q in qs:
            rs = by.get((p, q), [])
            fin = [r["acc"][-1] for r in rs]
            lines.append(f"| {p} | {qname(q)} | {100 * np.median(fin):.2f}% | "
                         + ", ".join(f"{100 * a:.2f}" for a in fin) + " | "
                         + ", ".join(f"{100 * a:.1f}" for a in np.median([r["acc"] for r in rs], axis=0))
                         + " |")
    table = "\n".join(lines)

    # Mixing: on the skewed partition, share of each rank's samples whose
    # label was among that rank's initial labels (1.0 = not mixed at all).
    def own_share(run):
        h0 = np.array(run["hist"][0], dtype=float)  # ranks x C
        out = []
        for h in run["hist"]:
            h = np.array(h, dtype=float)
            out.append(float(np.mean([(h[r] * (h0[r] > 0)).sum() / h[r].sum() for r in range(len(h))])))
        return out

    mix = []
    if "skewed" in parts:
        mix = ["| Q | " + " | ".join(f"epoch {e}" for e in range(E + 1)) + " |",
               "|---:|" + "---:|" * (E + 1)]
        for q in qs:
            r = by[("skewed", q)][0]
            mix.append(f"| {qname(q)} | " + " | ".join(f"{100 * v:.1f}%" for v in own_share(r)) + " |")
    mix = "\n".join(mix)

    hist_txt = ""
    pick = [q for q in qs if 0 < q < 1][:1] or qs[:1]
    if "skewed" in parts and pick:
        r = by[("skewed", pick[0])][0]
        rows = []
        for e in (0, 1, len(r["hist"]) - 1):
            for k, h in enumerate(r["hist"][e]):
                rows.append(f"| {e} | {k} | " + " | ".join(str(c) for c in h) + " |")
        hist_txt = (f"Per-rank label histograms (`Shuffler.label_hist`), skewed partition, Q={pick[0]:g}, "
                    f"seed {r['seed']} (epoch {len(r['hist']) - 1} = the store after the last exchange):\n\n"
                    "| epoch | rank | " + " | ".join(f"class {c}" for c in range(C)) + " |\n"
                    "|---:|---:|" + "---:|" * C + "\n" + "\n".join(rows))

    print(table)
    if mix:
        print()
        print(mix)
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(parts) + (1 if "skewed" in parts else 0), figsize=(13, 3.8))
        axes = np.atleast_1d(axes)
        for ax, p in zip(axes, parts):
            lo = 1.0
            for q in qs:
                curves = np.array([r["acc"] for r in by[(p, q)]])
                med = np.median(curves, axis=0)
                lo = min(lo, float(curves.min()))
                ep = np.arange(1, E + 1)
                ln, = ax.plot(ep, 100 * med, marker="o", label=f"Q={qname(q)}")
                if len(curves) > 1:
                    ax.fill_between(ep, 100 * curves.min(0), 100 * curves.max(0), color=ln.get_color(), alpha=0.15)
            ax.set_title(f"{p} initial partition")
            ax.set_xlabel("epoch"); ax.set_ylabel("test accuracy (%)")
            ax.set_xticks(range(1, E + 1))
            ax.set_ylim(max(0, 100 * lo - 2), None)
            ax.grid(alpha=0.3); ax.legend(fontsize=8)
        if "skewed" in parts:
            ax = axes[-1]
            for q in qs:
                ax.plot(range(E + 1), [100 * v for v in own_share(by[("skewed", q)][0])], marker="o",
                        label=f"Q={qname(q)}")
            ax.set_title("skewed: samples of a rank's initial classes")
            ax.set_xlabel("epoch (store state)"); ax.set_ylabel("% of rank's samples (mean of ranks)")
            ax.grid(alpha=0.3); ax.legend(fontsize=8)
        fig.suptitle(f"Fashion-MNIST ({meta['train_samples']} training images), {meta['ranks']} ranks, "
                     f"MLP+{'BatchNorm' if meta['norm'] == 'bn' else 'no norm'}, "
                     + (f"median of {len(seeds)} seeds" if len(seeds) > 1 else "1 seed")
                     + (" (band: min..max)" if len(seeds) > 1 else ""), fontsize=10)
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)
    if args.md:
        # A verdict computed from the numbers, not written by hand.
        verdict = []
        for p in parts:
            g = np.median([r["acc"][-1] for r in by.get((p, 1.0), [])]) if (p, 1.0) in by else None
            if g is None:
                continue
            spread = max(max(r["acc"][-1] for r in by[(p, q)]) - min(r["acc"][-1] for r in by[(p, q)])
                         for q in qs)
            for q in qs:
                if q == 1.0:
                    continue
                d = np.median([r["acc"][-1] for r in by[(p, q)]]) - g
                verdict.append(f"- {p}, Q={q:g}: {100 * d:+.2f} points against global shuffling"
                               + (f" (largest seed-to-seed spread of one configuration on this partition: "
                                  f"{100 * spread:.2f} points)." if len(seeds) > 1 else
                                  " (one seed: no seed-to-seed spread measured)."))
        with open(args.md, "w") as f:
            f.write(open(args.md_head).read() if args.md_head else "")
            f.write("## Final test accuracy\n\n" + table + "\n\n")
            f.write("Median final accuracy minus that of global shuffling (Q=1), same partition:\n\n"
                    + "\n".join(verdict) + "\n\n")
            f.write("![accuracy per epoch](pshuffle-accuracy.png)\n\n")
            if mix:
                f.write("## Mixing of the skewed partition\n\nShare of a rank's samples whose class was among "
                        "the rank's classes at epoch 0 (mean over ranks, first seed). Epoch e is the store "
                        "that epoch e trains on; the last column is the store after the last exchange.\n\n"
                        + mix + "\n\n" + hist_txt + "\n\n")
            tot = sorted({t for r in runs for t in r["totals"]})
            f.write(f"Samples over all ranks, every epoch of every run: {tot} "
                    f"(training set: {meta['train_samples']}).\n\n")
            f.write(f"Wall time per configuration: {min(r['wall_s'] for r in runs):.0f}.."
                    f"{max(r['wall_s'] for r in runs):.0f} s.\n")
            if args.md_tail:
                f.write("\n" + open(args.md_tail).read())
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    t.add_argument("--out", required=True)
    t.add_argument("--partitions", nargs="+", default=["iid", "skewed"])
    t.add_argument("--qs", nargs="+", type=float, default=[0.0, 0.1, 0.3, 1.0])
    t.add_argument("--seeds", nargs="+", type=int, default=[1])
    t.add_argument("--epochs", type=int, default=5)
    t.add_argument("--batch", type=int, default=256)
    t.add_argument("--lr", type=float, default=0.1)
    t.add_argument("--hidden", type=int, default=256)
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--norm", choices=["bn", "none"], default="bn")
    t.add_argument("--train-samples", type=int, default=0, help="subset of the training set (0: all)")
    t.add_argument("--test-samples", type=int, default=0, help="first N test samples (0: all)")
    t.add_argument("--verbose", action="store_true")
    r = sub.add_parser("report")
    r.add_argument("json")
    r.add_argument("--md")
    r.add_argument("--png")
    r.add_argument("--md-head", help="file written before the tables")
    r.add_argument("--md-tail", help="file appended after the tables")
    args = ap.parse_args()
    return train(args) if args.cmd == "train" else report(args)


if __name__ == "__main__":
    sys.exit(main())
