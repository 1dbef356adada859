"""The input-queued router (``SwitchSpec.model = input_queued``): virtual channels, allocators, stages.

What a frame meets, in virtual time (every tie broken by a fixed rule, so runs are deterministic):

* **Input buffers.** Each input port has ``vcs`` buffers of ``buffer_bytes`` (whole flits of
  ``flit_bytes``); a frame of n bytes (its modelled length, ``emu.wire.framing``) takes ceil(n / flit_bytes) flits of the buffer
  its VC byte names. The sender holds credit for them (credit flow control; the credit goes back
  when the frame's tail has left the buffer, ``credit_delay_ns`` later). A frame reaches the router
  when its *head* (first flit) is in: the link delivers it then (``OutPort.head_bytes``), and its
  tail follows at the link's rate.
* **Head-of-line.** Only the frame at the head of a VC buffer is routed and allocated; the frames
  behind it on the same VC wait, whatever output they want.
* **Pipeline.** Route computation (``route_ns``) from the head's arrival -- from the tail's without
  ``cut_through`` (store-and-forward) -- then VC allocation (``vc_alloc_ns``), switch allocation
  (``sw_alloc_ns``) and crossbar traversal (``traversal_ns``): with no contention a frame leaves
  ``route + vc_alloc + sw_alloc + traversal`` after its head arrived (cut-through).
* **VC allocation.** A frame of class g (its VC mod the number of groups: ``classes`` with
  ``vc_policy=by_class``, 2 per class for the dateline policies, which pick the next group as in
  ``emu.switch.vc``) is given the lowest-numbered free VC of its next group at the output; requests
  for one output are served in rotating order over (input port, VC). A VC is held until its frame's
  tail flit has won switch allocation (``vc_release=tail_granted``, BookSim's iq router with
  ``wait_for_tail_credit=0``: a 1-flit packet holds it two allocation cycles), until its tail has left
  on the line (``tail_sent``), or until the receiver's credit for its tail is back and the VC empty
  there (``tail_credit``). With ``eject_vcs`` the ports to hosts have ``vcs`` VCs to allocate too
  (BookSim's ejection port), without credits.
* **Switch allocation.** Once per allocation round, inputs are matched to outputs: ``round_robin``
  (separable, input first: each input picks one of its ready VCs, each output one of the inputs
  that picked it, both by rotating priority; high-priority copies first, each class with its own
  rotation, so a token's grant never resets the turn of priority-0 ones) or ``islip`` (request, grant, accept, ``iterations``
  times; pointers move on first-iteration accepts only). A frame is ready when its VC is allocated,
  its output and its input are free, and the downstream VC has credit for the whole frame (virtual
  cut-through: a frame never stops half-way across a link). A round runs when a stage ends, an
  input, output or VC frees, or a credit arrives when a round could grant or change something
  (``Rounds._credit_wakes``); a frame that lost a round in which others were granted tries again
  one flit time (on the fastest output) later, as a clocked allocator would in its next cycle. One
  round per instant: frames and credits that arrive at an instant whose round has run (they come
  after the timer, ``emu.element``) are allocated at that instant with what the round left, but no
  request that took part in it asks again then (that would be a second allocator iteration moving
  the round-robin pointers).
* **Traversal.** A granted frame leaves ``sw_alloc + traversal`` later, never before its tail could
  follow it at the output's rate; input and output are busy while its flits cross.

Buffers: each input port may also have a shared pool (``pool_bytes``, ``emu.switch.iqpool``): a
frame's first ``buffer`` bytes in its VC buffer, the rest in the pool, or the whole frame in the pool
when its VC buffer is taken. Priority (``emu.switch.iqcut``): copies of high-priority frames are served
first by both allocators, take a VC at the next hop no frame waits in, and may go into a priority-0
QsNet packet on the line at its next segment boundary.

Routing (tables, adaptive policies), broadcast replication, ACK combining, traps and management are
the output-queued switch's (:class:`~emu.switch.forward.SwitchEngine`, whose ``receive`` is this
router's route computation): every frame it would send for an arriving one is a *copy* that must
be allocated; the arriving frame leaves its buffer when its last copy has. Frames the switch makes
by itself later (processing-unit results, link tests, traps on a timer) enter through an internal
port with one unbounded VC.

Adaptive routing policies read the ports through :class:`IQView`: a port's load includes the frames
waiting for it in this router's input buffers, not only those already granted to it.

Credits: per frame when its tail has left the buffer (``credit_release=tail_left``), flit by flit as
each leaves (``per_flit``, BookSim's: a credit frame per flit), or the whole frame's when its head
left (``head_left``). Buffers default to two of the largest frames in the framing of the links into
the router (``emu.build.largest_frame``).

Not modelled: wormhole flow control (a frame that stalls with its flits spread over several routers
needs per-flit events on the links; virtual cut-through is the closest): frames are atomic on the
crossbar and the line, where BookSim interleaves the flits of different VCs. Against BookSim2 the
difference shows on multi-flit packets only (``scripts/router_curves.py --booksim``; issue 44's
figures in ``docs/fabric.md``).
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from dataclasses import dataclass, field

from emu.errors import EngineError
from emu.port import PRIO_OFF
from emu.wire.fabric import FLAG_POOL
from emu.wire.framing import ETHERNET

from . import iqdrr
from .forward import VC_OFF, SwitchEngine, make_switch
from .iqalloc import Allocators
from .iqcore import CoreRound
from .iqcut import SegmentCut
from .iqpool import FLAGS_OFF, InBuffers, OutCredits, parts
from .iqround import INF, Copy, Packet, Rounds
from .iqview import IQView
from .vc import selector

__all__ = ["Copy", "IQView", "InputQueuedEngine", "Packet", "make_iq"]


@dataclass(eq=False)
class InputQueuedEngine(CoreRound, Rounds, Allocators, SegmentCut, SwitchEngine):
    """``SwitchSpec.model = input_queued``; see the module's text."""

    __setattr__ = object.__setattr__
    """Plain stores (the rounds store per frame): its own ``receive`` makes ``plain_table`` None for
    good, so there is nothing for ``SwitchEngine.__setattr__`` to keep."""

    __slots__ = ("_cst", "_crx", "_btimer", "_next", "_rnow", "_granted", "_fresh", "_up", "slot", "timer", "active",
                 "iq_stats", "_tail_wait")
    """The state the timer, credit and receive read and write at every call, in slots (the rest in the
    instance's ``__dict__``): the compiled core (``emu/csrc/iqtimer.h``) reads and writes them at their
    offsets instead of looking them up by name."""

    downstream: list = field(default_factory=list)
    """Per output port: None (the receiver's buffers are unbounded: no credits) or (vcs, bytes per
    VC, credit unit in bytes, bytes of its shared pool)."""
    in_bps: dict = field(default_factory=dict)
    """Line rate of the link into each port."""
    groups_n: int = 1
    """VC groups (classes x dateline halves)."""
    buffer: int = 0
    """Bytes per input VC buffer."""
    pool: int = 0
    """Bytes of each input port's shared pool (``SwitchSpec.pool_bytes``)."""
    eject_ports: frozenset = frozenset()
    """Ports to hosts with VCs to allocate (``SwitchSpec.eject_vcs``): no credits, a VC per packet."""
    prio_ports: frozenset = frozenset()
    """Output ports whose link lets high-priority frames go first (``LinkSpec.priority``)."""
    credit_out: object = None
    """``credit_out(port, vc, nbytes, at[, pool])``: the element sends a credit to the sender on ``port``
    at ``at`` (set by ``emu.element.Element``)."""
    stretch_port: object = None
    """``stretch_port(port, start, d, now)``: the frame that started at ``start`` on ``port`` finishes
    ``d`` later (``emu.switch.iqcut``; set by ``emu.element.Element``)."""
    uncharged: bool = False
    """Set by the element before it hands over a frame that failed its FCS (a QsNet packet, passed
    on): the frame takes no room in the buffers, since its sender gives its credit back itself."""

    def __post_init__(self) -> None:
        super().__post_init__()
        s = self.spec
        self.min_delay_ns = 0  # credit flow control: the lookahead is the links' own latency
        self.fb = s.flit_bytes
        self._V = s.vcs
        self.rc, self.va, self.sa, self.st = s.stages_ns
        self.vct = s.cut_through
        self.islip = s.allocator == "islip"
        self.drr = s.queues.quanta if s.queues is not None else None
        """Per-class weights in switch allocation (``queues.arbiter=drr``: ``emu.switch.iqdrr``), else None."""
        self.iters = s.iterations
        self._btimer = None
        """The switch's own next timer (link tests, processing unit)."""
        self._next = INF
        """The next allocation round."""
        self.iq_stats = {"rounds": 0, "repeats": 0, "va_grants": 0, "sa_grants": 0, "sa_conflicts": 0, "hol_waits": 0}
        self.vc_rule = ("tail_granted", "tail_sent", "tail_credit").index(s.vc_release)
        self.credit_rule = s.credit_release
        self._tail_wait: dict = {}
        """(output, VC) -> when its tail left: VCs waiting for the receiver's tail credit (vc_release=tail_credit)."""
        self._crx = None
        """The compiled core's receive (``CoreRound._core_receive_state``): None until the first frame, False
        when this router is not its plain case (Python's receive runs)."""
        self._cst = None
        """The compiled core's round (``CoreRound._core_state``): None until the first round, False when
        this router is not the plain case (Python runs)."""

    @property
    def ports(self):
        return self.__dict__.get("_view")

    @ports.setter
    def ports(self, view) -> None:  # the element's port view, seen through this router's buffers
        self.__dict__["_view"] = None if view is None else IQView(view, self)
        self._up = None if view is None else view.up

    def setup(self, nports: int, group_select) -> None:
        """Size the state for ``nports`` linked ports (port ``nports`` is the internal one)."""
        V = self.spec.vcs
        self.nports = nports
        self.sel = group_select
        self.q = [[deque() for _ in range(V)] for _ in range(nports)] + [[deque()]]
        self.bufs = InBuffers(nports, V, self.buffer, self.pool, self.name)
        self.in_ready = [0] * (nports + 1)
        self.out_ready = [0] * nports
        G = self.groups_n
        self.oc = OutCredits(self.downstream, nports)
        self.credits = self.oc.vc
        """Per output: credit held per VC of the receiver (None: unbounded); its pool's: ``oc.pool``."""
        self.vc_hold, self.vc_free, self.allowed = [], [], []
        for o in range(nports):
            d = self.downstream[o] if o < len(self.downstream) else None
            if d is None and o in self.eject_ports:
                d = (V, 0, 0, 0)
            if d is None:
                self.vc_hold.append(None)
                self.vc_free.append(None)
                self.allowed.append(None)
                continue
            vcs = d[0]
            self.vc_hold.append([None] * vcs)
            self.vc_free.append([0] * vcs)
            self.allowed.append([[w for w in range(vcs) if w % G == g] or [g % vcs] for g in range(G)])
        self.slot = min((self._ser_out(o, self.fb) for o in self.port_bps), default=1) or 1
        """The next allocation slot after a round with grants: one flit's time on the fastest output."""
        self._granted = False
        self.wait_n = [0] * nports
        self.wait_b = [0] * nports
        self.line: list = [None] * nports
        """Per output: [start, done, modelled bytes, cuttable, copy] of the last frame granted to it."""
        self.arriving = [deque() for _ in range(nports)]
        """Per input: the frames whose tail may still be arriving (a stretch moves the latest's)."""
        """Per output: copies waiting for it in the input buffers, and their bytes."""
        self.wait_vc: dict = {}
        """(output, VC at the next hop) -> (copies, bytes) allocated that VC and not yet granted."""
        self.VMAX = V + 1
        self.active: list[int] = []
        """Keys p * VMAX + v of the non-empty VC buffers, sorted: the fixed order of every scan."""
        self.va_ptr = ([0] * nports, [0] * nports)
        """Per priority class (0, 1), per output: the (input, VC) served next by the VC allocator (a
        class's grants move its own pointer only: ``emu.switch.iqalloc``)."""
        self.in_ptr = ([0] * (nports + 1), [0] * (nports + 1))
        """Per priority class, per input: the VC its switch arbiter serves next (islip: the output,
        class 0's)."""
        self.vc_ptr = [0] * (nports + 1)
        """islip: per input, the VC served next among those toward the output it accepted."""
        self.out_ptr = ([0] * nports, [0] * nports)
        """Per priority class, per output: the input its switch arbiter serves next."""
        self._setup_rounds()
        if type(self).on_timer is not InputQueuedEngine.on_timer:  # (its round inlined: ``_credit_wakes`` reads it)
            self._cw = False
        if self.drr is not None:
            iqdrr.setup(self, self.drr)
        self._lines: dict[int, tuple[int, int, int, int]] = {}
        self._ins: dict[int, tuple[int, int]] = {}

    # -- time on the lines ------------------------------------------------------------------------
    def _ser_out(self, o: int, n: int) -> int:
        return -((-n * 8_000_000_000) // self.port_bps[o])

    def _ser_in(self, p: int, n: int) -> int:
        return -((-n * 8_000_000_000) // self.in_bps[p])

    # -- events -----------------------------------------------------------------------------------
    def receive(self, frame: bytes, port: int, now: int) -> list:
        rx = self._crx
        if rx is None:
            rx = self._crx = self._core_receive_state()
        if rx and (done := rx[0](rx[1], self, frame, port, now)) is not None:
            return done  # (the compiled twin of the lines below took a plain data frame: ``CoreRound``)
        n = self.port_framing.get(port, ETHERNET).length(frame)  # (``mlen``) its modelled length: time on
        key = port << 32 | n  # the line, flits of the buffer
        t = self._ins.get(key)
        if t is None:  # (its whole flits, its tail's time behind its head's), per input and length
            fb = self.fb
            t = self._ins[key] = (-(-n // fb) * fb, self._ser_in(port, n) - self._ser_in(port, min(fb, n)))
        cost, lag = t
        v = frame[VC_OFF] % self._V if len(frame) > VC_OFF else 0
        if self.uncharged:  # damaged on the wire: its header may name the wrong VC, POOL flag
            self.uncharged = False
            a = b = 0
        else:  # (``in_pool`` inline)
            a, b = self.bufs.take(port, v, cost, len(frame) > FLAGS_OFF and bool(frame[FLAGS_OFF] & FLAG_POOL))
        tail = now + lag
        results = SwitchEngine.receive(self, frame, port, now)
        pkt = Packet(port, v, now, tail, cost)
        pkt.vpart, pkt.ppart = a, b
        arr = self.arriving[port]
        while arr and arr[0].tail <= now:
            done = arr.popleft()
            if not done.left:  # out of its buffer and arrived whole: nothing reads its copies again
                done.copies = []  # (and its copies' pkt no longer makes a cycle: freed without the collector)
        arr.append(pkt)
        if results:
            self._file(pkt, results, now, v)
        if not pkt.copies:  # consumed here (or dropped): its room is free at once
            self.bufs.free(port, v, a, b)
            self._credit(port, v, a, b, now)
        else:
            qv = self.q[port][v]
            qv.append(pkt)
            if len(qv) == 1:
                rc_at = pkt.rc_at = (now if self.vct else tail) + self.rc
                bisect.insort(self.active, port * self.VMAX + v)  # (``_activate``)
                heapq.heappush(self._rcq, rc_at * self._RK + port * self.VMAX + v)  # (``_rc_push``)
                if rc_at < self._next:  # (``_wake_at``)
                    self._next = rc_at
                    if self.timer is None or rc_at < self.timer:
                        self.timer = rc_at
            else:
                self.iq_stats["hol_waits"] += 1
        return []

    def _file(self, pkt: Packet, results: list, now: int, v: int) -> None:
        """Split what the switch would send into copies of ``pkt`` and frames it makes later."""
        soon = now + self.spec.processing_delay_ns
        g_in = v % self.groups_n
        sel = self.sel
        copies = pkt.copies
        lines, pf, wait_n, wait_b = self._lines, self.port_framing, self.wait_n, self.wait_b
        for out, frame, at in results:
            if at > soon:  # made later by the switch itself (a processing unit's result): internal port
                self._inject(out, frame, at)
                continue
            g = sel(pkt.port, out, g_in) if sel is not None else g_in
            n = pf.get(out, ETHERNET).length(frame)  # (``mlen``)
            prio = 1 if out in self.prio_ports and len(frame) > PRIO_OFF and frame[PRIO_OFF] else 0
            if prio:
                self._cst = False  # (the compiled round takes priority 0 only: Python's from now on)
            t = lines.get(out << 32 | n)
            if t is None:
                c = self._copy(pkt, out, frame, g, n, prio)
            else:  # (``_copy``'s, its times known)
                c = Copy(pkt, out, frame, g, t[0], prio, n)
                c.ser, c.lag, c.vpart = t[1], t[2], t[3]
            c.rank = len(copies)
            copies.append(c)
            wait_n[out] += 1
            wait_b[out] += n
        pkt.left = len(copies)

    def need(self, out: int, n: int) -> int:
        """Credit a frame of ``n`` bytes (FCS included) takes at the receiver on ``out`` (0: none)."""
        d = self.downstream[out] if out < len(self.downstream) else None
        return 0 if d is None else -(-n // d[2]) * d[2]

    def _need(self, out: int, n: int) -> int:
        """``need``, refused when it can never fit the receiver's VC buffer and pool."""
        need = self.need(out, n)
        d = self.downstream[out] if out < len(self.downstream) else None
        if d is not None and need > d[1] + d[3]:
            raise EngineError(f"{self.name}: a {n}-byte frame needs {need} bytes of buffer, more than a VC buffer "
                              f"and the pool ({d[1]} + {d[3]} bytes) of the router on port {out}: raise "
                              "switch.vc_buffer_bytes or pool_bytes, or lower host.mtu_bytes")
        return need

    def _copy(self, pkt: Packet, out: int, frame, group: int, n: int, prio: int) -> Copy:
        """A copy of ``pkt`` of modelled length ``n`` for ``out``, with its times on that line."""
        key = out << 32 | n
        t = self._lines.get(key)
        if t is None:  # (need, time on the line, from its head's start to its tail's, its part for the
            ser = self._ser_out(out, n)  # receiver's VC buffer), per output and length
            need = self._need(out, n)
            d = self.downstream[out] if out < len(self.downstream) else None
            t = self._lines[key] = (need, ser, ser - self._ser_out(out, min(self.fb, n)),
                                    need if d is None or need < d[1] else d[1])
        c = Copy(pkt, out, frame, group, t[0], prio, n)
        c.ser, c.lag, c.vpart = t[1], t[2], t[3]
        return c

    def _inject(self, out: int, frame, at: int) -> None:
        pkt = Packet(self.nports, 0, at, at, 0)
        n = self.mlen(out, frame)
        pkt.copies.append(self._copy(pkt, out, frame, 0, n, 0))
        self.wait_n[out] += 1
        self.wait_b[out] += n
        pkt.left = 1
        pkt.rc_at = at
        qv = self.q[self.nports][0]
        keys = [p.head for p in qv]
        i = bisect.bisect_right(keys, at)
        if i == 0 and qv:  # never ahead of a head already in allocation
            i = 1
        qv.insert(i, pkt)
        if len(qv) == 1:
            pkt.rc_at = at
            self._activate(self.nports, 0)
            self._rc_push(pkt)
        self._wake_at(max(qv[0].rc_at, at))  # (a head already waiting: not before now)

    def on_credit(self, port: int, vc: int, nbytes: int, now: int, pool: bool = False, frames: int = 0) -> None:
        """A credit from the receiver on ``port`` (for its pool when ``pool``; ``frames`` left its
        queue of ``vc`` with it)."""
        credits = self.credits
        cr = credits[port] if port < len(credits) else None
        if cr is None:
            return
        if frames:
            self.oc.frames[port][vc % len(cr)] -= frames
        if pool:
            wrong = self.oc.credit(port, vc, nbytes, pool)
            if wrong:
                raise EngineError(f"{self.name}: port {port} VC {vc}: {wrong}")
        else:  # (``OutCredits.credit``'s VC case)
            w = vc % len(cr)
            cr[w] += nbytes
            if cr[w] > self.oc.cap[port][0]:
                raise EngineError(f"{self.name}: port {port} VC {vc}: credit above the receiver's buffer "
                                  f"({cr[w]} > {self.oc.cap[port][0]} bytes)")
        if self._tail_wait:
            w = vc % len(cr)
            key = (port, w)
            if key in self._tail_wait and self.oc.empty(port, w):  # its tail's credit: the VC is free --
                # from the next slot when this instant's round has run (its requests asked then)
                t = max(now + (self.slot if now == self._rnow else 0), self._tail_wait.pop(key))
                self.vc_free[port][w] = t
                self._vc_freed(port, w, t)
        if now < self._next and self._credit_wakes(now):  # (``_wake_at``) a copy waiting for this credit may go
            self._next = now  # now (``Rounds._round``: once per instant)
            if self.timer is None or now < self.timer:
                self.timer = now

    def lost(self, port: int, nbytes: int, vc: int, now: int, pool: bool = False) -> None:
        """A frame for ``port``'s buffer never entered it (lost or damaged on the wire): its credit
        goes back at once, to where its sender counted it (``pool``: its POOL flag)."""
        fb = self.fb
        self._credit(port, vc % self.spec.vcs, *parts(-(-nbytes // fb) * fb, self.buffer, pool), now)

    def resync_parts(self, port: int, nbytes: int, pool: bool) -> tuple[int, int, int]:
        """(VC bytes, pool bytes, frames) of credit a frame of modelled length ``nbytes`` this router
        sent on ``port`` took (lost on the wire: its credit comes back by resynchronisation); frames
        are counted toward a receiver with a pool."""
        need = self.need(port, nbytes)
        if not need:
            return 0, 0, 0
        return (*parts(need, self.downstream[port][1], pool), 1 if self.downstream[port][3] else 0)

    def _credit_left(self, pkt: Packet) -> None:
        """``pkt`` has left its buffer (its last copy granted): its room back to the sender, as
        ``credit_release`` says -- per frame when its tail left (or its head), or a flit at a time."""
        rule = self.credit_rule
        if rule == "tail_left":
            self._credit(pkt.port, pkt.vc, pkt.vpart, pkt.ppart, pkt.exit)
        elif rule == "head_left":
            self._credit(pkt.port, pkt.vc, pkt.vpart, pkt.ppart, pkt.hexit)
        else:  # per flit: flit k of F when it has left, evenly from the head's leaving to the tail's
            fb, a = self.fb, pkt.vpart
            F = a // fb
            h, span = pkt.hexit, pkt.exit - pkt.hexit
            for k in range(1, F):
                self._credit(pkt.port, pkt.vc, fb, 0, h + span * k // F)
            self._credit(pkt.port, pkt.vc, a - (F - 1) * fb if F else a, pkt.ppart, pkt.exit)

    def _credit(self, port: int, vc: int, a: int, b: int, at: int) -> None:
        if port < self.nports and self.credit_out is not None:
            f = 1 if self.pool else 0  # (with a pool a full VC credit no longer says no frame waits there)
            if a:
                self.credit_out(port, vc, a, at + self.spec.credit_delay_ns, False, f)
            if b:
                self.credit_out(port, vc, b, at + self.spec.credit_delay_ns, True, 0 if a else f)

    def on_timer(self, now: int) -> list:
        if self._btimer is not None and self._btimer <= now:
            for o, frame, at in super().on_timer(now):
                self._inject(o, frame, max(at, now))
        out = []
        cs = self._cst
        if cs is None:
            cs = self._cst = self._core_state()
        if self._next <= now:  # (``Rounds._round``, inline: one call less per round)
            again = self._rnow == now
            self._rnow = now
            self.iq_stats["repeats" if again else "rounds"] += 1
            if cs and self.active:  # the plain case: the compiled twin of the lines below
                out = cs[0](cs[1], cs[2], self._fresh, now, again, self._up, self.credit_out)
                self._granted = bool(out) or (again and self._granted)
            elif self.active:
                rcq = self._rcq
                if rcq and rcq[0] < (now + 1) * self._RK:
                    self._rc_done(now)
                if self._va:
                    self._va_round(now, again)
                if self._sa:
                    out = self._sa_round(now, again)
                self._granted = bool(out) or (again and self._granted)
        if cs:  # (``_retime``'s compiled twin)
            t = self._next = cs[3](cs[1], cs[2], self._fresh, now, self._granted, self.slot)
            b = self._btimer
            if b is not None and b < t:
                t = b
            self.timer = None if t >= INF else t
        else:
            self._retime(now)
        return out

    def on_link_change(self, port: int, up: bool, now: int) -> list:
        for o, frame, at in super().on_link_change(port, up, now):
            self._inject(o, frame, max(at, now))
        return []

    def _set_timer(self) -> None:  # the switch's own timers (link tests, processing unit)
        super()._set_timer()
        self._btimer = self.timer
        if self._next < INF and (self.timer is None or self._next < self.timer):
            self.timer = self._next

    def _wake_at(self, t: int) -> None:
        """An allocation round at ``t`` at the latest."""
        if t < self._next:
            self._next = t
            if self.timer is None or t < self.timer:
                self.timer = t

    def _core_methods_plain(self) -> bool:
        """Are the round's credit and timer methods this class's own (``CoreRound._core_plain``)?"""
        cls = type(self)
        return all(getattr(cls, n) is getattr(InputQueuedEngine, n) for n in ("_credit_left", "_credit", "on_timer"))

    def _core_receive_methods_plain(self) -> bool:
        """Are the receive's methods this class's own (``CoreRound._core_receive_state``)?"""
        cls = type(self)
        return all(getattr(cls, n) is getattr(InputQueuedEngine, n) for n in ("receive", "_file", "_copy")) and \
            type(self.bufs) is InBuffers

    def _activate(self, p: int, v: int) -> None:
        bisect.insort(self.active, p * self.VMAX + v)

    def extra_stats(self) -> dict:
        out = super().extra_stats()
        out["router"] = dict(self.iq_stats, peak_vc_bytes=[list(r) for r in self.bufs.peak])
        if self.drr is not None:
            out["router"]["class_grants"] = list(self.class_grants)
        if self.pool:
            out["router"]["peak_pool_bytes"] = list(self.bufs.pool_peak)
        return out


def make_iq(node, topology, cache: dict) -> InputQueuedEngine:
    """The input-queued router of ``node``: its downstream buffers and line rates from the topology."""
    from emu.build import finite_buffers, largest_frames
    from emu.config import ConfigError

    spec = node.spec
    G = spec.vc_groups
    if spec.vcs < G:
        raise ConfigError(f"{node.name}: vc_policy={spec.vc_policy} with {spec.classes} class(es) needs {G} VC groups, "
                          f"but switch.vcs={spec.vcs}: set switch.vcs to at least {G}")
    nb = cache.get("neighbours")
    if nb is None:
        nb = cache["neighbours"] = topology.neighbours()
    big = cache.get("largest_frames")
    if big is None:  # (per node, the framing of the links into it: its buffers' bytes)
        big = cache["largest_frames"] = largest_frames(topology)
    largest_at = big.__getitem__
    largest = largest_at(node.name)
    down: list = [None] * topology.nports(node.name)
    in_bps = {}
    prio_ports, eject = set(), set()
    for p, v, _vp, lk in nb[node.name]:
        in_bps[p] = lk.spec.bandwidth_bps
        if lk.spec.priority and spec.queues.arbiter != "drr":  # (weights: no class is strict, emu.switch.iqdrr)
            prio_ports.add(p)
        peer = topology.nodes[v]
        ps = peer.spec
        if getattr(ps, "input_queued", False):
            down[p] = (ps.vcs, ps.buffer_bytes(largest_at(v)), ps.flit_bytes, ps.pool_bytes)
        elif finite_buffers(peer):
            down[p] = (ps.vcs, ps.vc_buffer_bytes, 1, 0)
        elif spec.eject_vcs and peer.kind == "host":
            eject.add(p)
    buffer = spec.buffer_bytes(largest)
    if buffer + spec.pool_bytes < -(-largest // spec.flit_bytes) * spec.flit_bytes:
        raise ConfigError(f"{node.name}: switch.vc_buffer_bytes={buffer} (+ pool_bytes={spec.pool_bytes}) cannot hold a "
                          f"{largest}-byte frame (host.mtu_bytes + headers): a VC buffer and the pool must hold the "
                          f"largest frame whole; raise vc_buffer_bytes or pool_bytes to at least "
                          f"{-(-largest // spec.flit_bytes) * spec.flit_bytes} bytes together or lower host.mtu_bytes")
    eng = InputQueuedEngine(node.name, node.id, spec, topology.routes.get(node.name),
                            candidates=topology.candidates.get(node.name, []),
                            groups=topology.group_ports.get(node.name, {}),
                            downstream=down, in_bps=in_bps, groups_n=G, buffer=buffer, pool=spec.pool_bytes,
                            prio_ports=frozenset(prio_ports), eject_ports=frozenset(eject))
    eng.sel = selector(spec.vc_policy, node, G)
    make_switch(node, topology, cache, engine=eng)
    eng._btimer = eng.timer  # the switch's own first timer (link bring-up), set by make_switch
    eng.setup(topology.nports(node.name), eng.sel)
    return eng
