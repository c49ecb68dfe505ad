import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import ftigo
from conftest import HEAT, env, launcher, write_config

NX, ROWS = 256, 64


def heat(cfg, out, np_, iters, every, levels, crash=False, kill_on=None, pause_ms=0):
    """Runs heat.py on np_ ranks; with kill_on, SIGKILLs the job at the
    first output line containing it. pause_ms pauses before each
    checkpoint (HEATDIS_PAUSE_MS). Returns (returncode, output)."""
    os.makedirs(out, exist_ok=True)
    cmd = launcher(np_) + [sys.executable, HEAT, cfg, out, str(NX), str(ROWS), str(iters), str(every), levels]
    if crash:
        cmd.append("crash")
    e = env()
    if pause_ms:
        e["HEATDIS_PAUSE_MS"] = str(pause_ms)
        if cmd[:1] and cmd[0].endswith("mpirun.openmpi"):
            cmd[1:1] = ["-x", "HEATDIS_PAUSE_MS"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e, text=True,
                         start_new_session=True)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if kill_on and kill_on in line:
            os.killpg(p.pid, signal.SIGKILL)
            break
    p.wait(timeout=300)
    if kill_on:
        # A launcher may start its ranks in sessions of their own, and a
        # rank outliving the kill still holds the run's lock: kill every
        # process of this job, found by its config path, and wait for them.
        reap(cfg)
    return p.returncode, "".join(lines) + p.stdout.read()


