"""``MPI.Datatype`` of the emulated ``mpi4py.MPI`` (rank side): handles, named types, packing.

A ``Datatype`` is a handle (``Datatype()`` is a null one, ``Datatype(other)`` another handle to the
same type) on a ``_Type``: its size, bounds (lb/ub, true lb/ub) as MPI defines them, its envelope
and contents (MPICH's large-count form), and a builder of its type map (``typemap.Flat``, in
type-map order), made only when a message is packed. The constructors are in ``typector`` (which
sets them on the class); ``types`` is the module the rest imports."""

from __future__ import annotations

import numpy as np

from . import typemap as tm
from .attrs import Attributes
from .bufobj import acquire
from .handle import Handle, _Cell
from .mpierr import ERR_ARG, ERR_BUFFER, ERR_COUNT, ERR_OP, ERR_TYPE, Exception, Missing  # noqa: F401
from .named import CODES, FROMCODE, NAMED, NULL_NAMES

COMBINERS = {"NAMED": 1, "DUP": 2, "CONTIGUOUS": 3, "VECTOR": 4, "HVECTOR": 6, "INDEXED": 7, "HINDEXED": 9,
             "INDEXED_BLOCK": 10, "STRUCT": 12, "SUBARRAY": 13, "DARRAY": 14, "F90_REAL": 15, "F90_COMPLEX": 16,
             "F90_INTEGER": 17, "RESIZED": 18, "HINDEXED_BLOCK": 19, "VALUE_INDEX": 20}
"""MPICH's combiner numbers (``MPI.COMBINER_*``)."""
COMBINER_NAME = {v: k for k, v in COMBINERS.items()}
ORDER_C, ORDER_F = 56, 57
DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC, DISTRIBUTE_NONE, DISTRIBUTE_DFLT_DARG = 121, 122, 123, -49767
TYPECLASS_REAL, TYPECLASS_INTEGER, TYPECLASS_COMPLEX, TYPECLASS_LOGICAL = 1, 2, 3, 4
PAIRS = {"DOUBLE_INT": ("<f8", 8), "FLOAT_INT": ("<f4", 4), "LONG_INT": ("<i8", 8), "SHORT_INT": ("<i2", 4),
         "INT_INT": ("<i4", 4), "TWOINT": ("<i4", 4), "LONG_DOUBLE_INT": ("<f16", 16)}
"""The value-and-index pairs: the value's numpy type and where the int follows it."""


class _Type:
    """A datatype itself (what handles share)."""

    __slots__ = ("combiner", "ints", "addrs", "counts", "types", "size", "lb", "ub", "tlb", "tub", "align",
                 "build", "flat", "msgs", "committed", "name", "codes", "key", "base", "npcode", "predefined",
                 "family", "cls", "attrs", "__weakref__")  # the last four: emu.rank.handle's and attrs'

    def __init__(self, combiner: str, size: int, lb: int, ub: int, tlb: int, tub: int, build, align: int = 1,
                 contents=((), (), (), ()), base=None):
        self.combiner = COMBINERS[combiner]
        self.ints, self.addrs, self.counts, self.types = (list(x) for x in contents)
        self.size, self.lb, self.ub, self.tlb, self.tub, self.align = size, lb, ub, tlb, tub, align
        self.build, self.flat = build, None
        self.msgs: dict | None = None
        """The runs of a message of ``count`` elements, by count (``Datatype._message``; a few kept)."""
        self.committed = combiner == "NAMED"
        self.name, self.codes, self.key, self.npcode = "", None, None, None
        self.base = base
        """The named type all its basic values are of (for reductions), or None."""
        self.predefined = combiner in ("NAMED", "F90_INTEGER", "F90_REAL", "F90_COMPLEX")

    def map(self) -> tm.Flat:
        if self.flat is None:
            self.flat = self.build()
        return self.flat


def _bad(code: int, text: str) -> Exception:
    return Exception(code, text)


