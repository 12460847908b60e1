"""Runs the Python tests on every rank of an mpirun job (pytest on each
rank). "No tests collected" (exit 5) counts as a failure."""
import os
import sys

import pytest

here = os.path.dirname(os.path.abspath(__file__))
rc = pytest.main(["-q", "-p", "no:cacheprovider", "-o", "faulthandler_timeout=100", here] + sys.argv[1:])
if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
    print("run.py: no tests collected", file=sys.stderr)
    rc = 1
sys.exit(int(rc))
