"""Lets `python3 -m pytest python/tests` run from a source tree with no
settings: the package beside these tests (python/hetmem) is imported, and it
finds the library a `make build` left in build/lib by itself."""
import os
import sys

_PYTHON = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _PYTHON not in sys.path:
    sys.path.insert(0, _PYTHON)