def reap(cfg, timeout=30):
    """SIGKILLs every process whose command line names cfg, until none is left."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if cfg.encode() in argv:
                left.append(int(pid))
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        if not left:
            return
        if time.monotonic() > deadline:
            raise AssertionError("processes %s of the killed job outlive it" % left)
        time.sleep(0.1)


def finals(out, np_):
    return [open(os.path.join(out, "final-%04d.bin" % r), "rb").read() for r in range(np_)]


def ranks():
    return 1 if ftigo.library_mpi() == "none" or os.environ.get("FTIGO_NO_MPI4PY") else 2


def test_heat_killed_during_checkpoint_relaunched_bit_identical(tmp_path):
    np_ = ranks()
    ref = str(tmp_path / "ref")
    rc, out = heat(write_config(ref, np_), ref + "/out", np_, 400, 0, "0")
    assert rc == 0, out
    run = str(tmp_path / "run")
    cfg = write_config(run, np_)
    levels = "1234" if np_ > 1 else "14"  # L2 and L3 need a group of 2 nodes
    # The small grid's last 100 iterations take milliseconds: on a loaded
    # machine the job ended before the kill landed. A pause at each
    # checkpoint's start leaves the kill time to land.
    rc, out = heat(cfg, run + "/out", np_, 400, 100, levels, kill_on="ckpt-begin id=3 ", pause_ms=2000)
    assert rc != 0, "the first launch must die:\n" + out
    assert "ckpt-end id=2 level=%s rc=1" % levels[1] in out
    assert not os.path.exists(run + "/out/final-0000.bin")
    rc, out = heat(cfg, run + "/out", np_, 400, 100, levels)
    assert rc == 0, out
    # The kill lands during checkpoint 3 or, the launcher's output being
    # late, after it: the restart is from checkpoint 2 or 3.
    import re
    starts = re.findall(r"EVENT rank=\d+ start status=1 iter=(\d+)", out)
    assert len(starts) == np_ and set(starts) <= {"200", "300"} and len(set(starts)) == 1, out
    assert finals(ref + "/out", np_) == finals(run + "/out", np_)


def test_open_reads_checkpoints_offline(tmp_path):
    d = str(tmp_path)
    cfg = write_config(d, 1)
    code = ("import numpy as np, ftigo\n"
            "rt = ftigo.init(%r)\n"
            "a = np.arange(12, dtype=np.float32).reshape(3, 4)\n"
            "b = np.array([1 + 2j, 3 - 4j])\n"
            "rt.protect(0, a, name='a'); rt.protect(1, b, name='b'); rt.protect(2, bytearray(b'xyz'))\n"
            "rt.checkpoint(7, 1)\n"
            "a += 1\n"
            "rt.checkpoint(8, 4)\n"
            "print('WROTE', flush=True)\n"
            "import os; os._exit(0)\n" % cfg)
    e = env()
    e["FTIGO_NO_MPI4PY"] = "1"
    p = subprocess.run(launcher(1) + [sys.executable, "-c", code], env=e, capture_output=True, text=True)
    # It ends without FTI_Finalize, as a job that dies (mpirun then fails).
    assert "WROTE" in p.stdout, p.stdout + p.stderr
    run = ftigo.open(d)
    assert len(run) >= 1
    ck = run.newest()
    assert (ck.id, ck.level, ck.ranks) == (8, 4, 1)
    vs = ck.read(0)
    assert vs["a"].dtype == np.float32
    np.testing.assert_array_equal(vs["a"], np.arange(12, dtype=np.float32) + 1)
    np.testing.assert_array_equal(vs["b"], np.array([1 + 2j, 3 - 4j]))
    assert bytes(vs[2]) == b"xyz"
    with pytest.raises(ftigo.Error) as e:
        ftigo.open(str(tmp_path / "nowhere"))
    assert "nowhere" in str(e.value)


def test_bad_input_raises(tmp_path):
    d = str(tmp_path)
    cfg = write_config(d, 1)
    code = r'''
import numpy as np, ftigo
rt = ftigo.init(%r)
a = np.zeros((4, 4))
for bad, what in ((a[:, 1], "not C-contiguous"), (np.zeros(3)[::2], "not C-contiguous")):
    try:
        rt.protect(0, bad)
        raise SystemExit("protect accepted a view")
    except ValueError as e:
        assert what in str(e), e
try:
    rt.protect(0, object())
    raise SystemExit("protect accepted an object")
except TypeError as e:
    assert "buffer protocol" in str(e)
ro = np.zeros(2); ro.flags.writeable = False
try:
    rt.protect(0, ro); raise SystemExit("read-only accepted")
except ValueError as e:
    assert "read-only" in str(e)
try:
    rt.checkpoint(1, 42); raise SystemExit("level 42 accepted")
except ftigo.Error as e:
    assert e.code == ftigo.NSCS and "Invalid level" in e.message, e
rt.protect(0, a)
rt.checkpoint(1, 1)
import os, sys
if sys.argv[1:] == ["write"]:
    print("WROTE", flush=True)
    os._exit(0)
''' % cfg
    e = env()
    e["FTIGO_NO_MPI4PY"] = "1"
    p = subprocess.run(launcher(1) + [sys.executable, "-c", code, "write"], env=e, capture_output=True, text=True)
    assert "WROTE" in p.stdout, p.stdout + p.stderr
    code = r'''
import numpy as np, ftigo
with ftigo.init(%r) as rt:
    assert rt.status == 1
    wrong = np.zeros(16, dtype=np.int64)
    rt.protect(0, wrong)
    try:
        rt.recover(); raise SystemExit("recovered float64 into int64")
    except ftigo.Error as e:
        assert e.code == ftigo.NREC and "float64" in e.message, e
    assert not wrong.any(), "memory untouched"
try:
    rt.checkpoint(2, 1); raise SystemExit("closed runtime accepted a call")
except ftigo.Error as e:
    assert "finalized" in e.message
print("BAD INPUT OK")
''' % cfg
    p = subprocess.run(launcher(1) + [sys.executable, "-c", code], env=e, capture_output=True, text=True)
    assert p.returncode == 0 and "BAD INPUT OK" in p.stdout, p.stdout + p.stderr


RESHAPE = r'''
import sys, numpy as np, ftigo
from mpi4py import MPI
cfg, mode = sys.argv[1], sys.argv[2]
rt = ftigo.init(cfg, MPI.COMM_WORLD)
comm = MPI.Comm.f2py(rt.app_comm_f)
r, n = comm.Get_rank(), comm.Get_size()
N = 24
lo, hi = r * N // n, (r + 1) * N // n
mine = np.zeros(hi - lo)
if mode == "write":
    mine[:] = np.arange(lo, hi) * 1.5
rt.protect(1, mine)
rt.define_global(5, [N], "field")
rt.add_subset(1, 5, [lo], [hi - lo])
if mode == "write":
    rt.checkpoint(1, 1)
    print("WROTE", flush=True)
    import os; os._exit(0)
assert rt.status == 1
rt.recover()
assert np.array_equal(mine, np.arange(lo, hi) * 1.5), mine
print("RESHAPED rank %d of %d ok" % (r, n))
rt.finalize()
'''


def test_restart_on_another_rank_count(tmp_path):
    if ftigo.library_mpi() == "none" or os.environ.get("FTIGO_NO_MPI4PY"):
        pytest.skip("needs mpi4py and an MPI library build")
    d = str(tmp_path)
    cfg = write_config(d, 1)
    p = subprocess.run(launcher(3) + [sys.executable, "-c", RESHAPE, cfg, "write"], env=env(), capture_output=True, text=True)
    assert p.stdout.count("WROTE") == 3, p.stdout + p.stderr
    p = subprocess.run(launcher(2) + [sys.executable, "-c", RESHAPE, cfg, "read"], env=env(), capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("RESHAPED rank") == 2, p.stdout
