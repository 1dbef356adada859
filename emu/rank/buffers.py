"""Buffer specifications of the emulated ``mpi4py.MPI`` (rank side): ``Msg``, ``IN_PLACE``, ``BOTTOM``."""

from __future__ import annotations

from .types import ERR_BUFFER, TYPES, Datatype, Exception, from_format

ERR_TRUNCATE = 14


IN_PLACE = type("InPlace", (), {"__repr__": lambda self: "<emulated MPI.IN_PLACE>"})()
BOTTOM = type("Bottom", (), {"__repr__": lambda self: "<emulated MPI.BOTTOM>"})()


def _raw(obj, writable: bool) -> memoryview:
    if obj is BOTTOM:
        raise NotImplementedError("the emulated MPI has no MPI.BOTTOM (absolute addresses)")
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"expected a buffer (numpy array, bytes, bytearray, array, mmap), got "
                        f"{type(obj).__name__}") from None
    if writable and mv.readonly:
        raise Exception(ERR_BUFFER, "MPI_ERR_BUFFER: the receive buffer is read-only")
    if not mv.c_contiguous:
        raise Exception(ERR_BUFFER, "MPI_ERR_BUFFER: the buffer is not contiguous")
    return mv


class Msg:
    """A buffer and how much of it, in which datatype: ``buf``, ``[buf, type]``, ``[buf, count,
    type]``, ``[buf, (count, displ), type]``; for the v-variants ``[buf, counts, displs, type]``,
    ``[buf, (counts, displs), type]`` or ``[buf, counts, type]``."""

    def __init__(self, spec, writable: bool = False, vector: bool = False, blocks: int = 1):
        items = list(spec) if isinstance(spec, (list, tuple)) else [spec]
        buf, dt, count, displ, counts, displs = items[0], None, None, 0, None, None
        rest = items[1:]
        if rest and isinstance(rest[-1], Datatype):
            dt = rest.pop()
        elif rest and isinstance(rest[-1], str):
            dt = from_format(rest.pop())
        if vector:
            if len(rest) == 2:
                counts, displs = rest
            elif (len(rest) == 1 and isinstance(rest[0], tuple) and len(rest[0]) == 2
                  and not isinstance(rest[0][0], int)):  # (counts, displs)
                counts, displs = rest[0]
            elif len(rest) == 1:
                counts = rest[0]
        elif rest:
            count = rest[0]
            if isinstance(count, tuple):
                count, displ = count
        self.mv = _raw(buf, writable)
        self.dt = (dt if dt is not None else from_format(self.mv.format))._ok()
        self.raw = self.mv.cast("B") if (self.mv.format != "B" or self.mv.ndim != 1) else self.mv
        per = self.dt.extent or 1
        if vector:
            if counts is None:
                counts = [self.raw.nbytes // per // blocks] * blocks
            counts = [int(c) for c in counts]
            if displs is None:
                displs = [sum(counts[:i]) for i in range(len(counts))]
            self.counts, self.displs = counts, [int(d) for d in displs]
        self.count = int(count) if count is not None else self.raw.nbytes // per // blocks
        self.displ = int(displ)

    @property
    def nbytes(self) -> int:
        return self.count * self.dt.packed

    def pack(self, count: int | None = None, displ: int | None = None) -> bytes:
        count = self.count if count is None else count
        at = (self.displ if displ is None else displ) * self.dt.extent
        if self.dt.contiguous():
            end = at + count * self.dt.extent
            if end > self.raw.nbytes:
                raise Exception(ERR_BUFFER, f"MPI_ERR_BUFFER: {count} elements of {self.dt.name} do not fit the buffer")
            return bytes(self.raw[at:end])
        import numpy as np

        return np.frombuffer(self.raw, np.uint8)[self.dt.index(count) + at].tobytes()

    def unpack(self, data, count: int | None = None, displ: int | None = None) -> None:
        count = self.count if count is None else count
        if len(data) > count * self.dt.packed:
            raise Exception(ERR_TRUNCATE, f"MPI_ERR_TRUNCATE: a message of {len(data)} bytes for a buffer of "
                                          f"{count * self.dt.packed}")
        at = (self.displ if displ is None else displ) * self.dt.extent
        if self.dt.contiguous():
            self.raw[at:at + len(data)] = data
            return
        import numpy as np

        arr = np.frombuffer(self.raw, np.uint8)
        arr[self.dt.index(count)[:len(data)] + at] = np.frombuffer(bytes(data), np.uint8)

    def type_fields(self) -> dict:
        """What a reduction needs to know of the element type."""
        base = self.dt if self.dt.named else self.dt.base
        name = next((k for k, v in TYPES.items() if v is base), None) if base is not None else None
        npt = self.dt.numpy()
        return {"dtype": npt.str if npt is not None and npt.names is None else None, "tname": name}
