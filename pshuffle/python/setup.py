"""Builds the pshuffle package with a copy of libpshuffle.so inside it, so that the
installed package loads its own library wherever pip puts it.

The library copied is $PSHUFFLE_LIB when set at build time, else the one a
`make build` left in the source tree (build/lib/libpshuffle.so). Without either, the package
is built without a copy and looks for the library at run time (README.md).
"""
import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def library():
    env = os.environ.get("PSHUFFLE_LIB")
    if env:
        if not os.path.isfile(env):
            sys.exit("pshuffle: PSHUFFLE_LIB=%s: no such file" % env)
        return env
    path = os.path.normpath(os.path.join(HERE, "..", "..", "build", "lib", "libpshuffle.so"))
    return path if os.path.isfile(path) else None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = library()
        if lib is None:
            print("pshuffle: no libpshuffle.so to copy into the package (run `make build` first, or set "
                  "PSHUFFLE_LIB): it will be looked for at run time", file=sys.stderr)
            return
        dest = os.path.join(self.build_lib, "pshuffle", "libpshuffle.so")
        # A copy of the file the link points to, under the name the package loads.
        shutil.copyfile(os.path.realpath(lib), dest)


setup(cmdclass={"build_py": BuildPyWithLibrary})
