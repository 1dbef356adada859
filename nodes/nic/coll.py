"""The collective-offload NIC of spec 01: posted descriptors, triggers, the receive-and-process unit.

A sans-I/O part of the NIC engine (``emu.nodes.nic.engine``: it emits frames and sets timers through
it, and writes completions to the host's memory through it). Blocks:

* **posted-descriptor queue** per virtual port (VP), executed in order from its head;
* ``CP_Counter`` per VP: a message whose CP bit (the descriptor's ``type`` bit) is set increments
  it on arrival; a head descriptor with ``CpCnt`` executes once ``CP_Counter >= CpCnt``;
* **request receive queue**: bounded, shared by all VPs; a message whose ``SwpMP`` bit is set goes
  there instead of to the host;
* **receive-and-process unit** (one per NIC): reads queued messages in order (the first one whose
  VP's head reduce descriptor it belongs to), counts ``Rcnt``, keeps the **intermediate-result
  register**, checks ``BranchDegree`` and ``Rtype`` against it and combines data in the **ALU**;
  when ``Rcnt`` reaches the degree it combines the head descriptor's local data (``Rflag``) and the
  result replaces the descriptor's data, which then fires toward the parent;
* **completion**: a descriptor with ``Lint`` set writes its status and data to host memory.

Timing (``NicSpec``; every message also crosses the NIC's transmit and receive pipelines, ``HostSpec.nic_delay_ns``
each way): a queue access costs ``queue_ns``, an ALU pass ``alu_ns`` per operand pair,
turning a descriptor into a message ``descriptor_ns``, a completion write ``completion_ns``. The
process unit and the request send unit each work on one thing at a time (a message the send unit
builds occupies it ``descriptor_ns``; two descriptors firing together leave one after the other).
The host writes its descriptors one after another, ``post_ns`` each: each one is on the NIC, and
may execute, as soon as it is written, while the host writes the next.

Errors never hang: an Rtype/Branch mismatch marks the register (``ErrVec``) and the error travels
with the data to every participant; a message that finds the queue full is counted as an erroneous
contribution; a message for a VP that was never opened is counted and answered with an ERROR
message, on which the sender completes its pending descriptors of that region with an error. A host
waiting for a completion gives up after its timeout, and the region is aborted on that NIC.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from emu.wire import DESC, HDR_LEN, DecodeError, PacketType
from emu.wire.coll import ErrBit, Head

from . import alu
from .coll_requests import Completion, NicOpen, NicPost, NicWait, Posted
from .interface import PENDING, Mechanism, NicCore, register_mechanism

log = logging.getLogger(__name__)

_IDX = {name: i for i, name in enumerate(DESC.names)}
_DATA = [_IDX[f"data{i}"] for i in range(7)]
_LOC = [_IDX[f"loc{i}"] for i in range(7)]


@dataclass(eq=False)
class _Register:
    region: int
    seg: int
    branch: int
    rtype: tuple[int, int, int]
    values: np.ndarray | None = None
    locations: np.ndarray | None = None
    rcnt: int = 0
    err_vec: int = 0


@dataclass(eq=False)
class _VP:
    index: int
    cp_counter: int = 0
    posted: deque = field(default_factory=deque)
    reg: _Register | None = None
    swaps: dict = field(default_factory=dict)
    """(region, seg) -> (values, locations, err_vec) swapped in by CP messages."""
    overflowed: list = field(default_factory=list)
    """(region, seg) of reduce messages that found the receive queue full."""


def rtype_of(d: dict[str, int]) -> tuple[int, int, int]:
    return d["rop"], d["rdtype"], d["rbit"]


@register_mechanism
class CollNIC(Mechanism):
    name = "coll"
    stats_key = "nic"
    frames = {PacketType.COLL: "receive"}
    requests = {NicOpen: "_req_open", NicPost: "_req_post", NicWait: "_req_wait"}
    verbs = ("nic_open", "nic_post", "nic_wait")

    def __init__(self, owner: NicCore):
        self.nic = owner
        self._done: dict[tuple[int, int], list[Completion]] = {}
        """Completions written to host memory and not yet taken, by (VP, region)."""
        self._waiters: dict[tuple[int, int], tuple[Callable, NicWait, int]] = {}
        self.spec = owner.spec.nic
        self.vps: dict[int, _VP] = {}
        self.queue: list[tuple[int, dict, np.ndarray, np.ndarray]] = []
        self.unit_free = 0
        self.send_free = 0  # when the request send unit is free to build the next message
        self._kick_at: int | None = None
        self.aborted: set[tuple[int, int]] = set()
        """(VP, region) pairs given up on: their late messages are dropped, until posted again."""
        self.stats = {"late_after_abort": 0, "posted": 0, "messages_sent": 0, "messages_received": 0, "alu_ops": 0, "mismatch": 0,
                      "queue_overflow": 0, "unknown_vp": 0, "errors_received": 0, "completions": 0, "aborted": 0,
                      "queue_peak": 0}

    # -- what applications call (``host.nic_open``, ...) ------------------------------------------
    def nic_open(self, vp: int) -> NicOpen:
        """Open virtual port ``vp`` of the NIC's collective engine (communicator setup)."""
        return NicOpen(vp)

    def nic_post(self, vp: int | None, posted: list) -> NicPost:
        """Post descriptors (``emu.nodes.nic.coll.Posted``) to ``vp`` (None: each to the VP its
        ``src_vp`` field names), in order; costs ``NicSpec.post_ns`` of CPU each."""
        return NicPost(vp, list(posted))

    def nic_wait(self, region: int, count: int = 1, timeout_ns: int = 1_000_000, vp: int = 1) -> NicWait:
        """Wait until the NIC has written ``count`` completions of ``region`` on virtual port ``vp``
        to host memory; returns them (``emu.nodes.nic.coll.Completion``). After ``timeout_ns`` without them,
        the region is aborted and the completions so far are returned with a timeout one added."""
        return NicWait(region, count, timeout_ns, vp)

    def _req_open(self, op: NicOpen, now: int, done: Callable) -> tuple[int, Any]:
        self.open_vp(op.vp)
        return 0, None

    def _req_post(self, op: NicPost, now: int, done: Callable) -> tuple[int, Any]:
        cost = self.spec.post_ns * len(op.posted)
        self.post(op.vp, op.posted, now, self.spec.post_ns)
        return cost, None

    def _req_wait(self, op: NicWait, now: int, done: Callable) -> tuple[int, Any]:
        key = (op.vp, op.region)
        have = self._done.get(key, [])
        if len(have) >= op.count:
            self._done[key] = have[op.count:]
            return 0, have[:op.count]
        tid = self.nic.at(now + op.timeout_ns, self._wait_timeout, op)
        self._waiters[key] = (done, op, tid)
        return 0, PENDING

    def _to_host(self, c: Completion) -> None:
        """A completion reached host memory: wake the application waiting for enough of them."""
        key = (c.vp, c.region)
        have = self._done.setdefault(key, [])
        have.append(c)
        w = self._waiters.get(key)
        if w is not None and len(have) >= w[1].count:
            done, op, tid = self._waiters.pop(key)
            self.nic.timers.cancel(tid)
            self._done[key] = have[op.count:]
            done(have[:op.count])

    def _wait_timeout(self, op: NicWait) -> None:
        key = (op.vp, op.region)
        w = self._waiters.get(key)
        if w is None or w[1] is not op:
            return
        del self._waiters[key]
        self.abort(op.vp, op.region)
        have = self._done.pop(key, [])
        have.append(Completion(op.region, -1, ErrBit.TIMEOUT, None, None, self.nic.now, op.vp))
        w[0](have)

    def apps_ended(self) -> None:
        self._waiters = {}

    # -- host side ------------------------------------------------------------------------------
    def open_vp(self, vp: int) -> None:
        if not 0 <= vp < self.spec.virtual_ports:
            raise ValueError(f"virtual port {vp} is not within 0..{self.spec.virtual_ports - 1}")
        self.vps.setdefault(vp, _VP(vp))

    def post(self, vp: int | None, posted: list[Posted], t: int, each_ns: int = 0) -> None:
        """The host writes ``posted`` from ``t`` on, ``each_ns`` per descriptor: descriptor i is on
        the NIC (at the tail of its VP's queue: ``vp``, or its ``src_vp`` if ``vp`` is None) at
        ``t + (i + 1) * each_ns``."""
        vps = [p.desc["src_vp"] if vp is None else vp for p in posted]
        for v in sorted(set(vps)):
            if v not in self.vps:
                raise ValueError(f"virtual port {v} is not open; open it first")
        for v, p in zip(vps, posted):
            self.aborted.discard((v, p.desc["coll_region"]))
        self.stats["posted"] += len(posted)
        host = getattr(self.nic, "host", None)  # under OS noise (``host.noise``) a detour holds the writes back
        for i, (v, p) in enumerate(zip(vps, posted)):
            at = t + (i + 1) * each_ns if host is None else host.cpu_done_at(t, (i + 1) * each_ns)
            self.nic.at(at, self._written, (v, p))

    def _written(self, arg) -> None:
        vp, p = arg
        v = self.vps.get(vp)
        if v is None:
            return
        v.posted.append(p)
        if len(v.posted) == 1:  # the queue was empty (or waiting for this one): see what it allows
            self._advance(vp)

    def abort(self, vp: int, region: int) -> None:
        """Forget every trace of ``region`` on ``vp`` (after a host gave up waiting for it); its
        messages that arrive later are dropped and counted."""
        self.aborted.add((vp, region))
        v = self.vps.get(vp)
        if v is None:
            return
        before = len(v.posted)
        v.posted = deque(p for p in v.posted if p.desc["coll_region"] != region)
        self.stats["aborted"] += before - len(v.posted)
        if v.reg is not None and v.reg.region == region:
            v.reg = None
        v.swaps = {k: s for k, s in v.swaps.items() if k[0] != region}
        v.overflowed = [o for o in v.overflowed if o[0] != region]
        self.queue = [q for q in self.queue if (q[0], q[1]["coll_region"]) != (vp, region)]
        self.nic.at(self.nic.now, self._advance, vp)  # what waited behind the region may go

    # -- network side ---------------------------------------------------------------------------
    def receive(self, frame: bytes, src: int, port: int, now: int) -> None:
        """A descriptor message arrived; the NIC's receive pipeline hands it on ``nic_delay_ns`` later."""
        d = DESC.as_dict(frame, HDR_LEN)
        if len(frame) != HDR_LEN + DESC.size:
            raise DecodeError(f"collective descriptor message of {len(frame) - HDR_LEN} bytes, not {DESC.size}")
        self._operands(d)  # malformed operand fields are the sender's fault: refuse now
        self.stats["messages_received"] += 1
        self.nic.at(now + self.nic.spec.nic_delay_ns, self._on_message, (d, src))

    def _on_message(self, arg) -> None:
        d, src = arg
        now = self.nic.now
        if (d["dest_vp"], d["coll_region"]) in self.aborted:
            self.stats["late_after_abort"] += 1
            return
        if d["head"] == Head.ERROR:
            self.stats["errors_received"] += 1
            self._fail_region(d["dest_vp"], d["coll_region"], d["err_vec"] or ErrBit.UNKNOWN_VP, now)
            return
        v = self.vps.get(d["dest_vp"])
        if v is None:
            self.stats["unknown_vp"] += 1
            log.warning("%s: collective message from %d for virtual port %d, which is not open", self.nic.name,
                        src, d["dest_vp"])
            err = dict(d, head=Head.ERROR, err=1, err_vec=ErrBit.UNKNOWN_VP, dest_vp=d["src_vp"],
                       src_vp=d["dest_vp"], swpmp=0, type=0)
            self._send(src, err, now + self.spec.descriptor_ns)
            return
        vals, locs = self._operands(d)
        if d["swpmp"]:
            if len(self.queue) >= self.spec.queue_capacity:
                self.stats["queue_overflow"] += 1
                r = v.reg
                if r is not None and (r.region, r.seg) == (d["coll_region"], d["seg"]):
                    r.rcnt += 1  # an erroneous contribution to the reduction under way
                    r.err_vec |= ErrBit.OVERFLOW
                    if r.rcnt >= r.branch:
                        self.nic.at(max(now, self.unit_free), self._finish_at, (v.index, r.region, r.seg))
                else:
                    v.overflowed.append((d["coll_region"], d["seg"]))
                self._kick(now)
                return
            self.queue.append((v.index, d, vals, locs))
            self.stats["queue_peak"] = max(self.stats["queue_peak"], len(self.queue))
            self._kick(now + self.spec.queue_ns)
            return
        self._cp_arrival(v, d, vals, locs, now)

    def _cp_arrival(self, v: _VP, d: dict, vals, locs, t: int) -> None:
        if d["type"]:
            v.cp_counter += 1
        if d["swpflag"]:
            v.swaps[(d["coll_region"], d["seg"])] = (vals, locs, d["err_vec"])
        self.nic.at(t, self._advance, v.index)

    # -- posted-descriptor queue ----------------------------------------------------------------
    def _advance(self, vp: int) -> None:
        """Execute what the head of ``vp``'s posted queue allows, as long as it allows."""
        now = self.nic.now
        v = self.vps.get(vp)
        while v is not None and v.posted:
            p = v.posted[0]
            d = p.desc
            if d["head"] == Head.REDUCE:
                if d["branch"] == 0 or d["inst"]:
                    v.posted.popleft()
                    vals, locs = self._operands(d)
                    self._fire(v, p, vals, locs, d["err_vec"], now)
                    continue
                if v.reg is None:
                    v.reg = _Register(d["coll_region"], d["seg"], d["branch"], rtype_of(d))
                    for key in [o for o in v.overflowed if o == (d["coll_region"], d["seg"])]:
                        v.overflowed.remove(key)
                        v.reg.rcnt += 1
                        v.reg.err_vec |= ErrBit.OVERFLOW
                    if v.reg.rcnt >= v.reg.branch:
                        self._finish_reduce(v, now)
                        continue
                    self._kick(now)
                return
            if d["head"] == Head.BCAST:
                key = (d["coll_region"], d["seg"])
                if v.cp_counter < d["cpcnt"] or key not in v.swaps:
                    return
                v.posted.popleft()
                v.cp_counter -= d["cpcnt"]  # the trigger is consumed
                vals, locs, err = v.swaps.pop(key)
                self._fire(v, p, vals, locs, err, now)
                continue
            v.posted.popleft()  # a kind this NIC does not execute: complete it with an error
            self._complete(v.index, p, None, None, ErrBit.MISMATCH, now)

    # -- receive-and-process unit ---------------------------------------------------------------
    def _kick(self, t: int) -> None:
        t = max(t, self.unit_free)
        if self._kick_at is not None and self._kick_at <= t:
            return
        self._kick_at = t
        self.nic.at(t, self._unit, None)

    def _unit(self, _arg: Any) -> None:
        now = self.nic.now
        if self._kick_at is not None and self._kick_at > now:
            return  # superseded by an earlier kick
        self._kick_at = None
        if now < self.unit_free:
            self._kick(self.unit_free)
            return
        for i, (vp, d, vals, locs) in enumerate(self.queue):
            v = self.vps[vp]
            r = v.reg
            if r is None or (d["coll_region"], d["seg"]) != (r.region, r.seg):
                continue  # belongs to a later descriptor of this VP (or another VP's): wait
            del self.queue[i]
            t = now + self.spec.queue_ns
            r.rcnt += 1
            r.err_vec |= d["err_vec"]
            if d["branch"] != r.branch or rtype_of(d) != r.rtype or (r.values is not None and len(vals) != len(r.values)):
                self.stats["mismatch"] += 1
                r.err_vec |= ErrBit.MISMATCH
                log.warning("%s: reduce message with Branch %d Rtype %s (%d operands) does not match the "
                            "register's %d %s", self.nic.name, d["branch"], rtype_of(d), len(vals), r.branch, r.rtype)
            elif r.values is None:
                r.values, r.locations = vals, locs
            else:
                r.values, r.locations = alu.combine(r.rtype[0], r.values, r.locations, vals, locs)
                self.stats["alu_ops"] += len(vals)
                t += self.spec.alu_ns * len(vals)
            self.unit_free = t
            if r.rcnt >= r.branch:
                self.nic.at(t, self._finish_at, (vp, r.region, r.seg))
            else:
                self._kick(t)
            return

    def _finish_at(self, key: tuple[int, int, int]) -> None:
        vp, region, seg = key
        v = self.vps[vp]
        r = v.reg
        if r is None or (r.region, r.seg) != (region, seg) or not v.posted:
            return  # the region was aborted or failed in the meantime
        self._finish_reduce(v, self.nic.now)
        self._advance(vp)
        self._kick(self.nic.now)

    def _finish_reduce(self, v: _VP, now: int) -> None:
        """Rcnt reached the degree: combine the head descriptor's own data and fire it."""
        r, p = v.reg, v.posted.popleft()
        v.reg = None
        d = p.desc
        vals, locs = self._operands(d)
        t, err = now, r.err_vec | d["err_vec"]
        if r.values is not None:
            if not d["rflag"]:  # not a reduce descriptor: the register simply replaces its data
                vals, locs = r.values, r.locations
            elif rtype_of(d) != r.rtype or len(r.values) != len(vals):
                self.stats["mismatch"] += 1
                err |= ErrBit.MISMATCH
            else:
                vals, locs = alu.combine(r.rtype[0], r.values, r.locations, vals, locs)
                self.stats["alu_ops"] += len(vals)
                t += self.spec.alu_ns * len(vals)
        self.unit_free = max(self.unit_free, t)
        self._fire(v, p, vals, locs, err, t)

    # -- request send unit ----------------------------------------------------------------------
    def _fire(self, v: _VP, p: Posted, vals, locs, err_vec: int, t: int) -> None:
        """Turn the descriptor, carrying ``vals``, into one message per destination."""
        d = p.desc
        data, loc = alu.pack(vals, locs) if vals is not None else ([0] * 7, [0] * 7)
        msg = dict(d, err=1 if err_vec else 0, err_vec=err_vec, data_num=len(vals) if vals is not None else 0,
                   branch=d["pbranch"], node_id=self.nic.node_id & 0xFFFFF, src_vp=v.index, inst=0)
        for i in range(7):
            msg[f"data{i}"], msg[f"loc{i}"] = data[i], loc[i]
        for dst, dvp in p.dests:
            t = max(t, self.send_free) + self.spec.descriptor_ns
            self.send_free = t
            m = dict(msg, dest_vp=dvp)
            if dst == self.nic.node_id:  # to itself: not reduced again, straight to the VP (CP, swap)
                self.nic.at(t + self.spec.queue_ns, self._self_arrival, (dvp, m, vals, locs))
            else:
                self._send(dst, m, t)
        if d["lint"]:
            self._complete(v.index, p, vals, locs, err_vec, t)

    def _self_arrival(self, arg) -> None:
        dvp, m, vals, locs = arg
        v = self.vps.get(dvp)
        if v is None:
            self.stats["unknown_vp"] += 1
            self._fail_region(m["src_vp"], m["coll_region"], ErrBit.UNKNOWN_VP, self.nic.now)
            return
        self._cp_arrival(v, m, vals, locs, self.nic.now)

    def _send(self, dst: int, d: dict, t: int) -> None:
        """The request message leaves through the NIC's transmit pipeline (``nic_delay_ns``)."""
        self.stats["messages_sent"] += 1
        self.nic.emit(dst, PacketType.COLL, DESC.pack(*(d[n] for n in DESC.names)), t + self.nic.spec.nic_delay_ns)

    def _operands(self, d: dict) -> tuple[np.ndarray | None, np.ndarray | None]:
        dtype = alu.NIC_TYPES.get((d["rdtype"], d["rbit"]))
        if dtype is None:
            raise DecodeError(f"descriptor operand type {d['rdtype']}/{d['rbit']} is unknown")
        n = d["data_num"]
        if n * dtype.itemsize > 56:
            raise DecodeError(f"descriptor claims {n} operands of {dtype.itemsize} bytes")
        return alu.unpack([d[f"data{i}"] for i in range(7)], [d[f"loc{i}"] for i in range(7)], n, dtype)

    # -- completion -----------------------------------------------------------------------------
    def _complete(self, vp: int, p: Posted, vals, locs, err_vec: int, t: int) -> None:
        d = p.desc
        c = Completion(d["coll_region"], d["seg"], err_vec, vals, locs, t + self.spec.completion_ns, vp)
        self.stats["completions"] += 1
        self.nic.at(c.t_ns, self._to_host, c)

    def _fail_region(self, vp: int, region: int, err_vec: int, now: int) -> None:
        """Complete every pending descriptor of ``region`` on ``vp`` that would report to the host,
        in error, and forget the region there."""
        v = self.vps.get(vp)
        if v is None:
            return
        keep = deque()
        for p in v.posted:
            if p.desc["coll_region"] == region:
                if p.desc["lint"]:
                    self._complete(vp, p, None, None, err_vec, now)
            else:
                keep.append(p)
        v.posted = keep
        if v.reg is not None and v.reg.region == region:
            v.reg = None
        self.nic.at(now, self._advance, vp)
