"""The published pattern re-implemented for comparison (Nguyen et al.,
IPDPS 2022, partial shuffling with mpi4py): for each exchanged sample, a
shared random shift picks the destination, the sample is pickled and sent
point to point, and all ranks meet at a barrier before the next sample.

    mpirun -n M python3 p2p_pattern.py N SIZE REPS   (prints one JSON line)
Every rank exchanges all N of its samples (Q=1), SIZE bytes each.
"""
import json, pickle, random, statistics, sys, time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, M = comm.rank, comm.size
n, size, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
samples = [(rank * n + i, np.full(size, i % 251, dtype=np.uint8)) for i in range(n)]
rates = []
for rep in range(reps):
    rng = random.Random(1000 + rep)  # same on every rank: the shared permutation
    comm.Barrier()
    t0 = time.perf_counter()
    out = []
    for i in range(n):
        shift = rng.randrange(1, M)
        dst, src = (rank + shift) % M, (rank - shift) % M
        req = comm.isend(pickle.dumps(samples[i]), dest=dst, tag=7)
        out.append(pickle.loads(comm.recv(source=src, tag=7)))
        req.wait()
        comm.Barrier()
    dt = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    samples = out
    rates.append(M * n * size / dt / 2**20)
if rank == 0:
    print(json.dumps({"ranks": M, "size": size, "n": n, "p2p_MiBps": statistics.median(rates)}))
