"""``MPI.Win`` of the emulated ``mpi4py.MPI``: one-sided communication (rank side).

The window's memory is the rank's own buffer (``Create``) or one the library allocated
(``Allocate``); it is the *private* copy of MPI's separate memory model (``WIN_MODEL`` is
``WIN_SEPARATE``), the emulator keeps the public one on the rank's host (``emu.front.mpirma``).
Every synchronisation call sends the bytes this rank changed since the last one and writes the bytes
other ranks put or accumulated since into the buffer. Every ``Put``, ``Get``, ``Accumulate``, ... is
complete (at the target too) when it returns: the request of ``Rput``, ... is complete at once.
"""

from __future__ import annotations

import operator
import struct

from .channel import CHANNEL
from . import typemap as tm
from .attrs import Attributes
from .comm import Group, Request, _null_request, _unsupported
from .handle import Handle, Impl, predefine_null
from .info import ERRORS_RETURN, Errhandler, Info, call_errhandler, create_errhandler
from .types import Exception
from .winbuf import install as install_buffer

from .buffers import BOTTOM, Msg

LOCK_EXCLUSIVE, LOCK_SHARED = 234, 235  # MPICH's values
MODE_NOCHECK, MODE_NOSTORE, MODE_NOPUT, MODE_NOPRECEDE, MODE_NOSUCCEED = 1024, 2048, 4096, 8192, 16384
WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL = (0x66000001, 0x66000003, 0x66000005, 0x66000007,
                                                                   0x66000009)
WIN_FLAVOR_CREATE, WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_DYNAMIC, WIN_FLAVOR_SHARED = 1, 2, 3, 4
WIN_SEPARATE, WIN_UNIFIED = 1, 2
ERR_ARG, ERR_WIN, ERR_RMA_SYNC, ERR_RMA_ATTACH, ERR_RMA_FLAVOR = 12, 45, 50, 56, 58
_U64 = struct.Struct("!Q")


def _self():
    from .intracomm import Intracomm

    return Intracomm._make(1, 1, 0)  # COMM_SELF (the same handle: emu.rank.mpi's is made the same way)


def _np():
    import numpy

    return numpy


def _membuffer(mem):
    """``mem`` as mpi4py's ``MPI.buffer`` behaves: bytes (format ``B``), ``m[:] = 0`` fills, the
    buffer protocol (a numpy array of bytes with a ``format``, over the same memory)."""
    np = _np()

    class buffer(np.ndarray):
        format = property(lambda self: "B")
        address = property(lambda self: Get_address(self))

    return np.frombuffer(mem, np.uint8).view(buffer)


def Get_address(location) -> int:
    """The address of a buffer's first byte (what ``WIN_BASE`` is for a window over it)."""
    np = _np()
    try:
        mv = memoryview(location)
    except TypeError:
        raise TypeError(f"expected a buffer, got {type(location).__name__}") from None
    if mv.nbytes == 0:
        return 0
    return int(np.frombuffer(mv.cast("B") if mv.c_contiguous else mv, np.uint8).ctypes.data)


def _target(target, msg: Msg):
    """mpi4py's target spec (``for_rma``): None, disp, or a list/tuple (disp[, count[, datatype]])."""
    disp, count, dt = 0, msg.count, msg.dt
    if target is None:
        pass
    elif isinstance(target, (list, tuple)):
        if len(target) >= 4:
            raise ValueError("target: expecting 3 items at most")
        if len(target) >= 1:
            disp = operator.index(target[0])
        if len(target) >= 2:
            count = operator.index(target[1])
        if len(target) >= 3:
            dt = target[2]
    else:
        try:
            disp = operator.index(target)
        except TypeError:
            raise ValueError("target: expecting integral or list/tuple") from None
    if disp < 0:
        raise Exception(12, f"MPI_ERR_DISP: invalid target displacement {disp}")
    return disp, count, dt


_STATE = frozenset({"wid", "_mem", "_buf", "_unit", "_flavor", "_ranks", "_rank", "_snap", "_name", "_errh", "_info",
                    "_attached"})
