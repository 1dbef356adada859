"""``MPI.Intercomm`` of the emulated ``mpi4py.MPI``, and the calls of ``Intracomm`` that make
communicators of a part of it: ``Create_intercomm``, ``Create_group``, ``Split_type`` (rank side).

An intercommunicator joins two disjoint groups: its rank and size are the local group's, the
destinations and sources of its point-to-point calls are ranks of the remote group, and its
collectives move data between the groups as MPI defines them for intercommunicators (MPI 3.1
§5.2.2): in a rooted one the root's group says ``root=MPI.ROOT`` at the root and
``root=MPI.PROC_NULL`` elsewhere, the other group the root's rank in the remote group. The
emulator carries them out (``emu.front.mpicomms``).
"""

from __future__ import annotations


from .buffers import IN_PLACE, Msg, _as_datatype, acquire, is_bottom
from .channel import CHANNEL
from .comm import PROC_NULL, ROOT, UNDEFINED, Group, _op, _pickle, _pickles
from .blockcoll import _objects
from .intracomm import COMM_NULL, Comm, Intracomm
from .pickling import PICKLE
from .types import OPS, Exception

ERR_ARG, ERR_COMM, ERR_ROOT = 12, 5, 7
COMM_TYPE_SHARED, COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED, COMM_TYPE_RESOURCE_GUIDED = 1, 2, 3, 4
"""MPICH's values."""
SHARED_MEMORY = "mpi_shared_memory"
HW_RESOURCE_TYPE = "mpi_hw_resource_type"