class Datatype(Attributes, Handle, family=True):
    """``MPI.Datatype``: a handle on a datatype (``emu.rank.handle``'s object model; the datatype
    itself is ``self._t``)."""

    _kind = "datatype"
    _t = _Cell()
    _store = "_t"
    _h = property(lambda self: self._t, lambda self, t: self.__dict__.__setitem__("_t", t))
    """The handle's object, as every handle class names it."""

    def _ok(self) -> _Type:
        if self._t is None:
            raise _bad(ERR_TYPE, "MPI_ERR_TYPE: invalid datatype (DATATYPE_NULL or freed)")
        return self._t

    def __repr__(self) -> str:
        return f"<emulated Datatype {self.Get_name() or COMBINER_NAME.get(self.combiner, '?').lower()}>"

    def __reduce__(self):
        t = self._t
        if t is None or t.combiner == COMBINERS["NAMED"]:
            key = "DATATYPE_NULL" if t is None else t.key
            return (_named, (key,)) if TYPES[key] is self else (type(self), (TYPES[key],))
        old, comb, params = self.decode()
        return (_recreate, (old, comb, params))

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        raise Missing(f"the emulated MPI (emu mpirun) has no Datatype.{name}")

    # -- what a datatype says of itself ------------------------------------------------------------------
    def Get_size(self) -> int:
        return self._ok().size

    def Get_extent(self) -> tuple[int, int]:
        t = self._ok()
        return t.lb, t.ub - t.lb

    def Get_true_extent(self) -> tuple[int, int]:
        t = self._ok()
        return t.tlb, t.tub - t.tlb

    size = property(Get_size)
    packed = size
    """Bytes one element takes in a message."""
    extent = property(lambda self: self.Get_extent()[1])
    lb = property(lambda self: self._ok().lb)
    ub = property(lambda self: self._ok().ub)
    true_extent = property(lambda self: self.Get_true_extent()[1])
    true_lb = property(lambda self: self._ok().tlb)
    true_ub = property(lambda self: self._ok().tub)

    def Get_envelope(self) -> tuple[int, int, int, int, int]:
        t = self._ok()
        return len(t.ints), len(t.addrs), len(t.counts), len(t.types), t.combiner

    envelope = property(Get_envelope)
    combiner = property(lambda self: self.Get_envelope()[-1])

    def Get_contents(self) -> tuple[list, list, list, list]:
        t = self._ok()
        if t.combiner == COMBINERS["NAMED"]:
            raise _bad(ERR_ARG, "MPI_ERR_ARG: Get_contents of a named datatype")
        return list(t.ints), list(t.addrs), list(t.counts), [_handle(x) for x in t.types]

    contents = property(Get_contents)
    is_named = property(lambda self: self._t is not None and self._t.combiner == COMBINERS["NAMED"])
    is_predefined = property(lambda self: self._t is None or self._t.predefined)

    def Get_name(self) -> str:
        return "MPI_DATATYPE_NULL" if self._t is None else self._t.name

    def Set_name(self, name: str) -> None:
        self._ok().name = str(name)

    name = property(Get_name, Set_name)

    # -- life ----------------------------------------------------------------------------------------------
    def Commit(self) -> "Datatype":
        self._ok().committed = True
        return self

    def Free(self) -> None:
        t = self._ok()
        if t.predefined:
            raise _bad(ERR_TYPE, "MPI_ERR_TYPE: a predefined datatype cannot be freed")
        self._delete_attrs()
        self._t = None

    def free(self) -> None:  # as Handle.free
        if self._t is None or self.__dict__.get("_const"):
            return
        if self._t.predefined:
            self._t = None
            return
        self.Free()

    def _committed(self) -> _Type:
        t = self._ok()
        if not t.committed:
            raise _bad(ERR_TYPE, "MPI_ERR_TYPE: datatype has not been committed (call its Commit() first)")
        return t

    # -- codes (mpi4py's Python/NumPy interoperability) ----------------------------------------------------------
    def _codes(self):
        t = self._t
        while t is not None and t.combiner == COMBINERS["DUP"]:
            t = t.types[0]
        return t.codes if t is not None else None

    def tocode(self) -> str:
        c = self._codes()
        if c is None or c[0] is None:
            raise ValueError("cannot map to character code or type string")
        return c[0]

    @classmethod
    def fromcode(cls, code: str) -> "Datatype":
        key = FROMCODE.get(code) if isinstance(code, str) else None
        if key is None:
            raise ValueError(f"cannot map code {code!r} to MPI datatype")
        return TYPES[key]

    typestr = property(lambda self: "" if self._t is None else (self._codes() or (None, f"V{max(self.extent, 0)}"))[1])
    typechar = property(lambda self: "" if self._t is None else (self._codes() or (None, "", "V"))[2])

    # -- packing -------------------------------------------------------------------------------------------------
    def _message(self, count: int) -> tm.Flat:
        t = self._committed()
        msgs = t.msgs
        if msgs is None:
            msgs = t.msgs = {}
        else:
            flat = msgs.get(count)
            if flat is not None:
                return flat
        flat = tm.message(t.map(), count, t.ub - t.lb, t.size)
        if len(flat) <= 4096:  # (a program's few message lengths, small ones; the runs' users never change them)
            if len(msgs) >= 8:
                msgs.clear()
            msgs[count] = flat
        return flat

    def _count(self, mem) -> int:
        """How many elements a buffer holds (mpi4py: its length over the extent)."""
        ext = self.extent
        return mem.nbytes // ext if ext > 0 else 0

    def _pack(self, inbuf) -> tuple[bytes, tm.Flat]:
        mem = acquire(inbuf)
        flat = self._message(self._count(mem))
        _inside(flat, mem.nbytes, "input buffer")
        return tm.gather(mem.arr, 0, flat), flat

    def _unpack(self, data, outbuf, external: bool = False) -> int:
        """``data`` (packed) into ``outbuf``, as many whole elements as both hold; the bytes taken."""
        size = self._committed().size
        mem = acquire(outbuf, writable=True)
        count = min(self._count(mem), len(data) // size) if size else 0
        flat = self._message(count)
        _inside(flat, mem.nbytes, "output buffer")
        n = count * size
        data = bytes(data[:n])
        tm.scatter(mem.arr, 0, flat, tm.to_big_endian(data, flat) if external else data)
        return n

    def Pack(self, inbuf, outbuf, position: int, comm) -> int:
        return _put(outbuf, position, self._pack(inbuf)[0])

    def Unpack(self, inbuf, position: int, outbuf, comm) -> int:
        return position + self._unpack(acquire(inbuf).arr[position:], outbuf)

    def Pack_size(self, count: int, comm) -> int:
        t = self._committed()
        if count < 0:
            raise _bad(ERR_COUNT, f"MPI_ERR_COUNT: invalid count {count}")
        return count * t.size

    def Pack_external(self, datarep: str, inbuf, outbuf, position: int) -> int:
        """Packed in external32: each basic value big-endian."""
        _external(datarep)
        data, flat = self._pack(inbuf)
        return _put(outbuf, position, tm.to_big_endian(data, flat))

    def Unpack_external(self, datarep: str, inbuf, position: int, outbuf) -> int:
        _external(datarep)
        return position + self._unpack(acquire(inbuf).arr[position:], outbuf, external=True)

    def Pack_external_size(self, datarep: str, count: int) -> int:
        _external(datarep)
        return self.Pack_size(count, None)

    # -- what reductions and buffers need -------------------------------------------------------------------------
    def numpy(self):
        """The numpy type of one basic value as packed (pairs: a record without padding), or None."""
        t = self._t
        if t is None:
            return None
        if t.npcode is not None:
            return np.dtype(t.npcode)
        if t.key in PAIRS:
            v, _ = PAIRS[t.key]
            return np.dtype([("v", v), ("i", "<i4")])
        return t.base.numpy() if t.base is not None and t.base is not self else None



def _external(datarep: str) -> None:
    if str(datarep).lower() != "external32":
        raise _bad(ERR_ARG, f"MPI_ERR_ARG: data representation {datarep!r}: the emulated MPI has external32 only")


def _inside(flat: tm.Flat, nbytes: int, what: str) -> None:
    lo, hi = tm.span(flat)
    if lo < 0 or hi > nbytes:
        raise _bad(ERR_BUFFER, f"MPI_ERR_BUFFER: the datatype reaches bytes [{lo}, {hi}) of a {nbytes}-byte "
                               f"{what}: outside it")


def _put(outbuf, position: int, data: bytes) -> int:
    mem = acquire(outbuf, writable=True)
    end = position + len(data)
    if position < 0 or end > mem.nbytes:
        raise _bad(ERR_BUFFER, f"MPI_ERR_BUFFER: {len(data)} packed bytes at position {position} do not fit "
                               f"a {mem.nbytes}-byte output buffer")
    mem.arr[position:end] = np.frombuffer(data, np.uint8)
    return end


def _handle(t: _Type) -> Datatype:
    if t.combiner == COMBINERS["NAMED"]:
        return TYPES[t.key]
    return Datatype._of(t)


def _named(key: str) -> Datatype:
    return TYPES[key]


def _recreate(old: Datatype, combiner: str, params: dict) -> Datatype:
    if combiner in ("F90_INTEGER", "F90_REAL", "F90_COMPLEX"):
        return getattr(Datatype, "Create_" + combiner.lower())(**params)
    if combiner == "STRUCT":
        return Datatype.Create_struct(**params).Commit()
    if combiner == "DUP":
        return old.Dup()
    return getattr(old, "Create_" + combiner.lower())(**params).Commit()


def _swap(name: str, size: int, code: str) -> int:
    """The size of the basic values external32 swaps (a complex: each part; bytes and chars: 1)."""
    kind = np.dtype(code).kind if code else "V"
    if kind == "c":
        return size // 2
    if kind in "SUVb" or name in ("BYTE", "PACKED"):
        return 4 if kind == "U" else 1
    return size


def named_types() -> dict[str, Datatype]:
    out, by_mpi = {}, {}
    for key, (size, extent, code, mpi_name) in NAMED.items():
        if mpi_name in by_mpi:  # an alias: the same handle, as in mpi4py (MPI.SIGNED_INT is MPI.INT)
            out[key] = by_mpi[mpi_name]
            continue
        if key in PAIRS:
            v, at = PAIRS[key]
            vs = np.dtype(v).itemsize
            flat = tm.Flat.of([(0, vs, vs), (at, 4, 4)])
            t = _Type("NAMED", size, 0, extent, 0, at + 4, lambda f=flat: f, align=max(min(vs, 16), 4))
        else:
            sw = _swap(key, size, code)
            flat = tm.Flat.of([(0, size, sw)] if size else [])
            align = sw if np.dtype(code).kind == "c" else min(size, 16)
            t = _Type("NAMED", size, 0, extent, 0, size, lambda f=flat: f, align=max(align, 1))
            t.npcode = code if code and np.dtype(code).kind not in "SUV" else ("|u1" if size == 1 else None)
        t.name, t.key, t.codes = mpi_name, key, CODES.get(key, (None, f"V{extent}", "V"))
        d = Datatype._of(t)
        t.base = d
        out[key] = by_mpi[mpi_name] = d
    null = Datatype()
    out["DATATYPE_NULL"] = null
    for key in NULL_NAMES:
        out[key] = null
    return out


TYPES = named_types()
FORMATS = {"b": "SIGNED_CHAR", "B": "UNSIGNED_CHAR", "c": "CHAR", "h": "SHORT", "H": "UNSIGNED_SHORT", "i": "INT",
           "I": "UNSIGNED", "l": "LONG", "L": "UNSIGNED_LONG", "q": "LONG_LONG", "Q": "UNSIGNED_LONG_LONG",
           "f": "FLOAT", "d": "DOUBLE", "g": "LONG_DOUBLE", "?": "C_BOOL", "e": "FLOAT16_T",
           "Zf": "C_FLOAT_COMPLEX", "Zd": "C_DOUBLE_COMPLEX", "Zg": "C_LONG_DOUBLE_COMPLEX", "n": "AINT",
           "N": "UNSIGNED_LONG", "s": "CHAR", "p": "AINT", "P": "UNSIGNED_LONG", "u": "UINT16_T", "w": "WCHAR"}


def from_format(fmt: str) -> Datatype:
    """The datatype of a buffer's format (mpi4py's ``getdatatype``: native byte order only)."""
    if fmt in ("B", "b", ""):
        return TYPES["BYTE"] if fmt in ("B", "") else TYPES["SIGNED_CHAR"]
    f = fmt
    if f[0] in "@=":
        f = f[1:]
    elif f[0] == "<":
        f = f[1:]
    elif f[0] in ">!":
        raise BufferError(f"format string {fmt!r} with non-native byte order")
    key = FROMCODE.get(f) or FORMATS.get(f)
    if key is None:
        raise KeyError(f"cannot map {f!r} to MPI datatype")
    return TYPES[key]
