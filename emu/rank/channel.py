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
import signal
import socket
import struct
import threading
import time

from . import wire
from .types import ERR_BUFFER, TYPES, Exception, Op, numpy_combine


QUIET_MAX_BYTES = 4096
"""A standard-mode send of at most this many bytes (and the host's eager limit) goes without waiting
for its answer: the emulator carries it out before the rank's next call, as an eager send of a real
MPI returns as soon as the message is on its way. So does the posting of a nonblocking receive."""
HELD_MAX_BYTES = 32768
"""Calls that need no answer are held, and go with the next call that does (one system call, one
wake-up of the emulator), up to this many bytes of them: the emulator waits for this rank's next
call anyway before its host's virtual time moves on, so holding them changes no figure. (A program
that waits outside MPI -- for another rank's socket -- is sent ``wire.FLUSH_SIGNAL``: they go then.)"""
RID_BASE = 1 << 40
"""Requests of calls that went without an answer are numbered by the rank from here (the
emulator's own numbers count from 1)."""


def clock_cost(tries: int = 31) -> float:
    """CPU seconds from one reading of ``time.process_time`` to the next, back to back: the median of
    ``tries`` (a reading the scheduler interrupted is not the cost)."""
    clock, gaps = time.process_time, []
    for _ in range(tries):
        a = clock()
        gaps.append(clock() - a)
    gaps.sort()
    return max(gaps[len(gaps) // 2], 0.0)


class _Channel:
    def __init__(self):
        self.sock: socket.socket | None = None
        self.reader: wire.Reader | None = None
        self.rank, self.size, self.name = 0, 1, "localhost"
        self.world, self.world_rank, self.universe, self.appnum, self.parent = [0], 0, 1, 0, None
        self.now_ns = 0
        self.scale = float(os.environ.get("EMU_MPIRUN_CPU_SCALE", "0") or 0)
        self.t_out = time.process_time()
        """When the library last returned to the program (process CPU seconds)."""
        self.app_cpu = 0.0
        """The program's own CPU seconds since the last call that carried them to the emulator: the time
        outside the library's public calls (``emu.rank.charging``), the library's own work excluded."""
        self.clock_cost = clock_cost() if self.scale > 0 else 0.0
        """What one reading of the CPU clock costs (a system call): between the library's return and
        the program's next call the clock sees one, which is the library's, not the program's."""
        self.depth = 0
        """Inside a public call of the library (``emu.rank.charging``): 1, else 0."""
        self.quiet_max = QUIET_MAX_BYTES
        self.unsynced = False
        """A send went without an answer since the last answer: the host's clock moved on unseen."""
        self.held: list[bytes] = []
        """Calls that need no answer, framed, not yet written to the channel (``HELD_MAX_BYTES``)."""
        self.held_bytes = 0
        self.next_rid = RID_BASE
        self.finalized = False
        self.bsend_buffer = None
        self.bsend_bytes = 0
        self.lock = threading.Lock()
        """Held during a call: a second thread calling meanwhile is told (THREAD_SERIALIZED), not
        let in to interleave its messages with the first's on the one channel."""
        """The buffer of ``Attach_buffer``: a buffered send needs room in it (the message's bytes and
        ``BSEND_OVERHEAD``); the emulated NIC takes a message at once, so the room is free again."""

    def bsend_room(self, nbytes: int) -> None:
        have = self.bsend_bytes if self.bsend_buffer is not None else 0
        if nbytes + 96 > have:
            raise Exception(ERR_BUFFER, f"MPI_ERR_BUFFER: insufficient space in Bsend buffer; requested {nbytes}, "
                                        f"total buffer size is {have} (MPI.Attach_buffer)")

    def open(self) -> None:
        fd = int(os.environ.pop("EMU_MPIRUN_FD"))
        self.sock = socket.socket(fileno=fd)
        self.sock.set_inheritable(False)  # a program's own subprocesses do not get it
        self.reader = wire.Reader(self.sock)
        head, _ = self.call("hello", rank=int(os.environ["EMU_MPIRUN_RANK"]), pid=os.getpid())
        self.rank, self.size, self.name = head["rank"], head["size"], head["name"]
        self.world = head.get("world") or list(range(self.size))
        """``COMM_WORLD``'s members (process numbers: ``rank`` is this one's); a spawned process's world is
        the processes its Spawn started."""
        self.world_rank = self.world.index(self.rank)
        self.universe = head.get("universe", self.size)
        self.appnum = head.get("appnum", 0)
        self.parent = head.get("parent")
        """The parent intercommunicator of a spawned process (the emulator's answer), else None."""
        self.quiet_max = min(QUIET_MAX_BYTES, head.get("eager", QUIET_MAX_BYTES))
        try:  # the emulator asks for the held calls when the program waits outside MPI
            signal.signal(wire.FLUSH_SIGNAL, self._flush_held)
        except (ValueError, OSError):  # not the main thread: the held calls go with the next call
            pass

    def _flush_held(self, signum, frame) -> None:
        """``FLUSH_SIGNAL``: the held calls go now -- unless the program is in an MPI call (which sends them)."""
        if self.held and self.lock.acquire(False):
            try:
                self.flush()
            finally:
                self.lock.release()

    def _quiet(self, op: str, head: dict, payload) -> bool:
        """A call that needs no answer: a standard-mode small send, or the posting of a nonblocking
        receive, on COMM_WORLD or COMM_SELF with a peer rank that is there (nothing the emulator
        could refuse)."""
        ctx = head.get("ctx")
        size = self.size if ctx == 0 else 1 if ctx == 1 else 0
        if op == "send":
            if head.get("mode") != "std" or len(payload) > self.quiet_max:
                return False
            dest = head.get("dest")
            return type(dest) is int and (-1 <= dest < size)
        source = head.get("source")
        return head.get("nb") is True and type(source) is int and (-2 <= source < size)

    def call(self, op: str, payload=b"", **head):
        if self.sock is None:
            raise Exception(15, "MPI is not running: this process was not started by emu mpirun")
        if self.finalized and op not in ("exit", "abort"):
            raise Exception(15, f"MPI call {head.get('call', op)} after MPI_Finalize")
        if not self.lock.acquire(False):
            raise Exception(15, f"MPI_ERR_OTHER: {head.get('call', op)} called while another thread is in an MPI call: "
                                "the emulated MPI provides THREAD_SERIALIZED (MPI.Query_thread()); serialise "
                                "the threads' calls")
        try:
            return self._call(op, payload, head)
        finally:
            self.lock.release()

    def _call(self, op: str, payload, head: dict):
        quiet = (op == "send" or op == "recv") and self._quiet(op, head, payload)
        if quiet:
            head["quiet"] = True
            if head.get("nb"):  # its request is numbered here
                rid = head["rid"] = self.next_rid
                self.next_rid += 1
        head["op"] = op
        cpu = self._cpu()
        if cpu is not None:
            head["cpu"] = cpu
        try:
            if quiet:
                msg = wire.frame(head, payload)
                self.held.append(msg)
                self.held_bytes += len(msg)
                if self.held_bytes > HELD_MAX_BYTES:
                    self.flush()
                self.unsynced = True
                return ({"req": rid} if head.get("nb") else {}), b""
            if self.held:
                before, self.held, self.held_bytes = b"".join(self.held), [], 0
                wire.send(self.sock, head, payload, before)
            else:
                wire.send(self.sock, head, payload)
        except (wire.ChannelClosed, OSError):
            os._exit(1)  # the emulator ended the job (another rank failed, Ctrl-C): nothing to add
        return self._answer()

    def _answer(self):
        """The answer to the call just written (the emulator's callbacks served first)."""
        try:
            answer, data = self.reader.recv()
            late = None
            while "cb" in answer or "late" in answer:
                if "late" in answer:  # a call that went without an answer failed after all
                    late = answer
                else:
                    self._callback(answer["cb"], data)
                answer, data = self.reader.recv()
        except (wire.ChannelClosed, OSError):
            os._exit(1)  # the emulator ended the job (another rank failed, Ctrl-C): nothing to add
        self.unsynced = False
        self.now_ns = answer.pop("now", self.now_ns)
        if self.scale > 0 and not self.depth:
            self.t_out = time.process_time()
        if late is not None:
            raise Exception(late.get("code", 15), f"{late['err']} (in an earlier {late['late']})")
        if "err" in answer:
            raise Exception(answer.get("code", 15), answer["err"])
        return answer, data

    # -- the two commonest calls, framed without a head dict (``frame_send`` and ``frame_recv``: the bytes
    # ``wire.frame`` makes of the head ``call`` would build; tests/test_mpirun_wire.py holds them equal) --
    def send_std(self, payload: bytes, ctx: int, dest: int, tag: int, call: str):
        """``call("send", payload, ctx=, dest=, tag=, mode="std", nb=False, call=)``."""
        if self.sock is None or self.finalized or not self.lock.acquire(False):
            return self.call("send", payload, ctx=ctx, dest=dest, tag=tag, mode="std", nb=False, call=call)
        try:
            size = self.size if ctx == 0 else 1 if ctx == 1 else 0
            if len(payload) > self.quiet_max or dest.__class__ is not int or not -1 <= dest < size or \
                    call not in wire.NAME_ID:  # (not one that goes without an answer: ``_quiet``)
                return self._call("send", payload, {"ctx": ctx, "dest": dest, "tag": tag, "mode": "std", "nb": False,
                                                    "call": call})
            head = {"ctx": ctx, "dest": dest, "tag": tag, "mode": "std", "nb": False, "call": call}
            if not (_INT64[0] <= ctx <= _INT64[1] and _INT64[0] <= tag <= _INT64[1]):
                return self._call("send", payload, head)  # (wire.frame's JSON form)
            msg = frame_send(payload, ctx, dest, tag, call, self._cpu())
            self.held.append(msg)
            self.held_bytes += len(msg)
            if self.held_bytes > HELD_MAX_BYTES:
                self.flush()
            self.unsynced = True
            return {}, b""
        finally:
            self.lock.release()

    def recv_blocking(self, ctx: int, source: int, tag: int, call: str):
        """``call("recv", ctx=, source=, tag=, call=)``: a blocking receive's call."""
        if self.sock is None or self.finalized or call not in wire.NAME_ID or not self.lock.acquire(False):
            return self.call("recv", ctx=ctx, source=source, tag=tag, call=call)
        try:
            if not (_INT64[0] <= ctx <= _INT64[1] and _INT64[0] <= source <= _INT64[1] and _INT64[0] <= tag <= _INT64[1]):
                return self._call("recv", b"", {"ctx": ctx, "source": source, "tag": tag, "call": call})
            msg = frame_recv(ctx, source, tag, call, self._cpu())
            try:
                if self.held:
                    msg, self.held, self.held_bytes = b"".join((*self.held, msg)), [], 0
                self.sock.sendall(msg)
            except OSError:
                os._exit(1)  # the emulator ended the job (another rank failed, Ctrl-C): nothing to add
            return self._answer()
        finally:
            self.lock.release()

    def _cpu(self) -> float | None:
        """What ``_call`` puts in a head's ``cpu`` (None: no ``cpu``, the ranks' time is not charged)."""
        if self.scale <= 0:
            return None
        if not self.depth:  # not through the public API (hello, exit, abort): the program's time till now
            t = time.process_time()
            self.app_cpu += max(0.0, t - self.t_out - self.clock_cost)
            self.t_out = t
        cpu, self.app_cpu = self.app_cpu, 0.0
        return cpu

    def flush(self) -> None:
        """Write the held calls to the channel now."""
        if self.held:
            data, self.held, self.held_bytes = b"".join(self.held), [], 0
            try:
                self.sock.sendall(data)
            except OSError:
                os._exit(1)

    def abort(self, errorcode: int) -> None:
        """``MPI_Abort``: the job ends; this process with ``errorcode``."""
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        self.call("abort", why=f"MPI_Abort(MPI_COMM_WORLD, {errorcode}) on rank {self.rank}", code=errorcode)
        os._exit(errorcode if 0 < errorcode < 256 else 1)

    def wtime(self) -> float:
        """The host's virtual clock, and the program's computation since the last call, scaled."""
        if self.unsynced:  # a send went unanswered: ask the clock
            self.call("now")
        if self.scale <= 0:
            return self.now_ns / 1e9
        cpu = self.app_cpu + (0.0 if self.depth else max(0.0, time.process_time() - self.t_out - self.clock_cost))
        return self.now_ns / 1e9 + cpu * self.scale

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
_SEND = wire._BY_CODE[9].fixed.pack
"""The binary head of a send that needs no answer (``wire.REQUESTS`` code 9)."""
_RECV = wire._BY_CODE[2].fixed.pack
"""The binary head of a blocking receive (code 2)."""
_STD, _PREFIX, _CPU = wire.NAME_ID["std"], wire.PREFIX.pack, struct.Struct("<d").pack
_INT64 = (-1 << 63, (1 << 63) - 1)


def frame_send(payload, ctx: int, dest: int, tag: int, call: str, cpu: float | None) -> bytes:
    """``wire.frame`` of ``{ctx, dest, tag, mode: "std", nb: False, call, quiet: True, op: "send"[, cpu]}``
    (``wire.encode_head``'s binary form, code 9)."""
    if cpu is None:
        h = _SEND(9, ctx, dest, tag, _STD, False, wire.NAME_ID[call], True)
    else:
        h = _SEND(9 | wire.CPU_FLAG, ctx, dest, tag, _STD, False, wire.NAME_ID[call], True) + _CPU(cpu)
    return b"".join((_PREFIX(len(payload), len(h)), h, payload))


def frame_recv(ctx: int, source: int, tag: int, call: str, cpu: float | None) -> bytes:
    """``wire.frame`` of ``{ctx, source, tag, call, op: "recv"[, cpu]}`` (code 2)."""
    if cpu is None:
        h = _RECV(2, ctx, source, tag, wire.NAME_ID[call])
    else:
        h = _RECV(2 | wire.CPU_FLAG, ctx, source, tag, wire.NAME_ID[call]) + _CPU(cpu)
    return _PREFIX(0, len(h)) + h


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
