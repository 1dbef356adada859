"""``MPI.Status`` of the emulated ``mpi4py.MPI`` (rank side)."""

from __future__ import annotations

from array import array

from .consts import CONSTANTS
from .types import Datatype

ANY_SOURCE, ANY_TAG, UNDEFINED = CONSTANTS["ANY_SOURCE"], CONSTANTS["ANY_TAG"], CONSTANTS["UNDEFINED"]


class Status:
    """A message's envelope as a receive saw it. Its fields live in ``tomemory()``'s five C ints as
    MPICH lays out ``MPI_Status`` (count low, count high and cancelled, source, tag, error)."""

    __module__ = "mpi4py.MPI"

    def __init__(self, status: "Status | None" = None):
        if status is not None and not isinstance(status, Status):
            raise TypeError(f"expecting a Status, got {type(status).__name__}")
        self._m = array("i", status._m) if status is not None else array("i", [0, 0, ANY_SOURCE, ANY_TAG, 0])

    def _set(self, row) -> "Status":
        _, self.source, self.tag, count, self.cancelled = row
        self.count = count
        return self

    source = property(lambda s: s._m[2], lambda s, v: s._m.__setitem__(2, int(v)))
    tag = property(lambda s: s._m[3], lambda s, v: s._m.__setitem__(3, int(v)))
    error = property(lambda s: s._m[4], lambda s, v: s._m.__setitem__(4, int(v)))

    @property
    def count(self) -> int:
        return (self._m[0] & 0xFFFFFFFF) | ((self._m[1] >> 1) << 32)

    @count.setter
    def count(self, v: int) -> None:
        v = int(v)
        self._m[0] = ((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000
        self._m[1] = ((v >> 32) << 1) | (self._m[1] & 1)

    @property
    def cancelled(self) -> bool:
        return bool(self._m[1] & 1)

    @cancelled.setter
    def cancelled(self, v: bool) -> None:
        self._m[1] = (self._m[1] & ~1) | (1 if v else 0)

    def Get_source(self) -> int:
        return self.source

    def Get_tag(self) -> int:
        return self.tag

    def Get_error(self) -> int:
        return self.error

    def Set_source(self, v: int) -> None:
        self.source = v

    def Set_tag(self, v: int) -> None:
        self.tag = v

    def Set_error(self, v: int) -> None:
        self.error = v

    def Get_count(self, datatype: Datatype | None = None) -> int:
        from .types import TYPES

        n = _type_ok(TYPES["BYTE"] if datatype is None else datatype).Get_size()
        if n == 0:
            return 0 if self.count == 0 else UNDEFINED
        return self.count // n if self.count % n == 0 else UNDEFINED

    def Get_elements(self, datatype: Datatype | None = None) -> int:
        """Basic elements received: whole items of ``datatype`` times its elements, plus the
        elements of a last partial item."""
        from .types import TYPES

        dt = _type_ok(TYPES["BYTE"] if datatype is None else datatype)
        size = dt.Get_size()
        if size == 0:
            return 0
        whole, rest = divmod(self.count, size)
        per = _elements(dt)
        if rest == 0:
            return whole * per
        esize = size // per if per else 0
        if not esize or rest % esize:
            return UNDEFINED
        return whole * per + rest // esize

    def Set_elements(self, datatype: Datatype, count: int) -> None:
        _type_ok(datatype)
        self.count = int(count) * datatype.Get_size() // max(1, _elements(datatype))

    def Is_cancelled(self) -> bool:
        return self.cancelled

    def Set_cancelled(self, flag: bool) -> None:
        self.cancelled = bool(flag)

    def tomemory(self) -> memoryview:
        return memoryview(self._m)

    def py2f(self) -> list[int]:
        return list(self._m)

    @classmethod
    def f2py(cls, arg) -> "Status":
        s = cls()
        s._m = array("i", arg)
        return s

    def __reduce__(self):
        return (type(self), (), {"_m": list(self._m)})

    def __setstate__(self, state) -> None:
        self._m = array("i", state["_m"])

    def __eq__(self, other):
        return isinstance(other, Status) and self._m == other._m

    __hash__ = None


def _type_ok(dt):
    """``dt``, if it is a datatype (MPI_ERR_TYPE for DATATYPE_NULL, as MPICH)."""
    if isinstance(dt, Datatype) and not dt:
        from .errors import Exception

        raise Exception(CONSTANTS["ERR_TYPE"], "MPI_ERR_TYPE: invalid datatype (DATATYPE_NULL)")
    return dt


def _elements(dt) -> int:
    """Basic elements in one item of ``dt`` (1 for a named type)."""
    if getattr(dt, "named", True):
        return 1
    base = getattr(dt, "base", None)
    bsize = base.Get_size() if base is not None else 1
    return dt.Get_size() // bsize if bsize else dt.Get_size()


def _fill(status, row) -> None:
    if status is not None:
        status._set(row)


def _copy_status(status, src: Status) -> None:
    if status is not None:
        status._m = array("i", src._m)
