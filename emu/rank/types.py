"""Datatypes, operators and buffer specifications of the emulated ``mpi4py.MPI`` (rank side).

A datatype is a type map: byte runs (offset, length) inside one element of ``extent`` bytes, and,
for the named ones, the numpy type of an element. A message is packed to the bytes of its type map
and unpacked into the receiver's buffer the same way; derived types (contiguous, vector, hvector,
indexed, hindexed, struct, resized) are byte maps too.
"""

from __future__ import annotations

from .named import NAMED, NULL_NAMES

PAIRS = {"DOUBLE_INT": ("<f8", "<i4"), "FLOAT_INT": ("<f4", "<i4"), "LONG_INT": ("<i8", "<i4"),
         "SHORT_INT": ("<i2", "<i4"), "INT_INT": ("<i4", "<i4"), "TWOINT": ("<i4", "<i4"),
         "LONG_DOUBLE_INT": ("<f16", "<i4")}
ERR_TYPE, ERR_OP, ERR_BUFFER, ERR_COUNT, ERR_ARG = 3, 9, 1, 2, 12


from .errors import Exception  # noqa: E402,A001 -- MPI.Exception


def _np():
    import numpy

    return numpy


class Datatype:
    def __init__(self, name: str, size: int, extent: int, code: str | None, runs=None, lb: int = 0,
                 named: bool = False, base=None):
        self._name, self._size, self._extent, self._lb = name, size, extent, lb
        self.code = code
        """The numpy type string of one element (named types; pairs are numpy records)."""
        self.runs = runs if runs is not None else ([(0, size)] if size else [])
        self.named = named
        self.base = base
        """The named type every byte run is made of, when there is one (derived types)."""
        self.committed = named
        self._null = False

    def _ok(self) -> "Datatype":
        if self._null:
            raise Exception(ERR_TYPE, "MPI_ERR_TYPE: invalid datatype (DATATYPE_NULL or freed)")
        return self

    # -- what a datatype says of itself -------------------------------------------------------
    def Get_size(self) -> int:
        return self._ok()._size

    def Get_extent(self) -> tuple[int, int]:
        return self._ok()._lb, self._extent

    Get_true_extent = Get_extent

    size = property(lambda self: self.Get_size())
    extent = property(lambda self: self.Get_extent()[1])
    lb = property(lambda self: self.Get_extent()[0])
    ub = property(lambda self: self._lb + self._extent)
    is_named = property(lambda self: self.named)
    is_predefined = property(lambda self: self.named or self._null)

    def Get_name(self) -> str:
        return self._name

    name = property(Get_name)

    def Set_name(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"<emulated Datatype {self._name}>"

    def __eq__(self, other) -> bool:
        if not isinstance(other, Datatype):
            return NotImplemented
        if self._null or other._null:
            return self._null and other._null
        return self is other or (self.named and other.named and self._name == other._name and self.code == other.code)

    def __hash__(self) -> int:
        return hash(self._name)

    def __bool__(self) -> bool:
        return not self._null

    def Commit(self) -> "Datatype":
        self._ok().committed = True
        return self

    def Free(self) -> None:
        if self.named:
            raise Exception(ERR_TYPE, "MPI_ERR_TYPE: a named datatype cannot be freed")
        self._null = True

    def Dup(self) -> "Datatype":
        d = Datatype(self._name, self._size, self._extent, self.code, list(self.runs), self._lb, False, self.base)
        d.committed = self.committed
        return d

    def tocode(self) -> str:
        if self.code is None:
            raise ValueError(f"cannot map {self._name} to a type code")
        return self.code

    # -- derived types -------------------------------------------------------------------------
    def _derived(self, name: str, runs, extent: int, lb: int = 0) -> "Datatype":
        runs = _merge(runs)
        return Datatype(name, sum(n for _, n in runs), extent, None, runs, lb, False, self._base())

    def _base(self):
        return self if self.named else self.base

    def _place(self, at: int) -> list:
        return [(at + o, n) for o, n in self.runs]

    def Create_contiguous(self, count: int) -> "Datatype":
        self._ok()
        return self._derived("contiguous", [r for i in range(count) for r in self._place(i * self._extent)],
                             count * self._extent)

    def Create_vector(self, count: int, blocklength: int, stride: int) -> "Datatype":
        return self.Create_hvector(count, blocklength, stride * self._ok()._extent)

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> "Datatype":
        self._ok()
        runs = [r for i in range(count) for j in range(blocklength) for r in self._place(i * stride + j * self._extent)]
        ext = ((count - 1) * stride + blocklength * self._extent) if count else 0
        return self._derived("hvector", runs, ext)

    def Create_indexed(self, blocklengths, displacements) -> "Datatype":
        return self.Create_hindexed(blocklengths, [d * self._ok()._extent for d in displacements])

    def Create_hindexed(self, blocklengths, displacements) -> "Datatype":
        self._ok()
        runs = [r for b, d in zip(blocklengths, displacements) for j in range(b)
                for r in self._place(d + j * self._extent)]
        ends = [d + b * self._extent for b, d in zip(blocklengths, displacements)]
        lb = min(displacements) if len(displacements) else 0
        return self._derived("hindexed", runs, (max(ends) - lb) if ends else 0, lb)

    Create_indexed_block = lambda self, bl, displs: self.Create_indexed([bl] * len(displs), displs)  # noqa: E731
    Create_hindexed_block = lambda self, bl, displs: self.Create_hindexed([bl] * len(displs), displs)  # noqa: E731

    @classmethod
    def Create_struct(cls, blocklengths, displacements, datatypes) -> "Datatype":
        runs, ends, bases = [], [], set()
        for b, d, t in zip(blocklengths, displacements, datatypes):
            t._ok()
            runs += [r for j in range(b) for r in t._place(d + j * t._extent)]
            ends.append(d + b * t._extent)
            bases.add(t._base()._name if t._base() is not None else None)
        lb = min(displacements) if len(displacements) else 0
        ext = max(ends) - lb if ends else 0
        align = max((t._extent if t.named else 1 for t in datatypes), default=1)
        if align > 1 and ext % align:  # padded like a C struct, as MPI does
            ext += align - ext % align
        base = datatypes[0]._base() if len(bases) == 1 and datatypes else None
        runs = _merge(runs)
        return Datatype("struct", sum(n for _, n in runs), ext, None, runs, lb, False, base)

    def Create_resized(self, lb: int, extent: int) -> "Datatype":
        self._ok()
        return Datatype("resized", self._size, extent, self.code if self.named else None, list(self.runs), lb, False,
                        self._base())

    def __getattr__(self, name: str):
        if name.startswith("Create_") or name in ("Pack", "Unpack", "Get_envelope", "Get_contents", "Match_size"):
            raise NotImplementedError(f"the emulated MPI has no Datatype.{name}")
        raise AttributeError(name)

    # -- packing -------------------------------------------------------------------------------
    @property
    def packed(self) -> int:
        """Bytes one element takes in a message."""
        return sum(n for _, n in self.runs)

    def contiguous(self) -> bool:
        return self.runs == [(0, self._extent)] and self._lb == 0

    def index(self, count: int):
        """Byte indices of ``count`` elements in a buffer (a numpy array), for gather and scatter."""
        np = _np()
        one = np.concatenate([np.arange(o, o + n) for o, n in self.runs]) if self.runs else np.empty(0, np.int64)
        return (np.arange(count)[:, None] * self._extent + one[None, :]).ravel() - self._lb

    def numpy(self):
        np = _np()
        if self.code is not None:
            return np.dtype(self.code)
        key = getattr(self, "key", None)
        if key in PAIRS:
            a, b = PAIRS[key]
            return np.dtype([("v", a), ("i", b)], align=True)
        if self.named or self.base is None:
            return None
        return self.base.numpy()


def _merge(runs) -> list:
    out: list = []
    for o, n in sorted(runs):
        if n <= 0:
            continue
        if out and out[-1][0] + out[-1][1] == o:
            out[-1] = (out[-1][0], out[-1][1] + n)
        else:
            out.append((o, n))
    return out


def named_types() -> dict[str, Datatype]:
    out = {}
    for name, (size, extent, code, mpi_name) in NAMED.items():
        d = Datatype(mpi_name, size, extent, code if name not in PAIRS else None, named=True)
        d.key = name
        if name in PAIRS:  # a value and an int, carried with the padding of the C struct (numpy's record)
            d.runs = [(0, extent)]
        out[name] = d
    null = Datatype("MPI_DATATYPE_NULL", 0, 0, None, named=False)
    null._null = True
    out["DATATYPE_NULL"] = null
    for name in NULL_NAMES:
        out[name] = null
    return out


TYPES = named_types()
FORMATS = {"b": "SIGNED_CHAR", "B": "UNSIGNED_CHAR", "c": "CHAR", "h": "SHORT", "H": "UNSIGNED_SHORT", "i": "INT",
           "I": "UNSIGNED", "l": "LONG", "L": "UNSIGNED_LONG", "q": "LONG_LONG", "Q": "UNSIGNED_LONG_LONG",
           "f": "FLOAT", "d": "DOUBLE", "g": "LONG_DOUBLE", "?": "C_BOOL", "e": "FLOAT16_T",
           "Zf": "C_FLOAT_COMPLEX", "Zd": "C_DOUBLE_COMPLEX", "Zg": "C_LONG_DOUBLE_COMPLEX", "n": "AINT"}


def from_format(fmt: str) -> Datatype:
    f = fmt.lstrip("<>=@!")
    name = FORMATS.get(f)
    if name is None:
        raise NotImplementedError(f"the emulated MPI cannot map the buffer format {fmt!r} to an MPI datatype; "
                                  "give one: [buf, MPI.TYPE]")
    return TYPES[name]


# -- operators ----------------------------------------------------------------------------------------
class Op:
    _users: dict[int, "Op"] = {}

    def __init__(self, name: str, fn=None, commute: bool = True, uid: int = 0):
        self.name, self.fn, self.commute, self.uid = name, fn, commute, uid

    @classmethod
    def Create(cls, function, commute: bool = False) -> "Op":
        uid = len(cls._users) + 1
        op = cls._users[uid] = Op(f"user:{uid}", function, commute, uid)
        return op

    def Free(self) -> None:
        if not self.uid:
            raise Exception(ERR_OP, "MPI_ERR_OP: a predefined operation cannot be freed")
        Op._users.pop(self.uid, None)

    def Is_commutative(self) -> bool:
        return self.commute

    is_commutative = property(Is_commutative)
    is_predefined = property(lambda self: not self.uid)

    def __call__(self, x, y):
        if self.uid:
            return self.fn(x, y, None)
        return PY_OPS[self.name](x, y)

    def __repr__(self) -> str:
        return f"<emulated Op {self.name}>"

    @property
    def key(self) -> str:
        return self.name


def _loc(better):
    def op(x, y):
        (u, i), (v, j) = x, y
        if better(u, v):
            return u, i
        if better(v, u):
            return v, j
        return (v, j) if j < i else (u, i)
    return op


PY_OPS = {"max": lambda x, y: y if y > x else x, "min": lambda x, y: y if y < x else x,
          "sum": lambda x, y: x + y, "prod": lambda x, y: x * y, "band": lambda x, y: x & y,
          "bor": lambda x, y: x | y, "bxor": lambda x, y: x ^ y, "land": lambda x, y: bool(x) & bool(y),
          "lor": lambda x, y: bool(x) | bool(y), "lxor": lambda x, y: bool(x) ^ bool(y),
          "maxloc": _loc(lambda a, b: a > b), "minloc": _loc(lambda a, b: a < b),
          "replace": lambda x, y: y, "no_op": lambda x, y: x}


def numpy_combine(name: str, a, b):
    """``a op b`` elementwise on numpy arrays (a: the lower ranks' part)."""
    np = _np()
    if name in ("minloc", "maxloc"):
        take_b = (b["v"] < a["v"]) if name == "minloc" else (b["v"] > a["v"])
        tie = (b["v"] == a["v"]) & (b["i"] < a["i"])
        return np.where(take_b | tie, b, a)
    fns = {"max": np.maximum, "min": np.minimum, "sum": np.add, "prod": np.multiply, "band": np.bitwise_and,
           "bor": np.bitwise_or, "bxor": np.bitwise_xor, "land": np.logical_and, "lor": np.logical_or,
           "lxor": np.logical_xor}
    if name == "replace":
        return b
    if name == "no_op":
        return a
    fn = fns.get(name)
    if fn is None:
        raise Exception(ERR_OP, f"MPI_ERR_OP: invalid operation {name}")
    out = fn(a, b)
    return out.astype(a.dtype) if out.dtype != a.dtype else out


OPS = {n.upper(): Op(n) for n in PY_OPS}
OPS["OP_NULL"] = Op("op_null")
