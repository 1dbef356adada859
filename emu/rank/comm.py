"""Communicators, groups, requests and statuses of the emulated ``mpi4py.MPI`` (rank side)."""

from __future__ import annotations

import pickle

from .buffers import Msg
from .channel import CHANNEL
from .types import Datatype, Exception, Op

ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED, ROOT = -2, -1, -1, -32766, -3
IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3
TAG_UB_KEY, TAG_UB = 1681915905, 2**31 - 1
_pickle = lambda obj: pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)  # noqa: E731


class Unsupported(NotImplementedError, AttributeError):
    """A part of MPI the emulated library does not have (also an AttributeError: ``hasattr`` is False)."""


def _unsupported(where: str, name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    raise Unsupported(f"the emulated MPI (emu mpirun) has no {where}{name}")


class Status:
    def __init__(self):
        self.source, self.tag, self.error, self.count, self.cancelled = ANY_SOURCE, ANY_TAG, 0, 0, False

    def _set(self, row) -> "Status":
        _, self.source, self.tag, self.count, self.cancelled = row
        return self

    def Get_source(self) -> int:
        return self.source

    def Get_tag(self) -> int:
        return self.tag

    def Get_error(self) -> int:
        return self.error

    def Get_count(self, datatype: Datatype | None = None) -> int:
        from .types import TYPES

        n = (datatype or TYPES["BYTE"]).packed
        return self.count // n if n and self.count % n == 0 else UNDEFINED

    Get_elements = Get_count

    def Is_cancelled(self) -> bool:
        return self.cancelled

    def Set_source(self, v: int) -> None:
        self.source = v

    def Set_tag(self, v: int) -> None:
        self.tag = v

    def Set_error(self, v: int) -> None:
        self.error = v

    def __getattr__(self, name):
        _unsupported("Status.", name)


def _fill(status, row) -> None:
    if status is not None:
        status._set(row)


class Request:
    """A pending operation; after it completes it is REQUEST_NULL (``== MPI.REQUEST_NULL``)."""

    def __init__(self, rid: int | None = None, kind: str = "send", msg: Msg | None = None):
        self.rid, self.kind, self.msg = rid, kind, msg
        self.value = None
        self.last = Status()

    def __eq__(self, other) -> bool:
        if isinstance(other, Request):
            return self is other or (self.rid is None and other.rid is None)
        return NotImplemented

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        return self.rid is not None

    def _finish(self, row, data) -> None:
        self.last._set(row)
        if self.kind == "recv_buf" and not row[4] and self.msg is not None:
            self.msg.unpack(data)
        elif self.kind == "recv_obj" and not row[4]:
            self.value = pickle.loads(data) if row[1] != PROC_NULL else None
        self._done()

    def _done(self) -> None:
        self.rid = None

    @staticmethod
    def _call(reqs, mode: str, test: bool, call: str):
        ids = [r.rid for r in reqs if r is not None and r.rid is not None]
        if not ids:
            return []
        head, data = CHANNEL.call("wait", ids=ids, mode=mode, test=test, call=call)
        by = {r.rid: r for r in reqs if r is not None and r.rid is not None}
        at, done = 0, []
        for row in head["st"]:
            r = by[row[0]]
            r._finish(row, data[at:at + row[3]])
            at += row[3]
            done.append(r)
        return done

    # -- one request ----------------------------------------------------------------------------------
    def Wait(self, status: Status | None = None) -> bool:
        if self.rid is not None:
            self._call([self], "all", False, "Wait")
        _fill(status, [0, self.last.source, self.last.tag, self.last.count, self.last.cancelled])
        return True

    def Test(self, status: Status | None = None) -> bool:
        if self.rid is not None and not self._call([self], "all", True, "Test"):
            return False
        _fill(status, [0, self.last.source, self.last.tag, self.last.count, self.last.cancelled])
        return True

    def wait(self, status: Status | None = None):
        self.Wait(status)
        return self.value

    def test(self, status: Status | None = None):
        flag = self.Test(status)
        return flag, (self.value if flag else None)

    def Get_status(self, status: Status | None = None) -> bool:
        return self.Test(status) if self.rid is not None else True

    def Cancel(self) -> None:
        if self.rid is not None:
            if not self.kind.startswith("recv"):
                raise NotImplementedError("the emulated MPI cancels receives only (MPI_Cancel of a send)")
            CHANNEL.call("cancel", id=self.rid, call="Cancel")

    def Free(self) -> None:
        self.rid = None

    cancel = Cancel

    # -- several ----------------------------------------------------------------------------------------
    @classmethod
    def Waitall(cls, requests, statuses=None) -> bool:
        cls._call(requests, "all", False, "Waitall")
        if statuses is not None:
            for i, r in enumerate(requests):
                if i < len(statuses):
                    _fill(statuses[i], [0, r.last.source, r.last.tag, r.last.count, r.last.cancelled])
        return True

    @classmethod
    def waitall(cls, requests, statuses=None) -> list:
        cls.Waitall(requests, statuses)
        return [r.value for r in requests]

    @classmethod
    def Testall(cls, requests, statuses=None) -> bool:
        active = [r for r in requests if r]
        if active and not cls._call(active, "all", True, "Testall"):
            return False
        return cls.Waitall(requests, statuses)

    @classmethod
    def testall(cls, requests, statuses=None):
        flag = cls.Testall(requests, statuses)
        return flag, ([r.value for r in requests] if flag else None)

    @classmethod
    def Waitany(cls, requests, status: Status | None = None) -> int:
        done = cls._call(requests, "any", False, "Waitany")
        if not done:
            return UNDEFINED
        _fill(status, [0, done[0].last.source, done[0].last.tag, done[0].last.count, done[0].last.cancelled])
        return next(i for i, r in enumerate(requests) if r is done[0])

    @classmethod
    def waitany(cls, requests, status: Status | None = None):
        i = cls.Waitany(requests, status)
        return i, (requests[i].value if i != UNDEFINED else None)

    @classmethod
    def Testany(cls, requests, status: Status | None = None) -> tuple[int, bool]:
        if not any(requests):
            return UNDEFINED, True
        done = cls._call(requests, "any", True, "Testany")
        if not done:
            return UNDEFINED, False
        _fill(status, [0, done[0].last.source, done[0].last.tag, done[0].last.count, done[0].last.cancelled])
        return next(i for i, r in enumerate(requests) if r is done[0]), True

    @classmethod
    def _some(cls, requests, test: bool, name: str):
        if not any(requests):
            return None
        done = cls._call(requests, "some", test, name)
        return [i for i, r in enumerate(requests) if any(r is d for d in done)]

    @classmethod
    def Waitsome(cls, requests, statuses=None):
        return cls._some(requests, False, "Waitsome")

    @classmethod
    def Testsome(cls, requests, statuses=None):
        return cls._some(requests, True, "Testsome")

    @classmethod
    def Startall(cls, requests) -> None:
        for r in requests:
            r.Start()

    def __getattr__(self, name):
        _unsupported("Request.", name)


class Prequest(Request):
    """A persistent request: ``Start`` begins it again, ``Wait`` completes it (it stays usable)."""

    def __init__(self, start):
        super().__init__(None, "persistent")
        self._start = start

    def Start(self) -> None:
        inner = self._start()
        self.rid, self.kind, self.msg = inner.rid, inner.kind, inner.msg

    def _done(self) -> None:
        self.rid = None

    def __eq__(self, other) -> bool:
        return self is other

    __hash__ = Request.__hash__


class Group:
    def __init__(self, ranks: list[int]):
        self.ranks = list(ranks)
        """World ranks, in the group's order."""

    def Get_size(self) -> int:
        return len(self.ranks)

    def Get_rank(self) -> int:
        return self.ranks.index(CHANNEL.rank) if CHANNEL.rank in self.ranks else UNDEFINED

    size = property(Get_size)
    rank = property(Get_rank)

    def Incl(self, ranks) -> "Group":
        return Group([self.ranks[r] for r in ranks])

    def Excl(self, ranks) -> "Group":
        drop = set(ranks)
        return Group([w for i, w in enumerate(self.ranks) if i not in drop])

    def Translate_ranks(self, ranks=None, group: "Group | None" = None) -> list[int]:
        ranks = range(len(self.ranks)) if ranks is None else ranks
        other = group.ranks if group is not None else None
        return [r if other is None else (other.index(self.ranks[r]) if self.ranks[r] in other else UNDEFINED)
                for r in ranks]

    @classmethod
    def Union(cls, a: "Group", b: "Group") -> "Group":
        return Group(a.ranks + [w for w in b.ranks if w not in a.ranks])

    @classmethod
    def Intersection(cls, a: "Group", b: "Group") -> "Group":
        return Group([w for w in a.ranks if w in b.ranks])

    @classmethod
    def Difference(cls, a: "Group", b: "Group") -> "Group":
        return Group([w for w in a.ranks if w not in b.ranks])

    def Free(self) -> None:
        pass

    def __getattr__(self, name):
        _unsupported("Group.", name)


def _tag_ok(tag: int, recv: bool) -> int:
    if not (ANY_TAG if recv else 0) <= tag <= TAG_UB:
        raise Exception(4, f"MPI_ERR_TAG: invalid tag {tag}")
    return tag


def _op(op) -> Op:
    if not isinstance(op, Op) or op.name == "op_null":
        raise Exception(9, f"MPI_ERR_OP: invalid operation {op!r}")
    if op.name in ("replace", "no_op"):
        raise NotImplementedError(f"the emulated MPI has no {op.name.upper()} in collective reductions")
    return op
