"""The rank's end of its channel to the emulator (rank side); its buffer specifications are in ``buffers``.

``call(op, payload, **head)`` sends one MPI call and returns the answer; while the emulator carries
it out it may ask this process to combine data (a reduction with the program's own operator, or of
Python objects): ``_callback``. The CPU time the program spent since the last call goes with each
call, so that its host computes that long in virtual time (``--cpu-scale``; none with ``--compute
zero``); ``wtime`` is the host's virtual clock.
"""

from __future__ import annotations

import os
import pickle
import socket
import time

from . import wire
from .types import ERR_BUFFER, TYPES, Exception, Op, numpy_combine


class _Channel:
    def __init__(self):
        self.sock: socket.socket | None = None
        self.rank, self.size, self.name = 0, 1, "localhost"
        self.now_ns = 0
        self.scale = float(os.environ.get("EMU_MPIRUN_CPU_SCALE", "0") or 0)
        self.t_ret = time.process_time()
        self.finalized = False
        self.bsend_buffer = None
        """The buffer of ``Attach_buffer``: a buffered send needs room in it (the message's bytes and
        ``BSEND_OVERHEAD``); the emulated NIC takes a message at once, so the room is free again."""

    def bsend_room(self, nbytes: int) -> None:
        have = memoryview(self.bsend_buffer).nbytes if self.bsend_buffer is not None else 0
        if nbytes + 96 > have:
            raise Exception(ERR_BUFFER, f"MPI_ERR_BUFFER: insufficient space in Bsend buffer; requested {nbytes}, "
                                        f"total buffer size is {have} (MPI.Attach_buffer)")

    def open(self) -> None:
        fd = int(os.environ.pop("EMU_MPIRUN_FD"))
        self.sock = socket.socket(fileno=fd)
        self.sock.set_inheritable(False)  # a program's own subprocesses do not get it
        head, _ = self.call("hello", rank=int(os.environ["EMU_MPIRUN_RANK"]), pid=os.getpid())
        self.rank, self.size, self.name = head["rank"], head["size"], head["name"]

    def call(self, op: str, payload=b"", **head):
        if self.sock is None:
            raise Exception(15, "MPI is not running: this process was not started by emu mpirun")
        if self.finalized and op not in ("exit", "abort"):
            raise Exception(15, f"MPI call {head.get('call', op)} after MPI_Finalize")
        head["op"] = op
        t = time.process_time()
        if self.scale > 0:
            head["cpu"] = t - self.t_ret
        try:
            wire.send(self.sock, head, payload)
            while True:
                answer, data = wire.recv(self.sock)
                if "cb" not in answer:
                    break
                self._callback(answer["cb"], data)
        except (wire.ChannelClosed, OSError):
            os._exit(1)  # the emulator ended the job (another rank failed, Ctrl-C): nothing to add
        self.now_ns = answer.pop("now", self.now_ns)
        self.t_ret = time.process_time()
        if "err" in answer:
            raise Exception(answer.get("code", 15), answer["err"])
        return answer, data

    def abort(self, errorcode: int) -> None:
        """``MPI_Abort``: the job ends; this process with ``errorcode``."""
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        self.call("abort", why=f"MPI_Abort(MPI_COMM_WORLD, {errorcode}) on rank {self.rank}", code=errorcode)
        os._exit(errorcode if 0 < errorcode < 256 else 1)

    def wtime(self) -> float:
        return self.now_ns / 1e9 + (time.process_time() - self.t_ret) * self.scale

    def _callback(self, cb: dict, data) -> None:
        t = time.process_time()
        try:
            out = combine(cb, data)
            head = {}
        except BaseException as e:  # noqa: BLE001 -- the error goes back to the call that needed it
            out, head = b"", {"err": f"{type(e).__name__}: {e}", "code": 15}
        head["cpu"] = time.process_time() - t
        wire.send(self.sock, head, out)


CHANNEL = _Channel()


def op_of(key: str) -> Op:
    if key.startswith("user:"):
        op = Op._users.get(int(key[5:]))
        if op is None:
            raise Exception(9, f"MPI_ERR_OP: operation {key} was freed")
        return op
    from .types import OPS

    return OPS[key.upper()]


def combine(cb: dict, data) -> bytes:
    """Reduce the parts of ``data`` (lengths ``lens``, in rank order) with the operator named."""
    parts, at = [], 0
    for n in cb["lens"]:
        parts.append(data[at:at + n])
        at += n
    op = op_of(cb["op"])
    if cb.get("pickled"):
        objs = [pickle.loads(p) for p in parts]
        acc = objs[0]
        for o in objs[1:]:
            acc = op(acc, o)
        return pickle.dumps(acc, pickle.HIGHEST_PROTOCOL)
    import numpy as np

    dt = TYPES[cb["tname"]] if cb.get("tname") in TYPES else None
    npt = dt.numpy() if dt is not None else np.dtype(cb["dtype"])
    acc = np.frombuffer(bytes(parts[0]), npt).copy()
    for p in parts[1:]:
        b = np.frombuffer(bytes(p), npt).copy()
        if op.uid:  # the program's function: inoutbuf = inbuf op inoutbuf
            op.fn(memoryview(acc).cast("B"), memoryview(b).cast("B"), dt or TYPES["BYTE"])
            acc = b
        else:
            acc = numpy_combine(op.name, acc, b)
    return acc.tobytes()
