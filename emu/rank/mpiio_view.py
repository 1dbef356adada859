"""File views and buffers of the emulated MPI-IO (``emu.rank.mpiio``).

A view (MPI 4.0 §14.3) is a displacement, an etype and a filetype: the filetype's type map tiles
the file from the displacement on, tile ``k`` at ``disp + k * extent``; the data a rank sees is the
bytes of the type map's runs, tile after tile, in etype units. ``View`` maps positions of that data
stream to byte runs of the file, and back (the end of the file as a position, for ``SEEK_END``).

The two places that read the internals of other modules' objects are ``typemap`` (a Datatype) and
``pack``/``unpack`` (a buffer specification, through ``Msg``)."""

from __future__ import annotations

from bisect import bisect_right

from .buffers import Msg
from .consts import CONSTANTS
from .errors import Exception

C = CONSTANTS
ERR_ARG, ERR_TYPE, ERR_IO = CONSTANTS["ERR_ARG"], CONSTANTS["ERR_TYPE"], CONSTANTS["ERR_IO"]
ERR_UNSUPPORTED_DATAREP = CONSTANTS["ERR_UNSUPPORTED_DATAREP"]
HINTS = {"cb_buffer_size": "16777216", "cb_nodes": "1", "ind_rd_buffer_size": "4194304",
         "ind_wr_buffer_size": "524288", "striping_factor": "0", "striping_unit": "0"}
"""The hints ``File.Get_info`` reports; a program's values of these replace them (``cb_nodes`` aside:
every rank does its own I/O), other keys are ignored, as MPICH ignores keys it does not know."""
DATAREPS = {"native": "native", "internal": "native", "external32": "external32"}
"""The data representations a view may name, and what ``Get_view`` says of them (MPICH: "internal"
is "native")."""


# -- what MPI-IO needs of a Datatype and of a buffer: the only code that knows their insides ---------------
def typemap(dt) -> tuple[int, int, int, list[tuple[int, int]]]:
    """``(size, extent, lb, runs)`` of datatype ``dt``; runs are ``(offset, length)`` byte runs of one
    element in type-map order (offsets as the type map has them, the lower bound included)."""
    if dt is None or not dt:
        raise Exception(ERR_TYPE, "MPI_ERR_TYPE: invalid datatype (DATATYPE_NULL or freed)")
    lb, extent = dt.Get_extent()
    flat = dt._ok().map()  # one element's byte runs, in type-map order (emu.rank.typemap)
    return dt.Get_size(), extent, lb, list(zip(flat.off.tolist(), flat.ln.tolist()))


def committed(dt) -> bool:
    return bool(dt._ok().committed)


def is_predefined(dt) -> bool:
    return bool(dt.is_predefined)


def own_copy(dt):
    """A datatype the view keeps (a derived type the program frees stays in the view)."""
    return dt if is_predefined(dt) else dt.Dup()


def pack(buf) -> tuple[bytes, object]:
    """The bytes a write takes from buffer specification ``buf``, and the buffer's datatype."""
    m = Msg(buf)
    return m.pack(), m.dt


def check_spec(buf, writable: bool) -> None:
    """Refuse what is not a buffer specification (a split collective's ``_end`` takes one)."""
    Msg(buf, writable=writable)


def unpacker(buf) -> tuple[int, object, object]:
    """``(bytes wanted, datatype, put)`` of a read into ``buf``: ``put(data)`` stores the bytes read
    (possibly fewer than wanted) in the buffer."""
    m = Msg(buf, writable=True)
    return m.nbytes, m.dt, m.unpack


# -- data representations -----------------------------------------------------------------------------------
def external32(data: bytes, dt) -> bytes:
    """``data`` (whole elements of ``dt``) between native and external32 order: big-endian basic
    elements. The swap is its own inverse."""
    if not data:
        return data
    import sys

    import numpy as np

    npt = dt.numpy()
    if npt is None:
        raise NotImplementedError(f"the emulated MPI-IO cannot convert {dt.Get_name()} (basic types mixed) "
                                  "to external32")
    if sys.byteorder == "big" or npt.itemsize <= 1 and npt.names is None:
        return data
    n = len(data) // npt.itemsize * npt.itemsize
    return np.frombuffer(data[:n], npt).byteswap().tobytes() + data[n:]


def check_datarep(datarep) -> str:
    if not isinstance(datarep, str):
        raise TypeError(f"datarep must be a str, got {type(datarep).__name__}")
    got = DATAREPS.get(datarep)
    if got is None:
        raise Exception(ERR_UNSUPPORTED_DATAREP, f"MPI_ERR_UNSUPPORTED_DATAREP: unsupported datarep {datarep!r} "
                                                 "passed to MPI_File_set_view (native, internal, external32)")
    return got