"""What a window is (kept on its handle, ``emu.rank.handle``: ``Win(other)`` sees the same window)."""


def _single(origin, result, compare=None) -> None:
    for what, m in (("origin", origin), ("compare", compare), ("result", result)):
        if m is not None and m.count != 1:
            raise ValueError(f"{what}: expecting a single element, got {m.count}")
    for what, m in (("compare", compare), ("result", result)):
        if m is not None and origin is not None and m.dt != origin.dt:
            raise ValueError(f"mismatch in origin and {what} MPI datatypes")


class Win(Attributes, Handle, family=True):
    _kind = "win"

    def __getattr__(self, name):
        h = self._h
        if name in _STATE:
            if h is None:
                if name in ("wid", "_name"):
                    return None
                raise Exception(ERR_WIN, "MPI_ERR_WIN: invalid window (WIN_NULL)")
            return getattr(h, name)
        _unsupported("Win.", name)

    def __setattr__(self, name, value):
        if name in _STATE:
            setattr(self._ok_h(), name, value)
        else:
            object.__setattr__(self, name, value)

    def _ok_h(self):
        if self._h is None:
            raise Exception(ERR_WIN, "MPI_ERR_WIN: invalid window (WIN_NULL)")
        return self._h

    def _reduce_other(self):
        raise ValueError("cannot serialize a window (MPI.Win): it is not WIN_NULL")

    # -- making one ---------------------------------------------------------------------------------
    @classmethod
    def _make(cls, mem, disp_unit: int, comm, flavor: int, info=None) -> "Win":
        ctx = comm._ok()
        mv = memoryview(mem) if mem is not None else memoryview(bytearray(0))
        mv = mv.cast("B") if mv.c_contiguous and (mv.ndim != 1 or mv.format != "B") else mv
        if mv.readonly:
            raise Exception(1, "MPI_ERR_BUFFER: a window's memory must be writable")
        head, _ = CHANNEL.call("win", bytes(mv), what="create", ctx=ctx, size=mv.nbytes, disp_unit=int(disp_unit),
                               call="Win_create")
        np = _np()
        win = cls._of(Impl(wid=head["win"], _mem=mv, _buf=mem, _unit=int(disp_unit), _flavor=flavor,
                           _ranks=head["ranks"], _rank=head["rank"], _snap=np.frombuffer(mv, np.uint8).copy(),
                           _name=None, _errh=ERRORS_RETURN, _info=None, _attached=[]))
        if info:
            win.Set_info(info)
        return win

    @classmethod
    def Create(cls, memory, disp_unit: int = 1, info=None, comm=None) -> "Win":
        if memory is BOTTOM:  # no memory of this rank's (MPI: base BOTTOM, size 0)
            memory = None
        return cls._make(memory, disp_unit, comm if comm is not None else _self(), WIN_FLAVOR_CREATE, info)

    @classmethod
    def Allocate(cls, size: int, disp_unit: int = 1, info=None, comm=None) -> "Win":
        if size < 0:
            raise Exception(12, f"MPI_ERR_SIZE: invalid window size {size}")
        return cls._make(bytearray(int(size)), disp_unit, comm if comm is not None else _self(),
                         WIN_FLAVOR_ALLOCATE, info)

    @classmethod
    def Allocate_shared(cls, size: int, disp_unit: int = 1, info=None, comm=None) -> "Win":
        comm = comm if comm is not None else _self()
        if comm.Get_size() != 1:
            raise NotImplementedError("the emulated MPI has no Win.Allocate_shared over more than one rank "
                                      "(every rank is a host of its own: no memory to share)")
        return cls._make(bytearray(int(size)), disp_unit, comm, WIN_FLAVOR_SHARED, info)

    @classmethod
    def Create_dynamic(cls, info=None, comm=None) -> "Win":
        """A window of no memory to which each rank attaches its own (``Attach``/``Detach``). One-sided
        operations on it (target displacements are the target's addresses) are not carried: they raise
        NotImplementedError naming the call."""
        return cls._make(None, 1, comm if comm is not None else _self(), WIN_FLAVOR_DYNAMIC, info)

    def Attach(self, memory) -> None:
        self._ok()
        if self._flavor != WIN_FLAVOR_DYNAMIC:
            raise Exception(ERR_RMA_FLAVOR, "MPI_ERR_RMA_FLAVOR: Attach needs a window of Create_dynamic")
        mv = memoryview(memory)
        self._attached.append((Get_address(mv), mv.nbytes, mv))

    def Detach(self, memory) -> None:
        self._ok()
        base = Get_address(memoryview(memory))
        for i, (b, _, _) in enumerate(self._attached):
            if b == base:
                del self._attached[i]
                return
        raise Exception(ERR_RMA_ATTACH, "MPI_ERR_RMA_ATTACH: this memory is not attached to the window")

    def Shared_query(self, rank: int):
        """The memory of ``rank`` this process can load and store. A shared window (of one rank): its own.
        Another flavor (MPI 4.1): this rank's own memory; another rank's is on another emulated host, out of
        reach: no memory, size 0. ``PROC_NULL`` (the first segment of nonzero size in rank order): rank 0's
        own when it has memory; at another rank, that first segment is taken to be a lower rank's, out of
        reach (the library does not know the others' sizes; MPI allows size 0 for memory out of reach)."""
        self._ok()
        rank = int(rank)
        if self._flavor == WIN_FLAVOR_SHARED:
            if rank not in (0, -1):
                raise NotImplementedError("the emulated MPI has no Win.Shared_query of another rank's memory")
            return self._mem, self._unit
        if self._flavor == WIN_FLAVOR_DYNAMIC:
            raise NotImplementedError("the emulated MPI has no Win.Shared_query of a window of Create_dynamic")
        if rank == self._rank or (rank == -1 and self._rank == 0 and self._mem.nbytes):
            return self._mem, self._unit
        return memoryview(bytearray(0)), self._unit

    def Free(self) -> None:
        CHANNEL.call("win", self._diff(), what="free", win=self._ok(), call="Win_free")
        self._delete_attrs()
        self._h = None

    def _ok(self) -> int:
        if self.wid is None:
            raise Exception(ERR_WIN, "MPI_ERR_WIN: invalid window (WIN_NULL)")
        return self.wid

    # -- what it is -----------------------------------------------------------------------------------
    def tomemory(self):
        self._ok()
        return _membuffer(self._mem)

    def Get_group(self) -> Group:
        self._ok()
        return Group._make(self._ranks)

    group = property(Get_group)
    group_size = property(lambda self: len(self._ranks))
    group_rank = property(lambda self: self._rank)

    def _builtin_attr(self, keyval: int):
        self._ok()
        return {WIN_BASE: Get_address(self._mem), WIN_SIZE: self._mem.nbytes, WIN_DISP_UNIT: self._unit,
                WIN_CREATE_FLAVOR: self._flavor, WIN_MODEL: WIN_SEPARATE}.get(keyval)

    @property
    def attrs(self) -> tuple[int, int, int]:
        return Get_address(self._mem), self._mem.nbytes, self._unit

    flavor = property(lambda self: self.Get_attr(WIN_CREATE_FLAVOR))
    model = property(lambda self: self.Get_attr(WIN_MODEL))

    def Get_name(self) -> str:
        return "MPI_WIN_NULL" if self.wid is None else (self._name or "")

    def Set_name(self, name: str) -> None:
        self._ok()
        self._name = str(name)

    name = property(Get_name, Set_name)

    def Get_info(self) -> Info:
        self._ok()
        return Info.Create(self._info.items() if self._info else None)

    def Set_info(self, info) -> None:
        self._ok()
        self._info = info.Dup() if info else None

    info = property(Get_info, Set_info)

    # -- error handlers -------------------------------------------------------------------------------------
    def Get_errhandler(self) -> Errhandler:
        self._ok()
        return Errhandler(self._errh)

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        self._ok()
        if not isinstance(errhandler, Errhandler) or not errhandler:
            raise Exception(ERR_ARG, "MPI_ERR_ARG: invalid errhandler")
        self._errh = Errhandler(errhandler)

    def Call_errhandler(self, errorcode: int) -> None:
        self._ok()
        call_errhandler(self, self._errh, errorcode)

    @classmethod
    def Create_errhandler(cls, errhandler_fn) -> Errhandler:
        return create_errhandler(errhandler_fn, "win")

    # -- the private copy and the public one ---------------------------------------------------------
    def _diff(self) -> bytes:
        """The bytes this rank changed since the last synchronisation (and the snapshot updated)."""
        np = _np()
        cur = np.frombuffer(self._mem, np.uint8)
        changed = cur != self._snap
        if not changed.any():
            return _U64.pack(0)
        edges = np.flatnonzero(np.diff(np.concatenate(([0], changed.view(np.int8), [0]))))
        starts, ends = edges[::2], edges[1::2]
        self._snap[:] = cur
        return b"".join([_U64.pack(len(starts)), starts.astype(">i8").tobytes(), (ends - starts).astype(">i8").tobytes(),
                         *(cur[a:b].tobytes() for a, b in zip(starts.tolist(), ends.tolist()))])

    def _pull(self, data) -> None:
        np = _np()
        (k,) = _U64.unpack_from(data)
        if not k:
            return
        starts = np.frombuffer(data, ">i8", k, 8).tolist()
        lens = np.frombuffer(data, ">i8", k, 8 + 8 * k).tolist()
        at = 8 + 16 * k
        for a, n in zip(starts, lens):
            self._mem[a:a + n] = data[at:at + n]
            self._snap[a:a + n] = np.frombuffer(data, np.uint8, n, at)
            at += n

    def _sync(self, how: str, call: str, **head) -> dict:
        out, data = CHANNEL.call("win", self._diff(), what="sync", how=how, win=self._ok(), call=call, **head)
        self._pull(data)
        return out

    # -- synchronisation ------------------------------------------------------------------------------------
    def Fence(self, assertion: int = 0) -> None:
        self._sync("fence", "Win_fence")

    def Lock(self, rank: int, lock_type: int = LOCK_EXCLUSIVE, assertion: int = 0) -> None:
        if lock_type not in (LOCK_EXCLUSIVE, LOCK_SHARED):
            raise Exception(12, f"MPI_ERR_LOCKTYPE: invalid lock type {lock_type}")
        if rank != -1:
            self._sync("lock", "Win_lock", target=int(rank), exclusive=lock_type == LOCK_EXCLUSIVE)

    def Unlock(self, rank: int) -> None:
        if rank != -1:
            self._sync("unlock", "Win_unlock", target=int(rank))

    def Lock_all(self, assertion: int = 0) -> None:
        self._sync("lock_all", "Win_lock_all")

    def Unlock_all(self) -> None:
        self._sync("unlock_all", "Win_unlock_all")

    def Flush(self, rank: int) -> None:
        self._sync("flush", "Win_flush")

    def Flush_all(self) -> None:
        self._sync("flush", "Win_flush_all")

    def Flush_local(self, rank: int) -> None:
        self._sync("flush", "Win_flush_local")

    def Flush_local_all(self) -> None:
        self._sync("flush", "Win_flush_local_all")

    def Sync(self) -> None:
        self._sync("sync", "Win_sync")

    def Post(self, group: Group, assertion: int = 0) -> None:
        self._sync("post", "Win_post", group=list(group.ranks))

    def Start(self, group: Group, assertion: int = 0) -> None:
        self._sync("start", "Win_start", group=list(group.ranks))

    def Complete(self) -> None:
        self._sync("complete", "Win_complete")

    def Wait(self) -> bool:
        self._sync("wait", "Win_wait")
        return True

    def Test(self) -> bool:
        return bool(self._sync("test", "Win_test")["flag"])

    # -- communication --------------------------------------------------------------------------------------
    def _op(self, op: str, call: str, origin, target_rank: int, target, rop=None, result=None, compare=None):
        self._ok()
        if self._flavor == WIN_FLAVOR_DYNAMIC:
            raise NotImplementedError(f"the emulated MPI has no {call} on a window of Create_dynamic "
                                      "(a target's attached memory is not carried)")
        if target_rank == -1:  # PROC_NULL: nothing moves
            return
        msg = Msg(origin, writable=op == "get") if origin is not None else None
        res = Msg(result, writable=True) if result is not None else None
        shape = msg if msg is not None else res
        disp, count, tdt = _target(target, shape)
        if op in ("fop", "cas"):  # one element each, of one type (mpi4py's checks)
            _single(msg, res, Msg(compare) if op == "cas" else None)
            count = 1
        flat = tdt._message(count)  # the target's bytes, in type-map order, from its displacement
        if len(flat) == 0 or (len(flat) == 1 and int(flat.off[0]) == 0):
            pos, nbytes = None, count * tdt.Get_size()
        else:
            pos = tm.indices(flat)
            nbytes = len(pos)
        data = b""
        if op in ("put", "acc", "get_acc", "fop", "cas") and msg is not None and not (rop == "no_op" and op != "acc"):
            data = msg.pack(count) if op in ("fop", "cas") else msg.pack()
        if op in ("get_acc", "fop") and rop == "no_op":
            data = b"\0" * nbytes
        if op == "cas":
            data += Msg(compare).pack(1)
        payload = (pos.astype(">i8").tobytes() if pos is not None else b"") + data
        etype = (shape.type_fields().get("dtype") or "|u1") if op != "put" and op != "get" else None
        _, got = CHANNEL.call("win", payload, what="op", rma=op, win=self.wid, target=int(target_rank), disp=disp,
                              nbytes=nbytes, npos=0 if pos is None else len(pos), rop=rop, etype=etype, call=call)
        if op == "get":
            msg.unpack(got)
        elif res is not None:
            res.unpack(got, 1 if op in ("fop", "cas") else None)

    def Put(self, origin, target_rank: int, target=None) -> None:
        self._op("put", "Put", origin, target_rank, target)

    def Get(self, origin, target_rank: int, target=None) -> None:
        self._op("get", "Get", origin, target_rank, target)

    def Accumulate(self, origin, target_rank: int, target=None, op=None) -> None:
        self._op("acc", "Accumulate", origin, target_rank, target, _opname(op))

    def Get_accumulate(self, origin, result, target_rank: int, target=None, op=None) -> None:
        self._op("get_acc", "Get_accumulate", origin, target_rank, target, _opname(op), result)

    def Fetch_and_op(self, origin, result, target_rank: int, target_disp: int = 0, op=None) -> None:
        self._op("fop", "Fetch_and_op", origin, target_rank, (target_disp, 1), _opname(op), result)

    def Compare_and_swap(self, origin, compare, result, target_rank: int, target_disp: int = 0) -> None:
        self._op("cas", "Compare_and_swap", origin, target_rank, (target_disp, 1), None, result, compare)

    def Rput(self, origin, target_rank: int, target=None) -> Request:
        self.Put(origin, target_rank, target)
        return _null_request("rma")

    def Rget(self, origin, target_rank: int, target=None) -> Request:
        self.Get(origin, target_rank, target)
        return _null_request("rma")

    def Raccumulate(self, origin, target_rank: int, target=None, op=None) -> Request:
        self.Accumulate(origin, target_rank, target, op)
        return _null_request("rma")

    def Rget_accumulate(self, origin, result, target_rank: int, target=None, op=None) -> Request:
        self.Get_accumulate(origin, result, target_rank, target, op)
        return _null_request("rma")


def _opname(op) -> str:
    from .types import OPS, Op

    op = OPS["SUM"] if op is None else op
    if not isinstance(op, Op) or op.uid or op.name in ("op_null", "maxloc", "minloc"):
        raise NotImplementedError(f"the emulated MPI accumulates with the predefined operators only, not {op!r}"
                                  if isinstance(op, Op) and op.name in ("maxloc", "minloc") else
                                  f"MPI_ERR_OP: one-sided accumulate needs a predefined operator, got {op!r}")
    return op.name


WIN_NULL = predefine_null(Win(), "WIN_NULL")
install_buffer(Win, lambda win: win._mem if win._h is not None else bytearray())  # memoryview(win): its memory
