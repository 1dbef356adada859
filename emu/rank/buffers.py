"""Buffer specifications of the emulated ``mpi4py.MPI`` (rank side): ``Msg``, ``IN_PLACE``, ``BOTTOM``.

``Msg`` reads every form mpi4py 4.1 reads (its ``message_simple`` and ``message_vector``), with its
checks and its errors: ``buf``, ``[buf, T]``, ``[buf, count]``, ``[buf, count, T]``, ``[buf, (count,
displ), T]``, ``[buf, count, displ, T]``; for the v-variants counts and displacements each a sequence,
one integer or None; ``None`` or ``MPI.BOTTOM`` as the buffer with an explicit type (displacements are
then absolute addresses, ``MPI.Get_address``). A message is (memory, address, count, datatype): its
displacement is part of its address, as in mpi4py, and the datatype's type map is read and written
in map order (``typemap``), never outside the buffer."""

from __future__ import annotations

from . import ops, typemap as tm
from .bufobj import BOTTOM, IN_PLACE, Mem, absolute, acquire, is_bottom  # noqa: F401 -- BOTTOM, IN_PLACE: MPI's
from .dtype import TYPES, Datatype, from_format
from .mpierr import ERR_BUFFER, ERR_TRUNCATE, Exception
from .named import FROMCODE


def _is_datatype(x) -> bool:
    return isinstance(x, (Datatype, str))


def _as_datatype(x) -> Datatype:
    if isinstance(x, Datatype):
        return x
    key = FROMCODE.get(x) if isinstance(x, str) else None
    if key is None:
        raise KeyError(f"cannot map {x!r} to MPI datatype")
    return TYPES[key]


def _index(x, what: str) -> int:
    try:
        return x.__index__()
    except AttributeError:
        raise TypeError(f"message: {what} must be an integer, got {type(x).__name__}") from None


def _integral(x) -> bool:
    """An integer, not a sequence of them (a numpy scalar is one; a numpy array is not)."""
    if not hasattr(x, "__index__"):
        return False
    try:
        x.__index__()
        return True
    except TypeError:
        return False


def _has_buffer(obj) -> bool:
    try:
        memoryview(obj)
        return True
    except TypeError:
        return False


def _split(msg, vector: bool):
    """(buf, count(s), displ(s), type) of a specification, as mpi4py unpacks it."""
    o_count = o_displ = o_type = None
    if _has_buffer(msg):
        return msg, None, None, None
    if isinstance(msg, (list, tuple)):
        n = len(msg)
        pair = (tuple,) if vector else (tuple, list)
        if n == 2:
            o_buf, o_count = msg
            if _is_datatype(o_count):
                o_count, o_type = None, o_count
            elif isinstance(o_count, pair):
                o_count, o_displ = o_count
        elif n == 3:
            o_buf, o_count, o_type = msg
            if isinstance(o_count, pair):
                o_count, o_displ = o_count
        elif n == 4:
            o_buf, o_count, o_displ, o_type = msg
        else:
            raise ValueError("message: expecting 2 to 4 items")
        return o_buf, o_count, o_displ, o_type
    if hasattr(msg, "__dlpack__") or hasattr(msg, "__cuda_array_interface__"):
        return msg, None, None, None
    raise TypeError("message: expecting buffer or list/tuple")


def _extent(dt: Datatype, what: str) -> int:
    if not dt:
        raise ValueError(f"message: cannot {what}, datatype is null")
    lb, ext = dt.Get_extent()
    if ext <= 0:
        raise ValueError(f"message: cannot {what}, datatype extent {ext} (lb:{lb}, ub:{lb + ext})")
    return ext


def _array(x, blocks: int, what: str) -> list[int]:
    xs = [_index(v, what) for v in x]
    if len(xs) != blocks:
        raise ValueError(f"expecting {blocks} items, got {len(xs)}")
    return xs


