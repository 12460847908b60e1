"""Finds and loads libhetmem.so. Internal: the binding modules call load().

Looked for, in order: $HETMEM_LIB (a path; an override); next to this
package; relative to the prefix the package is installed in
(PREFIX/lib/python3.X/dist-packages/hetmem -> PREFIX/lib) or to the source
tree it sits in (python/hetmem -> build/lib); next to the `hetmem` program
on PATH (PREFIX/bin -> PREFIX/lib); then the dynamic linker's path.
"""
import ctypes
import ctypes.util
import os
import shutil

_NAME = "hetmem"
_FILE = "lib%s.so" % _NAME
_ENV = "HETMEM_LIB"
_HERE = os.path.dirname(os.path.abspath(__file__))


def _read_version():
    try:
        with open(os.path.join(_HERE, "VERSION")) as f:
            return f.read().strip()
    except OSError:
        return "unknown"


VERSION = _read_version()


def candidates():
    """The paths tried before the linker's path, in order."""
    yield os.path.join(_HERE, _FILE)
    d = _HERE
    for _ in range(4):
        d = os.path.dirname(d)
        yield os.path.join(d, "lib", _FILE)
        yield os.path.join(d, "build", "lib", _FILE)
    exe = shutil.which(_NAME)
    if exe:
        yield os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(exe)), "..", "lib", _FILE))


def find():
    """The path (or soname for the linker) of the library that load() opens."""
    path = os.environ.get(_ENV)
    if path:
        if not os.path.exists(path):
            raise ImportError("%s: %s=%s: no such file" % (_NAME, _ENV, path))
        return path
    for p in candidates():
        if os.path.exists(p):
            return p
    found = ctypes.util.find_library(_NAME)
    if found:
        return found
    raise ImportError("%s: %s not found next to the package, under its prefix, next to the "
                      "'%s' program or in the linker's path: install hetmem (make install) "
                      "or set %s to its path" % (_NAME, _FILE, _NAME, _ENV))


_lib = None


def load():
    """libhetmem as a ctypes.CDLL, opened once per process."""
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(find())
    return _lib


__all__ = ["load", "find", "candidates", "VERSION"]
