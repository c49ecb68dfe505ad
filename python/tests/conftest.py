import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HEAT = os.path.join(HERE, "heat.py")
MPIENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
          "OMPI_MCA_rmaps_base_oversubscribe": "1", "GOMAXPROCS": "1"}


def write_config(d, nodes, extra=""):
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "config.fti")
    with open(p, "w") as f:
        f.write("[basic]\nhead = 0\nnode_size = 1\ngroup_size = %d\nckpt_dir = %s/local\nglbl_dir = %s/global\n"
                "meta_dir = %s/meta\nverbosity = 2\n%s\n[advanced]\nlocal_test = 1\nblock_size = 64\n"
                % (nodes, d, d, d, extra))
    return p


def launcher(np_):
    """The command prefix that runs np_ ranks of the library's MPI, or None without MPI."""
    import ftigo
    mpi = ftigo.library_mpi()
    if mpi == "none":
        return []
    run = shutil.which("mpirun." + mpi)
    if run is None:
        if os.environ.get("FTIGO_REQUIRE_TOOLS") == "1":
            pytest.fail("mpirun.%s missing" % mpi)
        pytest.skip("mpirun.%s missing" % mpi)
    cmd = [run, "-np", str(np_)]
    if mpi == "openmpi":
        for v in ("PYTHONPATH", "FTIGO_LIB", "GOMAXPROCS", "FTIGO_NO_MPI4PY"):
            if v in os.environ or v in MPIENV or v == "PYTHONPATH":
                cmd += ["-x", v]
    return cmd


def env():
    e = dict(os.environ, **MPIENV)
    e["PYTHONPATH"] = os.pathsep.join(p for p in [os.environ.get("PYTHONPATH", "")] + sys.path if p)
    return e