class Msg:
    """A buffer specification: its memory, the message's address in it, count(s) and datatype."""

    def __init__(self, spec, writable: bool = False, vector: bool = False, blocks: int = 1):
        o_buf, o_count, o_displ, o_type = _split(spec, vector)
        self.bottom = is_bottom(o_buf)
        if self.bottom:  # an explicit datatype is required; addresses are absolute
            self.mem, self.dt = None, _as_datatype(o_type)
            length = 0
        else:
            self.mem = acquire(o_buf, writable)
            self.dt = _as_datatype(o_type) if o_type is not None else from_format(self.mem.format)
            length = self.mem.nbytes
        self.base = 0
        """Where the message starts: a byte offset in ``mem`` (an absolute address for BOTTOM)."""
        if vector:
            self._vector(o_count, o_displ, length, blocks)
        else:
            self._simple(o_buf, o_count, o_displ, length, blocks)

    def _simple(self, o_buf, o_count, o_displ, length: int, blocks: int) -> None:
        displ = 0
        if o_displ is not None:
            displ = _index(o_displ, "displacement")
            if displ < 0:
                raise ValueError(f"message: negative displacement {displ}")
            if displ > 0:
                ext = _extent(self.dt, "handle displacement")
                if displ * ext > length:
                    raise ValueError(f"message: displacement {displ} out of bounds, number of datatype entries "
                                     f"{length // ext}")
                self.base = displ * ext
                length -= self.base
        if o_count is not None:
            count = _index(o_count, "count")
            if count < 0:
                raise ValueError(f"message: negative count {count}")
            if count > 0 and o_buf is None:
                raise ValueError(f"message: buffer is None but count is {count}")
        elif length > 0:
            ext = _extent(self.dt, "infer count")
            lb = self.dt.lb
            if length % ext:
                raise ValueError(f"message: cannot infer count, buffer length {length} is not a multiple of "
                                 f"datatype extent {ext} (lb:{lb}, ub:{lb + ext})")
            if blocks > 1 and (length // ext) % blocks:
                raise ValueError(f"message: cannot infer count, number of entries {length // ext} is not a "
                                 f"multiple of required number of blocks {blocks}")
            count = (length // ext) // max(blocks, 1)
        else:
            count = 0
        self.count, self.displ = count, displ
        self.counts = self.displs = None

    def _vector(self, o_counts, o_displs, length: int, blocks: int) -> None:
        if o_counts is None:
            size = 0
            if length > 0:
                ext = _extent(self.dt, "infer count")
                if length % ext:
                    lb = self.dt.lb
                    raise ValueError(f"message: cannot infer count, buffer length {length} is not a multiple of "
                                     f"datatype extent {ext} (lb:{lb}, ub:{lb + ext})")
                size = length // ext
            counts = [size // blocks + (size % blocks > i) for i in range(blocks)]
        elif _integral(o_counts):
            counts = [_index(o_counts, "count")] * blocks
        else:
            counts = _array(o_counts, blocks, "count")
        if o_displs is None:
            displs = [sum(counts[:i]) for i in range(blocks)]
        elif _integral(o_displs):
            d = _index(o_displs, "displacement")
            displs = [d * i for i in range(blocks)]
        else:
            displs = _array(o_displs, blocks, "displacement")
        self.counts, self.displs = counts, displs
        self.count, self.displ = sum(counts), 0

    @classmethod
    def block(cls, mem: Mem | None, dt: Datatype, base: int, count: int) -> "Msg":
        """``count`` elements of ``dt`` at byte ``base`` of ``mem`` (None: at address ``base``, BOTTOM)."""
        m = cls.__new__(cls)
        m.bottom, m.mem, m.dt, m.base = mem is None, mem, dt, base
        m.count, m.displ, m.counts, m.displs = count, 0, None, None
        return m

    # -- what the calls use --------------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        return self.count * self.dt.size

    def _region(self, flat: tm.Flat, at: int):
        """(byte array, offset of the message's first byte + ``at`` in it) covering ``flat``."""
        lo, hi = tm.span(flat)
        if self.bottom:
            start = self.base + at + lo
            return absolute(start, self.base + at + hi), -lo
        off = self.base + at
        if len(flat) and (off + lo < 0 or off + hi > self.mem.nbytes):
            raise Exception(ERR_BUFFER, f"MPI_ERR_BUFFER: the message's datatype reaches bytes [{off + lo}, "
                                        f"{off + hi}) of a {self.mem.nbytes}-byte buffer: outside it")
        return self.mem.arr, off

    def _flat(self, count: int) -> tm.Flat:
        return self.dt._message(count)

    def pack(self, count: int | None = None, displ: int | None = None) -> bytes:
        """The packed bytes of ``count`` elements, ``displ`` extents past the message's address."""
        count = self.count if count is None else count
        at = displ * self.dt.extent if displ else 0
        flat = self._flat(count)
        arr, off = self._region(flat, at)
        return tm.gather(arr, off, flat)

    def unpack(self, data, count: int | None = None, displ: int | None = None) -> None:
        """``data`` (packed) into ``count`` elements, ``displ`` extents past the message's address."""
        count = self.count if count is None else count
        cap = count * self.dt.size
        if len(data) > cap:
            raise Exception(ERR_TRUNCATE, f"MPI_ERR_TRUNCATE: a message of {len(data)} bytes for a buffer of {cap}")
        if not len(data):
            return
        if self.mem is not None and self.mem.readonly:
            raise BufferError("Object is not writable.")
        at = displ * self.dt.extent if displ else 0
        flat = self._flat(count)
        arr, off = self._region(flat, at)
        tm.scatter(arr, off, flat, data)

    def memory(self, writable: bool = False) -> memoryview:
        """The message's own memory (``count`` extents from its address), as a user operator gets it."""
        n = self.count * self.dt.extent
        if self.bottom:
            return memoryview(absolute(self.base, self.base + n)) if n > 0 else memoryview(bytearray(0))
        arr = self.mem.arr[self.base:self.base + max(n, 0)]
        mv = memoryview(arr)
        return mv.toreadonly() if not writable and not mv.readonly else mv

    def type_fields(self) -> dict:
        """What a reduction needs to know of the element type."""
        t = self.dt._t
        base = t.base if t is not None else None
        name = base._t.key if base is not None and base._t is not None else None
        npt = self.dt.numpy()
        return {"dtype": npt.str if npt is not None and npt.names is None else None, "tname": name}


class MsgW:
    """An ``Alltoallw`` specification, as mpi4py's ``message_vector_w`` reads it: ``[buf, types]``,
    ``[buf, (counts, displs), types]`` or ``[buf, counts, displs, types]``, one count, byte
    displacement and datatype per block; ``BOTTOM`` needs counts and displacements."""

    def __init__(self, spec, writable: bool = False, blocks: int = 1):
        n = len(spec)
        if n == 2:
            buf, types = spec
            counts = displs = None
        elif n == 3:
            buf, (counts, displs), types = spec
        elif n == 4:
            buf, counts, displs, types = spec
        else:
            raise ValueError("message: expecting 2 to 4 items")
        self.bottom = is_bottom(buf)
        if self.bottom:
            if counts is None:
                raise ValueError("message: BOTTOM requires counts")
            if displs is None:
                raise ValueError("message: BOTTOM requires displs")
            self.mem = None
        else:
            self.mem = acquire(buf, writable)
        if counts is None and displs is None:
            counts, displs = [1] * blocks, [0] * blocks
        self.counts = _array(counts, blocks, "count")
        self.displs = _array(displs, blocks, "displacement")
        types = list(types)
        if len(types) != blocks:
            raise ValueError(f"expecting {blocks} items, got {len(types)}")
        for t in types:
            if not isinstance(t, Datatype):
                raise TypeError(f"expected a Datatype, got {type(t).__name__}")
        self.types = types

    def block(self, i: int) -> Msg:
        """Block ``i`` as a message: ``counts[i]`` elements of ``types[i]``, ``displs[i]`` bytes in."""
        return Msg.block(self.mem, self.types[i], self.displs[i], self.counts[i])

    def pack(self, i: int) -> bytes:
        return self.block(i).pack()

    def unpack(self, i: int, data) -> None:
        self.block(i).unpack(data)


ops.MESSAGE.append(Msg)
