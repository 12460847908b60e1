import os
import shutil
import tempfile

import pytest
from mpi4py import MPI


@pytest.fixture
def comm():
    return MPI.COMM_WORLD


@pytest.fixture
def shared_tmp(comm):
    """A directory every rank sees (same machine), removed afterwards."""
    path = tempfile.mkdtemp(prefix="pshuffle-py-") if comm.rank == 0 else None
    path = comm.bcast(path, root=0)
    yield path
    comm.Barrier()
    if comm.rank == 0:
        shutil.rmtree(path, ignore_errors=True)
