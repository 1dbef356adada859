"""Requests of the emulated ``mpi4py.MPI`` and the point-to-point argument checks (rank side); statuses
(``status``) and groups (``group``) are handed on from here."""

from __future__ import annotations


from .channel import CHANNEL
from .handle import Handle, Impl
from .pickling import PICKLE
from .errors import Unsupported, _unsupported, call_user  # noqa: F401 -- re-exported
from .group import Group  # noqa: F401 -- re-exported
from .status import Status, _copy_status, _elements, _fill  # noqa: F401 -- re-exported
from .types import Exception, Op

ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED, ROOT = -2, -1, -1, -32766, -3
IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3
TAG_UB_KEY, TAG_UB = 1681915905, 2**31 - 1
_pickle = PICKLE.dumps


def _pickles(sendobj, n: int) -> list[bytes]:
    """The ``n`` items of a lowercase scatter or all-to-all, pickled: ``None`` is ``n`` Nones, as mpi4py's."""
    items = [None] * n if sendobj is None else list(sendobj)
    if len(items) != n:
        raise ValueError(f"expecting {n} items, got {len(items)}")
    return [_pickle(o) for o in items]


class Request(Handle, family=True):
    """A pending operation; after it completes it is REQUEST_NULL (``== MPI.REQUEST_NULL``)."""

    _value = None
    _last: Status | None = None

    @classmethod
    def _make(cls, rid, kind: str = "send", msg=None) -> "Request":
        return cls._of(Impl(rid=rid, kind=kind, msg=msg, done=False, row=None, data=None))

    @property
    def rid(self):
        return None if self._h is None else self._h.rid

    def _status(self) -> Status:
        if self._last is None:
            self._last = Status()
        return self._last

    def _finish(self, row, data) -> None:
        h = self._h
        st = self._status()
        st._set(row)
        if not row[4]:
            if h.kind == "recv_buf" and h.msg is not None:
                h.msg.unpack(data)
            elif h.kind == "recv_obj":
                self._value = PICKLE.loads(data) if row[1] != PROC_NULL and data else None
        self._done()

    def _done(self) -> None:
        self._h = None

    @staticmethod
    def _call(reqs, mode: str, test: bool, call: str, keep: bool = False):
        live = [r for r in reqs if r is not None and r._h is not None and r._h.rid is not None]
        local = [r for r in reqs if r is not None and r._active() and r._h.rid is None]
        done = []
        for r in local:  # completed where they were made (a send to PROC_NULL, a generalized request ...)
            if r._local_done():
                done.append(r)
        if mode != "all" and done:
            if not keep:
                for r in done if mode == "some" else done[:1]:
                    r._local_finish()
            return done if mode == "some" else done[:1]
        if mode == "all" and len(done) < len(local):
            if test or not live:
                if not test:
                    raise Exception(15, "MPI_ERR_OTHER: waiting for a generalized request nobody completes")
                return []
        if not live:
            if not keep:
                for r in done:
                    r._local_finish()
            return done
        ids = [r._h.rid for r in live]
        head, data = CHANNEL.call("wait", ids=ids, mode=mode, test=test, call=call, keep=keep)
        by = {r._h.rid: r for r in live}
        at, out = 0, []
        for row in head["st"]:
            r = by[row[0]]
            if keep:
                r._status()._set(row)
            else:
                r._finish(row, data[at:at + row[3]])
            at += row[3]
            out.append(r)
        if mode == "all" and out and not keep:
            for r in done:
                r._local_finish()
            return out + done
        return out

    def _active(self) -> bool:
        """Neither null nor an inactive persistent request (MPI: both are ignored by Wait and Test)."""
        h = self._h
        return h is not None and not getattr(h, "inactive", False)

    def _local_done(self) -> bool:
        return self._h.done

    def _local_finish(self) -> None:
        self._status()._set([0, PROC_NULL, ANY_TAG, 0, False]) if self._h.row is None else self._status()._set(
            self._h.row)
        self._done()

    def _report(self, status) -> None:
        if status is not None:
            _copy_status(status, self._status())

    # -- one request ----------------------------------------------------------------------------------
    def Wait(self, status: Status | None = None) -> bool:
        if self._h is not None:
            self._call([self], "all", False, "Wait")
        else:
            self._last = Status()
        self._report(status)
        return True

    def Test(self, status: Status | None = None) -> bool:
        if self._h is not None and not self._call([self], "all", True, "Test"):
            return False
        if self._h is None and self._last is None:
            self._last = Status()
        self._report(status)
        return True

    def wait(self, status: Status | None = None):
        self.Wait(status)
        v, self._value = self._value, None
        return v

    def test(self, status: Status | None = None):
        flag = self.Test(status)
        if not flag:
            return False, None
        v, self._value = self._value, None
        return True, v

    def Get_status(self, status: Status | None = None) -> bool:
        if self._h is None:
            _copy_status(status, Status())
            return True
        if not self._call([self], "all", True, "Get_status", keep=True):
            return False
        self._report(status)
        return True

    def get_status(self, status: Status | None = None) -> bool:
        return self.Get_status(status)

    def Cancel(self) -> None:
        if self._h is None:
            raise Exception(19, "MPI_ERR_REQUEST: invalid request (REQUEST_NULL)")
        if self._h.rid is not None:
            CHANNEL.call("cancel", id=self._h.rid, call="Cancel")

    def Free(self) -> None:
        if self._h is None:
            raise Exception(19, "MPI_ERR_REQUEST: invalid request (REQUEST_NULL)")
        self._h = None

    cancel = Cancel

    # -- several ----------------------------------------------------------------------------------------
    @staticmethod
    def _statuses(requests, statuses) -> None:
        if statuses is None:
            return
        for i, r in enumerate(requests):
            if i < len(statuses):
                _copy_status(statuses[i], r._last if r._last is not None else Status())

    @classmethod
    def Waitall(cls, requests, statuses=None) -> bool:
        requests = list(requests)
        for r in requests:
            r._last = None
        cls._call(requests, "all", False, "Waitall")
        if statuses is not None:
            while len(statuses) < len(requests) and isinstance(statuses, list):
                statuses.append(Status())
        cls._statuses(requests, statuses)
        return True

    @classmethod
    def waitall(cls, requests, statuses=None) -> list:
        cls.Waitall(requests, statuses)
        out = [r._value for r in requests]
        for r in requests:
            r._value = None
        return out

    @classmethod
    def Testall(cls, requests, statuses=None) -> bool:
        active = [r for r in requests if r]
        if active and not cls._call(active, "all", True, "Testall", keep=True):
            return False
        return cls.Waitall(requests, statuses)

    @classmethod
    def testall(cls, requests, statuses=None):
        flag = cls.Testall(requests, statuses)
        if not flag:
            return False, None
        out = [r._value for r in requests]
        for r in requests:
            r._value = None
        return True, out

    @classmethod
    def Get_status_all(cls, requests, statuses=None) -> bool:
        active = [r for r in requests if r]
        if active and not cls._call(active, "all", True, "Get_status_all", keep=True):
            return False
        if statuses is not None:
            while len(statuses) < len(requests) and isinstance(statuses, list):  # as mpi4py's (and Waitall)
                statuses.append(Status())
            for i, r in enumerate(requests):
                if i < len(statuses):
                    _copy_status(statuses[i], r._status() if r else Status())
        return True

    get_status_all = Get_status_all

    @classmethod
    def _any(cls, requests, test: bool, status, call: str, keep: bool = False):
        requests = list(requests)
        if not any(r is not None and r._active() for r in requests):
            _copy_status(status, Status())
            return UNDEFINED, True
        done = cls._call(requests, "any", test, call, keep=keep)
        if not done:
            return UNDEFINED, False
        _copy_status(status, done[0]._status())
        return next(i for i, r in enumerate(requests) if r is done[0]), True

    @classmethod
    def Waitany(cls, requests, status: Status | None = None) -> int:
        return cls._any(requests, False, status, "Waitany")[0]

    @classmethod
    def waitany(cls, requests, status: Status | None = None):
        i = cls.Waitany(requests, status)
        if i == UNDEFINED:
            return i, None
        v, requests[i]._value = requests[i]._value, None
        return i, v

    @classmethod
    def Testany(cls, requests, status: Status | None = None) -> tuple[int, bool]:
        return cls._any(requests, True, status, "Testany")

    @classmethod
    def testany(cls, requests, status: Status | None = None):
        i, flag = cls.Testany(requests, status)
        if i == UNDEFINED:
            return i, flag, None
        v, requests[i]._value = requests[i]._value, None
        return i, flag, v

    @classmethod
    def Get_status_any(cls, requests, status: Status | None = None):
        return cls._any(requests, True, status, "Get_status_any", keep=True)

    get_status_any = Get_status_any

    @classmethod
    def _some(cls, requests, test: bool, statuses, name: str, keep: bool = False):
        requests = list(requests)
        if not any(r is not None and r._active() for r in requests):
            return None
        done = cls._call(requests, "some", test, name, keep=keep)
        idx = [i for i, r in enumerate(requests) if any(r is d for d in done)]
        if statuses is not None:
            for k, i in enumerate(idx):
                if k >= len(statuses) and isinstance(statuses, list):
                    statuses.append(Status())
                if k < len(statuses):
                    _copy_status(statuses[k], requests[i]._status())
        return idx

    @classmethod
    def Waitsome(cls, requests, statuses=None):
        return cls._some(requests, False, statuses, "Waitsome")

    @classmethod
    def Testsome(cls, requests, statuses=None):
        return cls._some(requests, True, statuses, "Testsome")

    @classmethod
    def Get_status_some(cls, requests, statuses=None):
        return cls._some(requests, True, statuses, "Get_status_some", keep=True)

    get_status_some = Get_status_some

    @classmethod
    def _values(cls, requests, idx):
        if idx is None:
            return None, None
        out = []
        for i in idx:
            out.append(requests[i]._value)
            requests[i]._value = None
        return idx, out

    @classmethod
    def waitsome(cls, requests, statuses=None):
        return cls._values(requests, cls.Waitsome(requests, statuses))

    @classmethod
    def testsome(cls, requests, statuses=None):
        return cls._values(requests, cls.Testsome(requests, statuses))

    @classmethod
    def Startall(cls, requests) -> None:
        for r in requests:
            r.Start()

    @classmethod
    def startall(cls, requests) -> None:
        """Start a collection of persistent requests (``Startall``)."""
        cls.Startall(requests)

    def __getattr__(self, name):
        _unsupported("Request.", name)


