"""Builds libftigo.so for the MPI found (or FTIGO_MPI=openmpi|mpich|none)
with capi/build.sh and bundles it in the package. FTIGO_LIB names a
libftigo.so built before for that MPI (capi/build.sh), to bundle instead."""

import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_SH = os.path.join(HERE, os.pardir, "capi", "build.sh")


def flavour():
    """The MPI to build for: FTIGO_MPI, else mpi4py's MPI, else none."""
    name = os.environ.get("FTIGO_MPI", "")
    if name:
        if name not in ("openmpi", "mpich", "none"):
            raise SystemExit("FTIGO_MPI must be openmpi, mpich or none, not %r" % name)
        return name
    try:
        from mpi4py import MPI  # noqa: the MPI mpi4py was built for

        version = MPI.Get_library_version()
    except Exception:  # no mpi4py: a serial library
        return "none"
    if "Open MPI" in version:
        return "openmpi"
    if "MPICH" in version:
        return "mpich"
    return "none"


class BuildWithLib(build_py):
    """build_py, then libftigo.so into ftigo/_lib."""

    def run(self):
        super().run()
        mpi = flavour()
        dst = os.path.join(self.build_lib, "ftigo", "_lib")
        prebuilt = os.environ.get("FTIGO_LIB", "")
        if prebuilt:
            if not os.path.isfile(prebuilt):
                raise SystemExit("FTIGO_LIB=%s: no such file" % prebuilt)
            self.bundle(prebuilt, dst, mpi)
            return
        if not os.path.exists(BUILD_SH):
            raise SystemExit("capi/build.sh not found beside python/: build from the ftigo source tree")
        out = tempfile.mkdtemp(prefix="ftigo-build-")
        try:
            env = dict(os.environ, FTIGO_FORTRAN="0")
            if "GO" not in env and shutil.which("go") is None and os.path.exists("/usr/local/go/bin/go"):
                env["GO"] = "/usr/local/go/bin/go"
            subprocess.check_call(["bash", BUILD_SH, "--mpi", mpi, out], env=env)
            self.bundle(os.path.join(out, "lib", "libftigo.so"), dst, mpi)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    @staticmethod
    def bundle(lib, dst, mpi):
        """Copies lib into dst with the name of its MPI."""
        os.makedirs(dst, exist_ok=True)
        shutil.copy2(lib, os.path.join(dst, "libftigo.so"))
        with open(os.path.join(dst, "MPI"), "w") as f:
            f.write(mpi + "\n")


class BinaryDistribution(Distribution):
    """The package carries a shared library: platform wheels."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLib}, distclass=BinaryDistribution)
