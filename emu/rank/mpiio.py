"""MPI-IO of the emulated ``mpi4py.MPI``: ``MPI.File``, ``FILE_NULL``, ``Register_datarep``.

The ranks of ``emu mpirun`` are processes of one machine, so a file is a real file of the local file
system: each rank opens it itself and reads and writes the bytes its view gives with
``os.pread``/``os.pwrite`` (``emu.rank.mpiio_posix``; the views in ``emu.rank.mpiio_view``). What
MPI's semantics need of the group is done through the file's own communicator (a duplicate of the
one it was opened on), as traffic of the emulated hosts like any MPI call: opening (the first rank
creates the file, the others learn the outcome), closing (a barrier before the first rank deletes
what is to be deleted), the collective calls that move the shared file pointer (``Seek_shared``,
``Set_view``: barrier, the first rank sets it, barrier) and the ordered accesses (the first rank
gathers the counts, moves the pointer by their sum and scatters each rank's place). The shared
file pointer itself is eight bytes of a side file under an ``fcntl`` lock. Collective data access
(``Write_all`` ...) is each rank's own access, done at once; the nonblocking forms return completed
requests, a split collective's ``_begin`` does the access and its ``_end`` reports it.

Virtual time: file I/O itself is not modelled (the emulator has no storage model): reading and
writing cost the rank's CPU time only (``--cpu-scale``), the synchronisation above costs what its
messages cost on the fabric.
"""

from __future__ import annotations

import functools
import os

from .comm import ANY_SOURCE, ANY_TAG, _null_request
from .consts import CONSTANTS as C
from .errors import Exception
from .handle import Handle, Impl, predefine_null
from .info import ERRORS_RETURN, Errhandler, Info, call_errhandler, create_errhandler
from .mpiio_access import add_access_methods
from .mpiio_posix import SharedPointer, check_amode, error_of, fs_path, open_flags, read_runs, write_runs
from .mpiio_view import (HINTS, Register_datarep, View, check_datarep, check_spec, committed, external32,  # noqa: F401
                         hints as _hints, pack, typemap, unpacker)

_null_errhandler = [ERRORS_RETURN]
"""``FILE_NULL``'s error handler: what a file opened from now on starts with, and what a failed
``Open``/``Delete`` calls."""


def _fail(target, e):
    """Raise MPI error ``e`` (or the MPI error an OSError is) after ``target``'s error handler."""
    if isinstance(e, OSError):
        e = error_of(e, "file I/O")
    eh = target._h.errhandler if isinstance(target, File) and target._h is not None else _null_errhandler[0]
    call_errhandler(target if isinstance(target, File) else FILE_NULL, Errhandler(eh), e.Get_error_code())
    raise e


def _mpi(fn):
    """A call whose MPI errors go through the file's error handler (FILE_NULL's for class methods)."""

    @functools.wraps(fn)
    def call(self, *a, **k):
        try:
            return fn(self, *a, **k)
        except (Exception, OSError) as e:
            _fail(self, e)
    return call


def _fill(status, nbytes: int) -> None:
    if status is not None:
        status.count = nbytes
        status.cancelled = False


def _done(nbytes: int):
    req = _null_request("file")
    req._h.row = [0, ANY_SOURCE, ANY_TAG, nbytes, False]
    return req