class Prequest(Request):
    """A persistent request: ``Start`` begins it again, ``Wait`` completes it (it stays usable)."""

    _strict = True

    @classmethod
    def _persistent(cls, start) -> "Prequest":
        req = cls._of(Impl(rid=None, kind="persistent", msg=None, done=True, row=None, data=None, start=start,
                           inner=None, inactive=True))
        return req

    def Start(self) -> None:
        h = self._h
        if h is None:
            raise Exception(19, "MPI_ERR_REQUEST: invalid request (REQUEST_NULL)")
        inner = h.start()
        h.inner, h.inactive = inner, False
        ih = inner._h
        if ih is None:  # completed at once (PROC_NULL)
            h.rid, h.done, h.row = None, True, inner._last and [0, inner._last.source, inner._last.tag, 0, False]
        else:
            h.rid, h.kind, h.msg, h.done, h.row = ih.rid, ih.kind, ih.msg, ih.done, ih.row
            h.kind_inner = ih.kind

    def start(self) -> None:
        """Start the persistent request (``Start``)."""
        self.Start()

    def _done(self) -> None:  # inactive again, not null
        self._h.rid, self._h.done, self._h.row, self._h.inactive = None, True, None, True

    def _local_finish(self) -> None:
        super()._local_finish()


class Grequest(Request):
    """A generalized request (MPI 2.2 §12.2): completed by ``Complete``, its status by ``query_fn``."""

    _strict = True

    @classmethod
    def Start(cls, query_fn=None, free_fn=None, cancel_fn=None, args=None, kwargs=None) -> "Grequest":
        return cls._of(Impl(rid=None, kind="grequest", msg=None, done=False, row=None, data=None, query=query_fn,
                            free=free_fn, cancel=cancel_fn, args=tuple(args or ()), kwargs=dict(kwargs or {})))

    def Complete(self) -> None:
        if self._h is None:
            raise Exception(19, "MPI_ERR_REQUEST: invalid request (REQUEST_NULL)")
        self._h.done = True

    def complete(self, obj=None) -> None:
        """mpi4py's form: complete with ``obj`` as the request's value (``wait()`` returns it)."""
        self.Complete()
        self._h.value = obj

    def Cancel(self) -> None:
        h = self._h
        if h is not None and h.cancel is not None:
            call_user(h.cancel, h.done, *h.args, what="the cancel function", **h.kwargs)

    def _local_finish(self) -> None:
        """The query function fills the status, then the free function; the request is null after,
        even when one of them raised (the call fails with its error class, as mpi4py's)."""
        h = self._h
        st = self._status()
        self._value = getattr(h, "value", None)
        try:
            if h.query is not None:
                call_user(h.query, st, *h.args, what="the query function", **h.kwargs)
        finally:
            self._h = None
            if h.free is not None:
                call_user(h.free, *h.args, what="the free function", **h.kwargs)


def _null_request(kind: str = "send") -> Request:
    """A request completed when made (a send to PROC_NULL, a buffered send): its status empty."""
    return Request._of(Impl(rid=None, kind=kind, msg=None, done=True, row=None, data=None))


def _tag_ok(tag: int, recv: bool) -> int:
    if not (ANY_TAG if recv else 0) <= tag <= TAG_UB:
        raise Exception(4, f"MPI_ERR_TAG: invalid tag {tag}")
    return tag


def _op(op, objects: bool = False) -> Op:
    """The operator of a reduction; REPLACE and NO_OP only on Python objects (mpi4py applies them
    there; MPI refuses them in a collective reduction on buffers)."""
    if not isinstance(op, Op) or op.name == "op_null":
        raise Exception(9, f"MPI_ERR_OP: invalid operation {op!r}")
    if op.name in ("replace", "no_op") and not objects:
        raise NotImplementedError(f"the emulated MPI has no {op.name.upper()} in collective reductions")
    return op
