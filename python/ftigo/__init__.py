"""ftigo: FTI's checkpoint/restart model for Python, over libftigo.

    import numpy as np, ftigo
    with ftigo.init("config.fti") as rt:          # or comm=MPI.COMM_WORLD
        grid = np.zeros((512, 512))
        step = np.zeros(1, dtype=np.int64)
        rt.protect(0, step, name="step")
        rt.protect(1, grid, name="grid")           # zero-copy: grid itself
        if rt.status:
            rt.recover()
        ...
        rt.checkpoint(1, level=2)

Protected objects are read and restored in place. Calls release the GIL
(ctypes does for every foreign call). Failures raise ftigo.Error with
FTI's return code and ftigo's message. ftigo.open(run_dir) reads a run's
checkpoints offline.
"""

import builtins
import ctypes
import json
import os

import numpy as np

__all__ = ["Error", "Runtime", "Run", "Checkpoint", "init", "open", "library_mpi",
           "SCES", "NSCS", "NREC", "DONE", "HEAD", "L1", "L2", "L3", "L4", "L4_DCP", "L4_H5_SINGLE"]

# FTI's return codes and levels (fti.h).
SCES, NSCS, NREC, DONE, HEAD = 0, -1, -2, 1, 2
L1, L2, L3, L4, L4_DCP, L4_H5_SINGLE = 1, 2, 3, 4, 8, 9

# numpy dtypes recorded typed (ftigo.h's ftigo_elem_type numbering).
_ELEM = {
    np.dtype(np.int8): 1, np.dtype(np.int16): 2, np.dtype(np.int32): 3, np.dtype(np.int64): 4,
    np.dtype(np.uint8): 5, np.dtype(np.uint16): 6, np.dtype(np.uint32): 7, np.dtype(np.uint64): 8,
    np.dtype(np.float32): 9, np.dtype(np.float64): 10, np.dtype(np.complex64): 11, np.dtype(np.complex128): 12,
}
_DTYPE = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
          "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float32": np.float32,
          "float64": np.float64, "complex64": np.complex64, "complex128": np.complex128}


class Error(Exception):
    """A failed ftigo call: code is FTI's return code, message ftigo's reason."""

    def __init__(self, call, code, message):
        self.call, self.code, self.message = call, code, message
        super().__init__("%s failed (FTI code %d): %s" % (call, code, message or "no reason logged"))


_lib = None


