"""The ``mpi4py`` package a rank of ``emu mpirun`` imports: ``mpi4py.MPI`` is the emulated MPI
(``emu.rank.mpi``), imported -- and MPI initialised -- when the program first imports it, so that
``mpi4py.rc`` set before (``rc.initialize = False``, ``rc.thread_level``...) is honoured as mpi4py
honours it. The pure-Python parts of a real mpi4py installed beside (``mpi4py.util.pkl5``,
``util.dtlib``, ``util.sync``, ``util.pool``, ``futures``, ``run``, ``bench``, ``typing``) run on
top of the emulated MPI; without one they raise NotImplementedError naming the module."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

VERSION = "4.1.2"


class Rc:
    """``mpi4py.rc``: runtime configuration options, read when ``mpi4py.MPI`` is imported."""

    initialize = True
    threads = True
    thread_level = "multiple"
    finalize = None
    fast_reduce = True
    recv_mprobe = True
    irecv_bufsz = 32768
    errors = "exception"

    def __init__(self, **kwargs):
        self(**kwargs)

    def __setattr__(self, name, value):
        if not hasattr(self, name):
            raise TypeError(f"object has no attribute {name!r}")
        super().__setattr__(name, value)

    def __call__(self, **kwargs):
        for key in kwargs:
            if not hasattr(self, key):
                raise TypeError(f"unexpected argument {key!r}")
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __repr__(self):
        return "<mpi4py.rc>"


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``mpi4py.MPI`` is the emulated MPI; another ``mpi4py.X`` comes from the real package's folder
    (never its compiled ``MPI`` extension), or is refused when there is none."""

    def __init__(self, real: list[str]):
        self.real = real

    def find_spec(self, name, path=None, target=None):
        if name == "mpi4py.MPI":
            return importlib.machinery.ModuleSpec(name, self)
        if name.startswith("mpi4py.") and name.count(".") == 1 and not self.real:
            raise NotImplementedError(f"the emulated mpi4py (emu mpirun) has no {name}; only mpi4py.MPI "
                                      "(install mpi4py beside it for its pure-Python modules)")
        return None

    def create_module(self, spec):
        from emu.rank import mpi

        return mpi

    def exec_module(self, module):
        pass


def install() -> types.ModuleType:
    real = importlib.util.find_spec("mpi4py")
    where = [p for p in (real.submodule_search_locations or [])] if real is not None else []
    pkg = types.ModuleType("mpi4py")
    pkg.__path__ = where
    if where:  # the real package's folder: its data files (py.typed, *.pyi, include/) are there
        pkg.__file__ = os.path.join(where[0], "__init__.py")
    pkg.__version__ = VERSION
    pkg.__doc__ = "emulated mpi4py (emu mpirun)"
    pkg.__all__ = ["MPI"]
    pkg.__spec__ = importlib.machinery.ModuleSpec("mpi4py", None, is_package=True)
    pkg.__spec__.submodule_search_locations = where
    pkg.rc = Rc()
    sys.modules["mpi4py.rc"] = pkg.rc

    def get_include() -> str:
        if not where:
            raise NotImplementedError("the emulated mpi4py has no C headers (no mpi4py installed beside it)")
        return os.path.join(where[0], "include")

    def get_config() -> dict:
        return {}

    pkg.get_include, pkg.get_config, pkg.profile = get_include, get_config, profile
    sys.modules["mpi4py"] = pkg
    sys.meta_path.insert(0, _Finder(where))
    return pkg


def profile(name, *, path=None):
    """``mpi4py.profile``: the profiler library found and loaded (``RTLD_GLOBAL``) as mpi4py finds and loads
    it -- ValueError when it is not found, a UserWarning when it does not load -- and a RuntimeWarning that
    it sees no call: a profiler wraps the C library's ``MPI_*`` functions, and the emulated MPI makes its
    calls in Python (``emu mpirun``'s ``--json`` and ``--trace`` record every call)."""
    import pathlib
    import warnings
    from _ctypes import dlopen

    if path is None:
        path = [""]
    elif isinstance(path, os.PathLike):
        path = [path]
    elif isinstance(path, str):
        path = path.split(os.pathsep)
    elif isinstance(path, bytes):
        path = path.split(os.fsencode(os.pathsep))
    name = os.fsdecode(name)
    patterns = [("", ""), ("lib", ".so")]
    filename = next((str((pathlib.Path(p) / f"{pre}{name}{suf}").resolve()) for p in map(os.fsdecode, path)
                     for pre, suf in patterns if (pathlib.Path(p) / f"{pre}{name}{suf}").is_file()), None)
    if filename is None:
        raise ValueError(f"profiler {name!r} not found")
    try:
        handle = dlopen(filename, os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError as exc:
        warnings.warn(exc.args[0], stacklevel=2)
        return
    vars(profile).setdefault("registry", []).append((name, (handle, filename)))
    warnings.warn(f"profiler {name!r} loaded, but the emulated MPI (emu mpirun) makes no C MPI calls for it to "
                  "see: emu mpirun's --json and --trace record every call", RuntimeWarning, stacklevel=2)