class File(Handle, family=True):
    """An open file of a group of ranks (``self._h``: its state; None for FILE_NULL)."""

    # -- opening and closing ------------------------------------------------------------------------------
    @classmethod
    @_mpi
    def Open(cls, comm, filename, amode: int = C["MODE_RDONLY"], info=None) -> "File":
        if comm is None or not hasattr(comm, "Is_inter") or not comm:
            raise Exception(C["ERR_COMM"], "MPI_ERR_COMM: invalid communicator (COMM_NULL)")
        if comm.Is_inter():
            raise Exception(C["ERR_COMM"], "MPI_ERR_COMM: MPI_File_open needs an intracommunicator")
        path, amode = fs_path(filename), int(amode)
        check_amode(amode)
        hints = _hints(dict(HINTS), info)
        try:
            perm = int(hints.pop("file_perm", "666"), 8)
        except ValueError:
            raise Exception(C["ERR_INFO_VALUE"], "MPI_ERR_INFO_VALUE: file_perm must be an octal number") from None
        fcomm = comm.Dup()
        size, rank = fcomm.Get_size(), fcomm.Get_rank()
        fd, err, side = None, None, None
        if size > 1:
            amodes = fcomm.allgather(amode)
            if len(set(amodes)) > 1:
                fcomm.Free()
                raise Exception(C["ERR_NOT_SAME"], f"MPI_ERR_NOT_SAME: the ranks open with different amodes {amodes} "
                                                   "(MPI_File_open)")
        if rank == 0:
            try:
                fd = os.open(path, open_flags(amode, True), perm)
                if size > 1:
                    start = os.fstat(fd).st_size if amode & C["MODE_APPEND"] else 0
                    side = SharedPointer.make_side_file(path, start)
            except OSError as e:
                err = _as_pair(error_of(e, "MPI_File_open", path))
        if size > 1:
            err, side = fcomm.bcast((err, side), 0)
            if err is None:  # the file is there: the others open it, and all learn whether every rank could
                mine = None
                if rank:
                    try:
                        fd = os.open(path, open_flags(amode, False), perm)
                    except OSError as e:
                        mine = _as_pair(error_of(e, "MPI_File_open", path))
                errs = fcomm.allgather(mine)
                err = mine or next((x for x in errs if x is not None), None)
        if err is not None:
            if fd is not None:
                os.close(fd)
            if rank == 0 and side is not None:
                os.unlink(side)
            fcomm.Free()
            raise Exception(*err)
        shared = SharedPointer(side)
        view = View(0, _BYTE(), _BYTE(), "native")
        pos = os.fstat(fd).st_size if amode & C["MODE_APPEND"] else 0
        if size == 1:
            shared.set(pos)
        return cls._of(Impl(fd=fd, path=path, amode=amode, comm=fcomm, size=size, rank=rank, view=view,
                            pos=pos, shared=shared, atomic=False, dirty=False, hints=hints, split=None, closed=False,
                            errhandler=_null_errhandler[0]))

    def _f(self):
        h = self._h
        if h is None or h.closed:
            raise Exception(C["ERR_FILE"], "MPI_ERR_FILE: invalid file (FILE_NULL or closed)")
        return h

    def _sync(self, h) -> None:
        if h.size > 1:
            h.comm.Barrier()

    @_mpi
    def Close(self) -> None:
        h = self._f()
        os.close(h.fd)
        h.closed = True
        self._sync(h)
        h.shared.close(unlink=h.rank == 0)
        if h.rank == 0 and h.amode & C["MODE_DELETE_ON_CLOSE"]:
            try:
                os.unlink(h.path)
            except FileNotFoundError:
                pass
        h.comm.Free()
        self._h = None

    def free(self) -> None:
        if self._h is not None and not self._h.closed:
            self.Close()

    @classmethod
    @_mpi
    def Delete(cls, filename, info=None) -> None:
        path = fs_path(filename)
        try:
            os.unlink(path)
        except OSError as e:
            raise error_of(e, "MPI_File_delete", path) from None

    # -- the file as a whole ----------------------------------------------------------------------------
    @_mpi
    def Get_size(self) -> int:
        return os.fstat(self._f().fd).st_size

    size = property(lambda self: self.Get_size())

    def _resize(self, size: int, grow_only: bool, call: str) -> None:
        h = self._f()
        if size < 0:
            raise Exception(C["ERR_ARG"], f"MPI_ERR_ARG: negative size {size} ({call})")
        if h.amode & C["MODE_RDONLY"]:
            raise Exception(C["ERR_READ_ONLY"], f"MPI_ERR_READ_ONLY: {call} of a file opened MODE_RDONLY")
        self._sync(h)
        err = None
        if h.rank == 0:
            try:
                h.dirty = True
                if not grow_only:
                    os.ftruncate(h.fd, size)
                elif size > os.fstat(h.fd).st_size:
                    os.posix_fallocate(h.fd, 0, size)
            except OSError as e:
                err = _as_pair(error_of(e, call, h.path))
        if h.size > 1:
            err = h.comm.bcast(err, 0)
        if err is not None:
            raise Exception(*err)

    @_mpi
    def Set_size(self, size: int) -> None:
        self._resize(int(size), False, "MPI_File_set_size")

    @_mpi
    def Preallocate(self, size: int) -> None:
        self._resize(int(size), True, "MPI_File_preallocate")

    @_mpi
    def Get_amode(self) -> int:
        return self._f().amode

    amode = property(lambda self: self.Get_amode())

    @_mpi
    def Get_group(self):
        return self._f().comm.Get_group()

    group = property(lambda self: self.Get_group())
    group_size = property(lambda self: self._f().size)
    group_rank = property(lambda self: self._f().rank)

    @_mpi
    def Set_info(self, info) -> None:
        h = self._f()
        h.hints = _hints(h.hints, info)

    @_mpi
    def Get_info(self) -> Info:
        return Info.Create(dict(self._f().hints))

    info = property(lambda self: self.Get_info(), lambda self, v: self.Set_info(v))

    @_mpi
    def Set_atomicity(self, flag: bool) -> None:
        self._f().atomic = bool(flag)

    @_mpi
    def Get_atomicity(self) -> bool:
        return self._f().atomic

    atomicity = property(lambda self: self.Get_atomicity(), lambda self, v: self.Set_atomicity(v))

    @_mpi
    def Sync(self) -> None:
        """Writes to the storage device (``fsync``) -- when this rank wrote since its last ``Sync``:
        the ranks share the machine's page cache, so what another rank wrote is visible already."""
        h = self._f()
        if h.dirty:
            os.fsync(h.fd)
            h.dirty = False

    @_mpi
    def Get_type_extent(self, datatype) -> int:
        self._f()
        _, extent, _, _ = typemap(datatype)
        if not committed(datatype):
            raise Exception(C["ERR_TYPE"], "MPI_ERR_TYPE: the datatype is not committed")
        return extent

    # -- views ---------------------------------------------------------------------------------------------
    @_mpi
    def Set_view(self, disp: int = 0, etype=None, filetype=None, datarep: str = "native", info=None) -> None:
        h = self._f()
        etype = _BYTE() if etype is None else etype
        filetype = etype if filetype is None else filetype
        rep = check_datarep("native" if datarep is None else datarep)
        disp = int(disp)
        if disp == C["DISPLACEMENT_CURRENT"]:
            if not h.amode & C["MODE_SEQUENTIAL"]:
                raise Exception(C["ERR_ARG"], "MPI_ERR_ARG: DISPLACEMENT_CURRENT needs a file opened MODE_SEQUENTIAL")
            disp = h.view.byte_offset(h.shared.get())
        elif disp < 0:
            raise Exception(C["ERR_ARG"], f"MPI_ERR_ARG: negative displacement {disp} (MPI_File_set_view)")
        view = View(disp, etype, filetype, rep)
        h.hints = _hints(h.hints, info)
        self._sync(h)
        h.view, h.pos = view, 0
        if h.rank == 0:
            h.shared.set(0)
        self._sync(h)

    @_mpi
    def Get_view(self):
        v = self._f().view
        return v.disp, _fresh(v.etype), _fresh(v.filetype), v.datarep

    @_mpi
    def Get_byte_offset(self, offset: int) -> int:
        h = self._f()
        if offset < 0:
            raise Exception(C["ERR_ARG"], f"MPI_ERR_ARG: negative offset {offset}")
        return h.view.byte_offset(int(offset))

    # -- file pointers ----------------------------------------------------------------------------------------
    def _seek_to(self, h, offset: int, whence: int, current: int) -> int:
        if whence == C["SEEK_SET"]:
            pos = offset
        elif whence == C["SEEK_CUR"]:
            pos = current + offset
        elif whence == C["SEEK_END"]:
            pos = h.view.end_offset(os.fstat(h.fd).st_size) + offset
        else:
            raise Exception(C["ERR_ARG"], f"MPI_ERR_ARG: invalid whence {whence} (SEEK_SET, SEEK_CUR, SEEK_END)")
        if pos < 0:
            raise Exception(C["ERR_ARG"], f"MPI_ERR_ARG: the file pointer would be at {pos}, before the view's start")
        return pos

    def _not_sequential(self, h, call: str) -> None:
        if h.amode & C["MODE_SEQUENTIAL"]:
            raise Exception(C["ERR_UNSUPPORTED_OPERATION"], f"MPI_ERR_UNSUPPORTED_OPERATION: {call} on a file "
                                                            "opened MODE_SEQUENTIAL")

    @_mpi
    def Seek(self, offset: int, whence: int = C["SEEK_SET"]) -> None:
        h = self._f()
        self._not_sequential(h, "MPI_File_seek")
        h.pos = self._seek_to(h, int(offset), int(whence), h.pos)

    @_mpi
    def Get_position(self) -> int:
        h = self._f()
        self._not_sequential(h, "MPI_File_get_position")
        return h.pos

    @_mpi
    def Seek_shared(self, offset: int, whence: int = C["SEEK_SET"]) -> None:
        h = self._f()
        self._not_sequential(h, "MPI_File_seek_shared")
        self._sync(h)
        err = None
        if h.rank == 0:
            try:
                h.shared.set(self._seek_to(h, int(offset), int(whence), h.shared.get()))
            except Exception as e:
                err = _as_pair(e)
        if h.size > 1:
            err = h.comm.bcast(err, 0)
        if err is not None:
            raise Exception(*err)

    @_mpi
    def Get_position_shared(self) -> int:
        h = self._f()
        self._not_sequential(h, "MPI_File_get_position_shared")
        return h.shared.get()

    # -- data access -----------------------------------------------------------------------------------------
    def _io(self, how: str, write: bool, buf, offset=None) -> int:
        """One access of buffer ``buf``: at etype ``offset`` (``how`` "at"), at the individual pointer
        ("ind"), the shared one ("shared") or in rank order at the shared one ("ordered"). Returns the
        bytes moved."""
        h = self._f()
        if how in ("at", "ind"):
            self._not_sequential(h, "an explicit-offset or individual-pointer access")
        if write and h.amode & C["MODE_RDONLY"]:
            raise Exception(C["ERR_READ_ONLY"], "MPI_ERR_READ_ONLY: writing a file opened MODE_RDONLY")
        if not write and h.amode & C["MODE_WRONLY"]:
            raise Exception(C["ERR_ACCESS"], "MPI_ERR_ACCESS: reading a file opened MODE_WRONLY")
        view, esize = h.view, h.view.esize
        if write:
            data, dt = pack(buf)
            nbytes = len(data)
        else:
            nbytes, dt, put = unpacker(buf)
        if nbytes % esize:
            raise Exception(C["ERR_IO"], f"MPI_ERR_IO: {nbytes} bytes are not whole etypes of {esize} bytes")
        n = nbytes // esize
        if how == "at":
            if offset < 0:
                raise Exception(C["ERR_ARG"], f"MPI_ERR_ARG: negative offset {offset}")
            pos = int(offset)
        elif how == "ind":
            pos = h.pos
        elif how == "shared":
            pos = h.shared.fetch_add(n)
        else:
            pos = self._ordered(h, n)
        runs = view.file_runs(pos * esize, nbytes)
        ext = view.datarep == "external32"
        if write:
            write_runs(h.fd, runs, external32(data, dt) if ext else data, h.atomic)
            h.dirty = True
            got = nbytes
        else:
            data = read_runs(h.fd, runs, h.atomic)
            got = len(data)
            put(external32(data, dt) if ext else data)
        if how == "ind":
            h.pos = pos + -(-got // esize)
        return got

    def _ordered(self, h, n: int) -> int:
        if h.size == 1:
            return h.shared.fetch_add(n)
        counts = h.comm.gather(n, 0)
        places = None
        if h.rank == 0:
            at = h.shared.fetch_add(sum(counts))
            places = []
            for c in counts:
                places.append(at)
                at += c
        return h.comm.scatter(places, 0)

    def _begin(self, name: str, got: int) -> None:
        h = self._f()
        if h.split is not None:
            raise Exception(C["ERR_IO"], f"MPI_ERR_IO: {h.split[0]}_begin is still active on the file")
        h.split = (name, got)

    def _end(self, name: str, status) -> None:
        h = self._f()
        if h.split is None or h.split[0] != name:
            raise Exception(C["ERR_IO"], f"MPI_ERR_IO: {name}_end without a {name}_begin")
        _fill(status, h.split[1])
        h.split = None

    # -- error handling -------------------------------------------------------------------------------------
    @classmethod
    def Create_errhandler(cls, errhandler_fn) -> Errhandler:
        return create_errhandler(errhandler_fn, "file")

    def Get_errhandler(self) -> Errhandler:
        if self._h is None:
            return Errhandler(_null_errhandler[0])
        return Errhandler(self._f().errhandler)

    def Set_errhandler(self, errhandler) -> None:
        if not isinstance(errhandler, Errhandler) or not errhandler:
            raise Exception(C["ERR_ARG"], "MPI_ERR_ARG: invalid errhandler")
        if self._h is None:
            _null_errhandler[0] = Errhandler(errhandler)
        else:
            self._f().errhandler = Errhandler(errhandler)

    def Call_errhandler(self, errorcode: int) -> None:
        call_errhandler(self, self.Get_errhandler(), int(errorcode))


add_access_methods(File, _mpi, _fill, _done, check_spec)


def _BYTE():  # noqa: N802 -- MPI.BYTE, looked up when needed (the datatypes module is the lead's)
    from .types import TYPES

    return TYPES["BYTE"]


def _fresh(dt):
    """A datatype ``Get_view`` hands out: the predefined one, or a new copy of a derived one."""
    return dt if dt.is_predefined else dt.Dup()


def _as_pair(e: Exception) -> tuple[int, str]:
    return e.Get_error_code(), str(e)


FILE_NULL = predefine_null(File(), "FILE_NULL")