def _load():
    """Loads the bundled libftigo.so (FTIGO_LIB names another)."""
    global _lib
    if _lib is not None:
        return _lib
    path = os.environ.get("FTIGO_LIB") or os.path.join(os.path.dirname(__file__), "_lib", "libftigo.so")
    if not os.path.exists(path):
        raise ImportError("libftigo.so not found at %s: install the package with pip install ./python" % path)
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    i, i64, p, s = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p
    sigs = {
        "ftigo_init_f": (i, [s, i, ctypes.POINTER(i)]), "ftigo_init_world": (i, [s, ctypes.POINTER(i)]),
        "ftigo_finalize_world": (i, []), "ftigo_elem_type": (i, [i]), "ftigo_last_error": (s, []),
        "ftigo_serial": (i, []), "ftigo_set_name": (i, [i, s]), "ftigo_init_icp": (i, [i, i, i]),
        "ftigo_offline_list": (p, [s]), "ftigo_offline_vars": (p, [s, i64, i]),
        "ftigo_offline_read": (i, [s, i64, i, i, p, i64]), "ftigo_free": (None, [p]),
        "FTI_Status": (i, []), "FTI_InitType": (i, [ctypes.POINTER(i), i]), "FTI_Protect": (i, [i, p, i64, i]),
        "FTI_Checkpoint": (i, [i, i]), "FTI_Snapshot": (i, []), "FTI_Recover": (i, []),
        "FTI_RecoverVar": (i, [i]), "FTI_GetStoredSize": (i64, [i]), "FTI_AddVarICP": (i, [i]),
        "FTI_FinalizeICP": (i, []), "FTI_Finalize": (i, []), "FTI_setIDFromString": (i, [s]),
        "FTI_getIDFromString": (i, [s]),
        "FTI_DefineGlobalDataset": (i, [i, i, ctypes.POINTER(i64), s, p, i]),
        "FTI_AddSubset": (i, [i, i, ctypes.POINTER(i64), ctypes.POINTER(i64), i]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


def library_mpi():
    """The MPI libftigo was built for: "openmpi", "mpich" or "none"."""
    try:
        with builtins.open(os.path.join(os.path.dirname(__file__), "_lib", "MPI")) as f:
            return f.read().strip()
    except OSError:
        return "none" if _load().ftigo_serial() else "unknown"


def _last():
    msg = _load().ftigo_last_error()
    return msg.decode(errors="replace") if msg else ""


def _enc(s):
    return os.fsencode(s) if isinstance(s, (str, os.PathLike)) else bytes(s)


def _check(call, rc, ok=(SCES,)):
    if rc not in ok:
        raise Error(call, rc, _last())
    return rc


def _i64s(values):
    values = [int(v) for v in values]
    return (ctypes.c_int64 * max(len(values), 1))(*values)


class Runtime:
    """One FTI session (FTI_Init .. FTI_Finalize) of this process."""

    def __init__(self, config, comm=None):
        lib = _load()
        self._lib, self._closed, self._world = lib, False, False
        self._kept = {}  # id -> the protected object, kept alive
        app = ctypes.c_int(0)
        if comm is not None:
            rc = lib.ftigo_init_f(_enc(config), comm.py2f(), ctypes.byref(app))
        else:
            rc = lib.ftigo_init_world(_enc(config), ctypes.byref(app))
            self._world = True
        if rc == HEAD:
            self._closed = True
            raise Error("FTI_Init", rc, "this rank was a head (head = 1, keep_heads_alive = 1); it has no session")
        _check("FTI_Init", rc)
        self.app_comm_f = app.value  # FTI_COMM_WORLD as a Fortran handle (mpi4py: MPI.Comm.f2py)

    def _live(self, call):
        if self._closed:
            raise Error(call, NSCS, "the runtime is finalized (or closed): start a new one with ftigo.init")

    def _handle(self, dtype):
        if dtype in _ELEM:
            return _check("protect", self._lib.ftigo_elem_type(_ELEM[dtype]), ok=range(0, 1 << 30))
        t = ctypes.c_int(-1)
        _check("FTI_InitType", self._lib.FTI_InitType(ctypes.byref(t), dtype.itemsize))
        return t.value

    def protect(self, id, array, name=None):
        """Protects array (a C-contiguous writable numpy array, or any
        writable object with the buffer protocol) under id, in place."""
        self._live("protect")
        if isinstance(array, np.ndarray):
            if not array.flags.c_contiguous:
                raise ValueError("protect(%d): the array is not C-contiguous (a view or a transpose?): "
                                 "protect np.ascontiguousarray(a) and keep that array" % id)
            if not array.flags.writeable:
                raise ValueError("protect(%d): the array is read-only: recover could not restore it" % id)
            ptr, count, dtype = array.ctypes.data if array.size else None, array.size, array.dtype
        else:
            try:
                view = memoryview(array)
            except TypeError:
                raise TypeError("protect(%d): %s has no buffer protocol: protect a numpy array" % (id, type(array).__name__))
            if view.readonly or not view.c_contiguous:
                raise ValueError("protect(%d): the buffer is read-only or not contiguous" % id)
            cbuf = (ctypes.c_char * view.nbytes).from_buffer(view)
            ptr, count, dtype = ctypes.addressof(cbuf) if view.nbytes else None, view.nbytes, np.dtype(np.uint8)
            array = (array, cbuf)
        _check("FTI_Protect", self._lib.FTI_Protect(id, ptr, count, self._handle(dtype)))
        self._kept[id] = array
        if name is not None:
            _check("protect (name)", self._lib.ftigo_set_name(id, _enc(name)))

    @property
    def status(self):
        """FTI_Status: 0 fresh (or recovered), 1 restart, 2 from a kept checkpoint, 3 VPR."""
        self._live("status")
        return self._lib.FTI_Status()

    def checkpoint(self, id, level=L1):
        """FTI_Checkpoint at level (1-4, 8 dCP, 9 HDF5 single file). Collective."""
        self._live("checkpoint")
        _check("FTI_Checkpoint", self._lib.FTI_Checkpoint(id, level), ok=(DONE,))

    def snapshot(self):
        """FTI_Snapshot: recovers on a restart, else checkpoints when an
        interval is due; True when it took a checkpoint."""
        self._live("snapshot")
        return _check("FTI_Snapshot", self._lib.FTI_Snapshot(), ok=(SCES, DONE)) == DONE

    def recover(self):
        """FTI_Recover: every protected variable, in place."""
        self._live("recover")
        _check("FTI_Recover", self._lib.FTI_Recover())

    def recover_var(self, id):
        """FTI_RecoverVar: one variable, in place."""
        self._live("recover_var")
        _check("FTI_RecoverVar", self._lib.FTI_RecoverVar(id))

    def stored_size(self, id):
        """FTI_GetStoredSize: bytes stored for id (0: none)."""
        self._live("stored_size")
        return self._lib.FTI_GetStoredSize(id)

    def id_of(self, name):
        """FTI_getIDFromString: the id of a named variable, -1 if unknown."""
        self._live("id_of")
        return self._lib.FTI_getIDFromString(_enc(name))

    def define_global(self, id, shape, name, dtype=np.float64):
        """FTI_DefineGlobalDataset: a global dataset of shape, for restarts
        on another number of ranks."""
        self._live("define_global")
        shape = list(shape)
        h = self._handle(np.dtype(dtype))
        _check("FTI_DefineGlobalDataset", self._lib.FTI_DefineGlobalDataset(id, len(shape), _i64s(shape), _enc(name), None, h))

    def add_subset(self, var_id, dataset_id, offset, count):
        """FTI_AddSubset: variable var_id holds the block (offset, count) of
        the dataset; it must be protected with that many elements."""
        self._live("add_subset")
        _check("FTI_AddSubset", self._lib.FTI_AddSubset(var_id, len(offset), _i64s(offset), _i64s(count), dataset_id))

    def begin_icp(self, id, level=L1, activate=True):
        """FTI_InitICP: opens an incremental checkpoint."""
        self._live("begin_icp")
        _check("FTI_InitICP", self._lib.ftigo_init_icp(id, level, 1 if activate else 0))

    def add_var_icp(self, id):
        """FTI_AddVarICP: writes variable id into the open checkpoint."""
        self._live("add_var_icp")
        _check("FTI_AddVarICP", self._lib.FTI_AddVarICP(id))

    def finalize_icp(self):
        """FTI_FinalizeICP: commits the incremental checkpoint. Collective."""
        self._live("finalize_icp")
        _check("FTI_FinalizeICP", self._lib.FTI_FinalizeICP())

    def finalize(self):
        """FTI_Finalize (and MPI_Finalize if ftigo initialised MPI)."""
        self._live("finalize")
        self._closed = True
        self._kept.clear()
        fn = self._lib.ftigo_finalize_world if self._world else self._lib.FTI_Finalize
        _check("FTI_Finalize", fn())

    def close(self):
        """finalize, unless already done."""
        if not self._closed:
            self.finalize()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def init(config, comm=None):
    """FTI_Init: a Runtime on comm (an mpi4py communicator), or without one
    on MPI_COMM_WORLD (MPI_Init first if needed; one rank for the serial
    library)."""
    return Runtime(config, comm)


class Checkpoint:
    """One committed checkpoint of a run (ftigo.open)."""

    def __init__(self, run, info):
        self.run, self.seq, self.id, self.level = run, info["seq"], info["id"], info["level"]
        self.ranks, self.time_ns, self.dcp = info["ranks"], info["time_ns"], info["dcp"]

    def __repr__(self):
        return "Checkpoint(id=%d, level=L%d, ranks=%d, seq=%d)" % (self.id, self.level, self.ranks, self.seq)

    def variables(self, rank=0):
        """rank's stored variables: [{"id", "name", "type", "elem_size", "count", "size"}]."""
        return self.run._json("ftigo_offline_vars", self.run._lib.ftigo_offline_vars(self.run._path, self.seq, rank))

    def read(self, rank=0):
        """rank's variables as numpy arrays, by name (or id when unnamed);
        every block is checked against its hash. Opaque types come back as
        uint8 arrays of their bytes."""
        out = {}
        for v in self.variables(rank):
            dt = _DTYPE.get(v["type"])
            arr = np.empty(v["count"], dtype=dt) if dt else np.empty(v["size"], dtype=np.uint8)
            rc = self.run._lib.ftigo_offline_read(self.run._path, self.seq, rank, v["id"],
                                                  arr.ctypes.data if arr.size else None, v["size"])
            _check("ftigo.open read", rc)
            out[v["name"] or v["id"]] = arr
        return out


class Run:
    """A run's committed checkpoints, read offline (never written)."""

    def __init__(self, path):
        self._lib, self._path = _load(), _enc(path)
        self.checkpoints = [Checkpoint(self, c) for c in self._json("ftigo.open", self._lib.ftigo_offline_list(self._path))]

    def _json(self, call, ptr):
        if not ptr:
            raise Error(call, NSCS, _last())
        try:
            return json.loads(ctypes.string_at(ptr).decode())
        finally:
            self._lib.ftigo_free(ptr)

    def newest(self):
        """The newest committed checkpoint."""
        if not self.checkpoints:
            raise Error("ftigo.open", NREC, "the run holds no committed checkpoint")
        return max(self.checkpoints, key=lambda c: c.seq)

    def __iter__(self):
        return iter(self.checkpoints)

    def __len__(self):
        return len(self.checkpoints)


def open(run_dir):  # noqa: A001 (ftigo.open, as the issue names it)
    """The committed checkpoints of the run in run_dir (holding config.fti),
    or of a configuration file."""
    return Run(run_dir)
