"""hetmem: Python bindings of libhetmem (heterogeneous-memory placement).

The bindings load libhetmem.so through ctypes (hetmem._lib.load()); the
library is found without settings when hetmem is installed (make install),
or from a source tree's build/, or at $HETMEM_LIB.
"""
from ._lib import VERSION as __version__

__all__ = ["__version__"]