class Intercomm(Comm):
    """An intercommunicator. ``MPI.Intercomm(comm)`` of an intracommunicator raises TypeError, as
    mpi4py's does (a handle of the other kind)."""

    _strict = True

    @classmethod
    def _from_head(cls, head: dict) -> Comm:
        """The intercommunicator of an answer of the emulator (COMM_NULL if none)."""
        if head.get("ctx") is None:
            return COMM_NULL
        obj = cls._make(head["ctx"], len(head["local"]), head["rank"])
        obj._h.local, obj._h.remote = list(head["local"]), list(head["remote"])
        return obj

    _local = property(lambda self: self._h.local)
    _remote = property(lambda self: self._h.remote)

    # -- what it is ---------------------------------------------------------------------------------
    def Is_inter(self) -> bool:
        return True

    def Is_intra(self) -> bool:
        return False

    is_inter = property(Is_inter)
    is_intra = property(Is_intra)

    def Get_group(self) -> Group:
        self._ok()
        return Group._make(self._local)

    group = property(Get_group)

    def Get_remote_group(self) -> Group:
        self._ok()
        return Group._make(self._remote)

    remote_group = property(Get_remote_group)

    def Get_remote_size(self) -> int:
        self._ok()
        return len(self._remote)

    remote_size = property(Get_remote_size)

    @classmethod
    def Create_from_groups(cls, local_group: Group, local_leader: int, remote_group: Group, remote_leader: int,
                           stringtag: str = "org.mpi4py", info=None, errhandler=None) -> "Intercomm":
        """MPI 4: the intercommunicator of two groups, collective over both (no parent communicator)."""
        head, _ = CHANNEL.call("intercomm_groups", local=local_group.ranks, remote=remote_group.ranks,
                               tag=str(stringtag), call="Create_from_groups")
        return Intercomm._from_head(head)

    # -- making communicators --------------------------------------------------------------------------
    def Merge(self, high: bool = False) -> Intracomm:
        head, _ = CHANNEL.call("merge", ctx=self._ok(), high=bool(high), call="Merge")
        return Intracomm._make(head["ctx"], len(head["ranks"]), head["rank"])

    def Dup(self, info=None) -> "Intercomm":
        return type(self)._from_head(CHANNEL.call("dup", ctx=self._ok(), call="Dup")[0])

    Clone = Dup

    def Split(self, color: int = 0, key: int = 0):
        return Intercomm._from_head(CHANNEL.call("split", ctx=self._ok(), color=int(color), key=int(key), call="Split")[0])

    def Split_type(self, split_type: int, key: int = 0, info=None):
        color = type_color(split_type, info, self._size)
        return Intercomm._from_head(CHANNEL.call("split", ctx=self._ok(), color=color, key=int(key), call="Split_type")[0])

    def Create(self, group: Group):
        """The local group's members in ``group`` (its order), with the remote side's of its call."""
        me = group.Get_rank()
        return self.Split(0 if me != UNDEFINED else UNDEFINED, me if me != UNDEFINED else 0)

    # -- collectives ------------------------------------------------------------------------------------
    def _icoll(self, kind: str, call: str, payload=b"", **head):
        if "root" in head:
            _root_ok(head["root"], len(self._remote))
        return CHANNEL.call("icoll", payload, ctx=self._ok(), kind=kind, call=call, **head)

    def Barrier(self) -> None:
        self._icoll("barrier", "Barrier")

    def barrier(self) -> None:
        self._icoll("barrier", "barrier")

    def Bcast(self, buf, root: int = 0) -> None:
        if root == ROOT:
            self._icoll("bcast", "Bcast", Msg(buf).pack(), root=root)
        elif root == PROC_NULL:
            self._icoll("bcast", "Bcast", root=root)
        else:
            msg = Msg(buf, writable=True)
            msg.unpack(self._icoll("bcast", "Bcast", root=root)[1])

    def bcast(self, obj=None, root: int = 0):
        head, data = self._icoll("bcast", "bcast", _pickle(obj) if root == ROOT else b"", root=root)
        return None if head.get("none") else PICKLE.loads(data)

    def _gather(self, sendbuf, recvbuf, root: int, vector: bool, call: str) -> None:
        if root == ROOT:
            out = Msg(recvbuf, writable=True, vector=vector, blocks=len(self._remote))
            head, data = self._icoll("gather", call, root=root)
            _unpack_blocks(out, vector, head["lens"], data)
        else:
            self._icoll("gather", call, Msg(sendbuf).pack() if root != PROC_NULL else b"", root=root)

    def Gather(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._gather(sendbuf, recvbuf, root, False, "Gather")

    def Gatherv(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._gather(sendbuf, recvbuf, root, True, "Gatherv")

    def gather(self, sendobj, root: int = 0):
        head, data = self._icoll("gather", "gather", _pickle(sendobj) if root >= 0 else b"", root=root)
        return None if head.get("none") else _objects(head["lens"], data)

    def _scatter(self, sendbuf, recvbuf, root: int, vector: bool, call: str) -> None:
        if root == ROOT:
            src = Msg(sendbuf, vector=vector, blocks=len(self._remote))
            parts = _blocks(src, vector, len(self._remote))
            self._icoll("scatter", call, b"".join(parts), root=root, lens=[len(p) for p in parts])
        elif root == PROC_NULL:
            self._icoll("scatter", call, root=root)
        else:
            msg = Msg(recvbuf, writable=True)
            msg.unpack(self._icoll("scatter", call, root=root)[1])

    def Scatter(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._scatter(sendbuf, recvbuf, root, False, "Scatter")

    def Scatterv(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._scatter(sendbuf, recvbuf, root, True, "Scatterv")

    def scatter(self, sendobj, root: int = 0):
        parts = []
        if root == ROOT:
            parts = _pickles(sendobj, len(self._remote))
        head, data = self._icoll("scatter", "scatter", b"".join(parts), root=root, lens=[len(p) for p in parts])
        return None if head.get("none") else PICKLE.loads(data)

    def _allgather(self, sendbuf, recvbuf, vector: bool, call: str) -> None:
        if sendbuf is IN_PLACE:
            raise Exception(ERR_ARG, f"MPI_ERR_ARG: {call} on an intercommunicator takes no MPI.IN_PLACE")
        out = Msg(recvbuf, writable=True, vector=vector, blocks=len(self._remote))
        head, data = self._icoll("gather", call, Msg(sendbuf).pack(), all=True)
        _unpack_blocks(out, vector, head["lens"], data)

    def Allgather(self, sendbuf, recvbuf) -> None:
        self._allgather(sendbuf, recvbuf, False, "Allgather")

    def Allgatherv(self, sendbuf, recvbuf) -> None:
        self._allgather(sendbuf, recvbuf, True, "Allgatherv")

    def allgather(self, sendobj):
        head, data = self._icoll("gather", "allgather", _pickle(sendobj), all=True)
        return _objects(head["lens"], data)

    def _alltoall(self, parts: list[bytes], call: str):
        return self._icoll("alltoall", call, b"".join(parts), lens=[len(p) for p in parts])

    def Alltoall(self, sendbuf, recvbuf) -> None:
        self._alltoall_buf(sendbuf, recvbuf, False, "Alltoall")

    def Alltoallv(self, sendbuf, recvbuf) -> None:
        self._alltoall_buf(sendbuf, recvbuf, True, "Alltoallv")

    def _alltoall_buf(self, sendbuf, recvbuf, vector: bool, call: str) -> None:
        if sendbuf is IN_PLACE:
            raise Exception(ERR_ARG, f"MPI_ERR_ARG: {call} on an intercommunicator takes no MPI.IN_PLACE")
        n = len(self._remote)
        out = Msg(recvbuf, writable=True, vector=vector, blocks=n)
        head, data = self._alltoall(_blocks(Msg(sendbuf, vector=vector, blocks=n), vector, n), call)
        _unpack_blocks(out, vector, head["lens"], data)

    def Alltoallw(self, sendbuf, recvbuf) -> None:
        n = len(self._remote)
        head, data = self._alltoall(w_pack(sendbuf, n), "Alltoallw")
        w_unpack(recvbuf, n, head["lens"], data)

    def alltoall(self, sendobj):
        parts = _pickles(sendobj, len(self._remote))
        head, data = self._alltoall(parts, "alltoall")
        return _objects(head["lens"], data)

    # reductions: the result is the remote group's
    def Reduce(self, sendbuf, recvbuf, op=OPS["SUM"], root: int = 0) -> None:
        _root_ok(root, len(self._remote))
        if root == ROOT:
            out = Msg(recvbuf, writable=True)
            out.unpack(self._icoll("reduce", "Reduce", rop=_op(op).key, root=root, **out.type_fields())[1])
        elif root == PROC_NULL:
            self._icoll("reduce", "Reduce", rop=_op(op).key, root=root)
        else:
            src = Msg(sendbuf)
            self._icoll("reduce", "Reduce", src.pack(), rop=_op(op).key, root=root, **src.type_fields())

    def reduce(self, sendobj, op=OPS["SUM"], root: int = 0):
        _root_ok(root, len(self._remote))
        head, data = self._icoll("reduce", "reduce", _pickle(sendobj) if root >= 0 else b"", rop=_op(op).key,
                                 pickled=True, root=root)
        return None if head.get("none") else PICKLE.loads(data)

    def Allreduce(self, sendbuf, recvbuf, op=OPS["SUM"]) -> None:
        if sendbuf is IN_PLACE:
            raise Exception(ERR_ARG, "MPI_ERR_ARG: Allreduce on an intercommunicator takes no MPI.IN_PLACE")
        src = Msg(sendbuf)
        out = Msg(recvbuf, writable=True)
        out.unpack(self._icoll("reduce", "Allreduce", src.pack(), rop=_op(op).key, all=True, **src.type_fields())[1])

    def allreduce(self, sendobj, op=OPS["SUM"]):
        head, data = self._icoll("reduce", "allreduce", _pickle(sendobj), rop=_op(op).key, pickled=True, all=True)
        return PICKLE.loads(data)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=OPS["SUM"]) -> None:
        out, src = Msg(recvbuf, writable=True), Msg(sendbuf)
        head, data = self._icoll("reduce_scatter", "Reduce_scatter_block", src.pack(), rop=_op(op).key,
                                 lens=[out.nbytes] * self._size, **src.type_fields())
        out.unpack(data)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=OPS["SUM"]) -> None:
        out, src = Msg(recvbuf, writable=True), Msg(sendbuf)
        counts = list(recvcounts) if recvcounts is not None else [src.count // self._size] * self._size
        head, data = self._icoll("reduce_scatter", "Reduce_scatter", src.pack(), rop=_op(op).key,
                                 lens=[c * src.dt.Get_size() for c in counts], **src.type_fields())
        out.unpack(data, counts[self._rank])

    def _no(self, *args, **kw):
        raise Exception(ERR_COMM, "MPI_ERR_COMM: scans are not defined on intercommunicators")

    Scan = Exscan = scan = exscan = _no


def _root_ok(root: int, remote: int) -> None:
    if root not in (ROOT, PROC_NULL) and not 0 <= root < remote:
        raise Exception(ERR_ROOT, f"MPI_ERR_ROOT: invalid root {root} (the remote group has {remote} ranks; "
                                  "MPI.ROOT or MPI.PROC_NULL in the root's group)")


def _blocks(src: Msg, vector: bool, n: int) -> list[bytes]:
    if vector:
        return [src.pack(src.counts[r], src.displs[r]) for r in range(n)]
    return [src.pack(src.count, r * src.count) for r in range(n)]


def _unpack_blocks(out: Msg, vector: bool, lens, data) -> None:
    at = 0
    for r, n in enumerate(lens):
        out.unpack(data[at:at + n], out.counts[r] if vector else out.count, out.displs[r] if vector else r * out.count)
        at += n


# -- Alltoallw's buffers: [buf, (counts, byte displacements), [types]] ---------------------------------
def _w(spec, n: int, writable: bool = False):
    if not isinstance(spec, (list, tuple)) or len(spec) not in (3, 4):
        raise TypeError("expecting [buffer, (counts, displacements), datatypes]")
    if len(spec) == 4:
        buf, counts, displs, types = spec
    else:
        buf, (counts, displs), types = spec
    counts = [int(c) for c in counts]
    displs = [int(d) for d in displs] if displs is not None else [0] * len(counts)
    if len(counts) != n or len(displs) != n or len(types) != n:
        raise ValueError(f"expecting {n} counts, displacements and datatypes")
    return (None if is_bottom(buf) else _bytes_of(buf, writable)), counts, displs, list(types)


def _block(mem, count: int, displ: int, dt, writable: bool = False) -> Msg:
    """Block ``count`` of ``dt`` at byte ``displ`` of the buffer's memory ``mem`` -- or at address ``displ``
    when the buffer is ``MPI.BOTTOM`` (``mem`` None): the displacement is the message's base, as in
    ``MsgW.block`` (no datatype made for it; the datatype's map is checked against the whole buffer)."""
    if count < 0:
        raise ValueError(f"message: negative count {count}")
    return Msg.block(mem, _as_datatype(dt), displ, count)


def _bytes_of(buf, writable: bool) -> memoryview:
    """The bytes of a buffer, as ``Msg`` takes buffers (numpy arrays, bytes, DLPack, ...)."""
    m = Msg(buf, writable=writable)
    return m.memory(writable) if hasattr(m, "memory") else m.raw


def _w_mem(spec, n: int, writable: bool = False):
    raw, counts, displs, types = _w(spec, n, writable)
    return (None if raw is None else acquire(raw, writable)), counts, displs, types


def w_pack(spec, n: int) -> list[bytes]:
    mem, counts, displs, types = _w_mem(spec, n)
    return [_block(mem, c, d, t).pack() for c, d, t in zip(counts, displs, types)]


def w_unpack(spec, n: int, lens, data, skip=()) -> None:
    """Part i of ``data`` (``lens[i]`` bytes) into block i of the receive buffer, except those in
    ``skip`` (from PROC_NULL: left as they are)."""
    mem, counts, displs, types = _w_mem(spec, n, True)
    at = 0
    for i, (k, c, d, t) in enumerate(zip(lens, counts, displs, types)):
        if i not in skip:
            _block(mem, c, d, t, True).unpack(data[at:at + k])
        at += k


# -- the Intracomm calls of this module (emu.rank.intracomm attaches them) -------------------------------
def type_color(split_type: int, info, size: int) -> int:
    """The color of ``Split_type``: each rank is on an emulated host of its own (``emu mpirun`` puts one
    rank on each host), so a node's shared memory holds this rank alone, as MPICH would say of ranks on
    distinct machines. COMM_TYPE_HW_GUIDED and COMM_TYPE_RESOURCE_GUIDED (MPI 4.0 §7.4.2) give that
    split when ``info`` names ``mpi_hw_resource_type=mpi_shared_memory``, COMM_NULL otherwise (as
    MPICH does for a type it does not know); COMM_TYPE_HW_UNGUIDED gives it when it is smaller than
    the communicator (and says so in ``info``), else COMM_NULL."""
    if split_type == UNDEFINED:
        return UNDEFINED
    if split_type == COMM_TYPE_SHARED:
        return CHANNEL.rank
    if split_type in (COMM_TYPE_HW_GUIDED, COMM_TYPE_RESOURCE_GUIDED):
        asked = _info_get(info, HW_RESOURCE_TYPE)
        return CHANNEL.rank if asked == SHARED_MEMORY else UNDEFINED
    if split_type == COMM_TYPE_HW_UNGUIDED:
        if size <= 1:
            return UNDEFINED
        if info is not None and hasattr(info, "Set"):
            info.Set(HW_RESOURCE_TYPE, SHARED_MEMORY)
        return CHANNEL.rank
    raise Exception(ERR_ARG, f"MPI_ERR_ARG: invalid split_type {split_type}")


def _info_get(info, key: str):
    if info is None or not hasattr(info, "Get"):
        return None
    try:
        return info.Get(key)
    except (Exception, NotImplementedError, AttributeError, TypeError):  # INFO_NULL
        return None


def split_type(self, split_type: int, key: int = 0, info=None):
    """``Comm.Split_type``; see ``type_color``."""
    color = type_color(split_type, info, self._size)
    return self._made(CHANNEL.call("split", ctx=self._ok(), color=color, key=int(key), call="Split_type")[0])


def create_group(self, group: Group, tag: int = 0):
    """``Intracomm.Create_group(group, tag)``: collective over the group's members only."""
    return self._made(CHANNEL.call("create_group", ctx=self._ok(), ranks=group.ranks, tag=int(tag),
                                   call="Create_group")[0])


def create_from_group(cls, group: Group, stringtag: str = "org.mpi4py", info=None, errhandler=None):
    """``Intracomm.Create_from_group`` (MPI 4): collective over the group's members, no parent."""
    head, _ = CHANNEL.call("create_group", ctx=0, ranks=group.ranks, tag=str(stringtag), call="Create_from_group")
    comm = COMM_NULL._made(head)
    if comm and getattr(group._h, "session", None) is not None:
        comm._h.session = group._h.session  # its session's buffered-send buffer (emu.rank.bsend)
    return comm


def create_intercomm(self, local_leader: int, peer_comm, remote_leader: int, tag: int = 0) -> Intercomm:
    """``Intracomm.Create_intercomm``: ``peer_comm`` and ``remote_leader`` matter at the local leader."""
    peer = peer_comm.ctx if isinstance(peer_comm, Comm) else None
    head, _ = CHANNEL.call("intercomm", ctx=self._ok(), leader=int(local_leader), peer=peer,
                           rleader=int(remote_leader), tag=int(tag), call="Create_intercomm")
    return Intercomm._from_head(head)


def attach(cls: type, methods: dict) -> None:
    """Give ``cls`` the ``methods`` it has not got (its own definitions win)."""
    for name, fn in methods.items():
        if name not in cls.__dict__:
            setattr(cls, name, fn)


attach(Comm, {"Split_type": split_type})
attach(Intracomm, {"Create_group": create_group, "Create_from_group": classmethod(create_from_group),
                   "Create_intercomm": create_intercomm})
