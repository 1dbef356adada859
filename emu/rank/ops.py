"""``MPI.Op`` of the emulated ``mpi4py.MPI`` (rank side): the predefined operators, user operators
(``Op.Create(function, commute)``, called as mpi4py calls them: ``function(inbuf, inoutbuf, datatype)``
on the buffers' own memory) and their local side, ``Op.Reduce_local``."""

from __future__ import annotations

from .handle import Handle, _Cell
from .mpibuf import buffer
from .mpierr import ERR_OP, Exception, Missing

MAX_USER_OPS = 32
"""As mpi4py: at most 32 user-defined operations exist at once."""
MESSAGE: list = []
"""``buffers.Msg``, registered by ``emu.rank.buffers`` when it is imported (it imports this module's
importers): ``Reduce_local`` reads buffer specifications with it."""


class _Impl:
    def __init__(self, name: str, fn=None, commute: bool = True, uid: int = 0):
        self.name, self.fn, self.commute, self.uid = name, fn, commute, uid


class Op(Handle, family=True):
    """``MPI.Op``: a handle on a reduction operation (``Op()`` is OP_NULL, ``Op(op)`` another handle;
    ``emu.rank.handle``'s object model, the operation itself ``self._o``)."""

    _users: dict[int, "Op"] = {}
    _picklable = True
    _o = _Cell()
    _store = "_o"
    _h = property(lambda self: self._o, lambda self, o: self.__dict__.__setitem__("_o", o))

    # what the channel and the collectives read
    name = property(lambda self: self._o.name if self._o is not None else "op_null")
    @property
    def fn(self):
        """The program's function as MPI calls it: ``fn(inbuf, inoutbuf, datatype)``, each buffer an
        ``MPI.buffer`` over the operands' memory (as mpi4py hands them over)."""
        if self._o is None or self._o.fn is None:
            return None
        user = self._o.fn

        def call(a, b, datatype):
            return user(_buffer(a), _buffer(b, writable=True), datatype)
        return call
    uid = property(lambda self: self._o.uid if self._o is not None else 0)
    commute = property(lambda self: self._o.commute if self._o is not None else False)
    key = name

    def __repr__(self) -> str:
        return f"<emulated Op {self.name}>"

    def __reduce__(self):
        if self._o is None or not self._o.uid:
            key = self.name.upper()
            return (_named, (key,)) if OPS[key] is self else (type(self), (OPS[key],))
        if not self._picklable:
            raise ValueError("cannot pickle user-defined reduction operation")
        return (type(self).Create, (self._o.fn, self._o.commute))

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        raise Missing(f"the emulated MPI (emu mpirun) has no Op.{name}")

    def __call__(self, x, y):
        if self._o is not None and not self._o.uid:
            return PY_OPS[self._o.name](x, y)
        if self._o is not None:
            return self._o.fn(x, y, None)
        raise ValueError("cannot call user-defined operation")

    @classmethod
    def Create(cls, function, commute: bool = False) -> "Op":
        function.__call__  # noqa: B018 -- as mpi4py: it must be callable
        uid = next((i for i in range(1, MAX_USER_OPS + 1) if i not in cls._users), 0)
        if not uid:
            raise RuntimeError("cannot create too many user-defined reduction operations")
        op = cls._of(_Impl(f"user:{uid}", function, bool(commute), uid))
        Op._users[uid] = op
        return op

    def Free(self) -> None:
        if self._o is None or not self._o.uid:
            raise Exception(ERR_OP, "MPI_ERR_OP: a predefined operation cannot be freed")
        Op._users.pop(self._o.uid, None)
        self._o = None

    def free(self) -> None:  # as Handle.free
        if self._o is None or self.__dict__.get("_const"):
            return
        if not self._o.uid:
            self._o = None
            return
        self.Free()

    def Is_commutative(self) -> bool:
        if self._o is None:
            raise Exception(ERR_OP, "MPI_ERR_OP: invalid operation (OP_NULL)")
        return self._o.commute

    is_commutative = property(Is_commutative)
    is_predefined = property(lambda self: self._o is None or not self._o.uid)

    def toint(self) -> int:
        # OP_NULL too has an int (0: "op_null"), as MPI 5's MPI_Op_toint gives one (-1 would say "no toint")
        return 0 if self._o is None else (self._o.uid + 1000 if self._o.uid else _ORDER.index(self._o.name))

    @classmethod
    def fromint(cls, arg: int) -> "Op":
        if arg >= 1000:
            op = Op(Op._users[arg - 1000])
            op._picklable = False  # as mpi4py: a handle from an int has no Python function to pickle
            return op
        return OPS[_ORDER[arg].upper()] if 0 <= arg < len(_ORDER) else OPS["OP_NULL"]

    def Reduce_local(self, inbuf, inoutbuf) -> None:
        """``inoutbuf = inbuf op inoutbuf``, element by element."""
        msg = MESSAGE[0]
        out, src = msg(inoutbuf, writable=True), msg(inbuf)
        if src.dt != out.dt:
            raise ValueError("mismatch in send and receive MPI datatypes")
        if src.count != out.count:
            raise ValueError(f"mismatch in send count {src.count} and receive count {out.count}")
        if self._o is None:
            raise Exception(ERR_OP, "MPI_ERR_OP: invalid operation (OP_NULL)")
        if self._o.name in ("replace", "no_op"):  # RMA's operators: MPICH refuses them here
            raise Exception(ERR_OP, f"MPI_ERR_OP: MPI_{self.name.upper()} is not allowed in MPI_Reduce_local "
                                    "(it is for one-sided accumulates)")
        if self._o.uid:  # the program's function, on the buffers' own memory
            self.fn(src.memory(), out.memory(writable=True), out.dt)
            return
        import numpy as np

        npt = out.dt.numpy()
        if npt is None:
            raise Exception(ERR_OP, f"MPI_ERR_OP: {self.name.upper()} on a datatype of mixed basic types")
        kind = "pair" if npt.names else npt.kind
        if kind not in _KINDS[self._o.name]:
            raise Exception(ERR_OP, f"MPI_ERR_OP: MPI_{self.name.upper()} is not defined for datatype "
                                    f"{out.dt.Get_name() or npt}")
        a = np.frombuffer(src.pack(), npt)
        b = np.frombuffer(out.pack(), npt)
        try:
            out.unpack(numpy_combine(self._o.name, a, b).tobytes())
        except TypeError as e:
            raise Exception(ERR_OP, f"MPI_ERR_OP: {self.name.upper()} is not defined for {npt}: {e}") from None


_KINDS = {"max": "iuf", "min": "iuf", "sum": "iufc", "prod": "iufc", "land": "iub", "lor": "iub", "lxor": "iub",
          "band": "iu", "bor": "iu", "bxor": "iu", "minloc": ("pair",), "maxloc": ("pair",)}
"""The numpy kinds of the basic types each predefined operator is defined for (MPI's table)."""


def _buffer(x, writable: bool = False):
    return x if isinstance(x, buffer) else buffer.frombuffer(x, readonly=not writable)


def _named(key: str) -> Op:
    return OPS[key]


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
_ORDER = ["op_null", *PY_OPS]


def numpy_combine(name: str, a, b):
    """``a op b`` elementwise on numpy arrays (a: the lower ranks' part, or Reduce_local's inbuf)."""
    import numpy as np

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


OPS = {n.upper(): Op._of(_Impl(n)) for n in PY_OPS}
OPS["OP_NULL"] = Op()