# -- views ---------------------------------------------------------------------------------------------------
class View:
    """``disp``, etype and filetype (their type maps taken when the view is set), datarep."""

    def __init__(self, disp: int, etype, filetype, datarep: str):
        for dt, what in ((etype, "etype"), (filetype, "filetype")):
            typemap(dt)  # a null or freed type is refused first
            if not committed(dt):
                raise Exception(ERR_TYPE, f"MPI_ERR_TYPE: the {what} is not committed")
        self.esize, _, _, _ = typemap(etype)
        self.fsize, self.fext, self.flb, runs = typemap(filetype)
        if self.esize <= 0 or self.fsize <= 0 or self.fsize % self.esize:
            raise Exception(ERR_ARG, f"MPI_ERR_ARG: filetype of {self.fsize} bytes is not a positive multiple of "
                                     f"the etype's {self.esize}")
        if any(o < 0 for o, _ in runs) or any(runs[i][0] < runs[i - 1][0] for i in range(1, len(runs))):
            raise Exception(ERR_ARG, "MPI_ERR_ARG: the filetype's displacements must be non-negative and "
                                     "monotonically nondecreasing")
        self.disp, self.datarep = int(disp), datarep
        self.etype, self.filetype = own_copy(etype), own_copy(filetype)
        self.runs = runs
        self.cum = [0]
        for _, n in runs:
            self.cum.append(self.cum[-1] + n)
        self.contiguous = len(runs) == 1 and runs[0][1] == self.fext
        """One run as long as the extent: the tiles make one contiguous stream from ``disp + offset``."""

    def file_runs(self, at: int, n: int) -> list[tuple[int, int]]:
        """File byte runs of ``n`` bytes of the data stream from stream byte ``at`` on."""
        if n <= 0:
            return []
        if self.contiguous:
            return [(self.disp + self.runs[0][0] + at, n)]
        out: list[tuple[int, int]] = []
        tile, within = divmod(at, self.fsize)
        i = bisect_right(self.cum, within) - 1
        runs, last = self.runs, len(self.runs)
        while n > 0:
            off, ln = runs[i]
            skip = within - self.cum[i]
            take = min(ln - skip, n)
            pos = self.disp + tile * self.fext + off + skip
            if out and out[-1][0] + out[-1][1] == pos:
                out[-1] = (out[-1][0], out[-1][1] + take)
            else:
                out.append((pos, take))
            n -= take
            within += take
            i += 1
            if i == last:
                i, tile, within = 0, tile + 1, 0
        return out

    def byte_offset(self, offset: int) -> int:
        """``Get_byte_offset``: the file byte of the data stream's etype ``offset``."""
        at = offset * self.esize
        if self.contiguous:
            return self.disp + self.runs[0][0] + at
        tile, within = divmod(at, self.fsize)
        i = bisect_right(self.cum, within) - 1
        return self.disp + tile * self.fext + self.runs[i][0] + within - self.cum[i]

    def end_offset(self, size: int) -> int:
        """The etype position of the end of a file of ``size`` bytes (its data before it, rounded up)."""
        rel = size - self.disp
        if rel <= 0:
            return 0
        tile, r = divmod(rel, self.fext) if self.fext > 0 else (0, rel)
        got = tile * self.fsize + sum(max(0, min(r - o, n)) for o, n in self.runs)
        return -(-got // self.esize)


def hints(current: dict, info) -> dict:
    """``current`` hints with those of Info ``info`` the library takes (``HINTS``, ``file_perm``)."""
    if info is None or not info:
        return current
    out = dict(current)
    for k in info.keys():
        if k == "file_perm" or (k in HINTS and k != "cb_nodes"):
            out[k] = info.Get(k)
    return out


_datareps: set = set()


def Register_datarep(datarep: str, read_fn, write_fn, extent_fn) -> None:
    """``MPI.Register_datarep``: the name is taken (a second registration is ``ERR_DUP_DATAREP``), but
    a view cannot use it (``ERR_UNSUPPORTED_DATAREP`` in ``Set_view``), as with MPICH."""
    if not isinstance(datarep, str):
        raise TypeError(f"datarep must be a str, got {type(datarep).__name__}")
    if len(datarep) > C["MAX_DATAREP_STRING"]:
        raise Exception(C["ERR_ARG"], f"MPI_ERR_ARG: datarep name longer than {C['MAX_DATAREP_STRING']}")
    if datarep in _datareps:
        raise Exception(C["ERR_DUP_DATAREP"], f"MPI_ERR_DUP_DATAREP: datarep {datarep!r} is already registered")
    _datareps.add(datarep)
