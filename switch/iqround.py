"""The input-queued router's allocation round (mixed into :class:`emu.switch.iq.InputQueuedEngine`;
the rules are in that module's text): VC allocation, switch allocation, grants, and when the next
round is."""

from __future__ import annotations

from .forward import VC_OFF
from .iqcut import cuttable
from .iqpool import mark

INF = 1 << 62


class Packet:
    """A frame in an input VC buffer."""

    __slots__ = ("port", "vc", "head", "tail", "cost", "copies", "left", "exit", "rc_at", "vpart", "ppart")

    def __init__(self, port: int, vc: int, head: int, tail: int, cost: int) -> None:
        self.port, self.vc, self.head, self.tail, self.cost = port, vc, head, tail, cost
        self.vpart, self.ppart = cost, 0
        """Its bytes in its VC buffer and in the port's pool (``emu.switch.iqpool``)."""
        self.copies: list[Copy] = []
        self.left = 0
        self.exit = 0
        """When its last granted copy's tail has left the buffer."""
        self.rc_at = INF
        """When route computation is over (set when it reaches the head of its VC)."""


class Copy:
    """One frame the router sends because of a packet: its output, VC and progress."""

    __slots__ = ("pkt", "out", "frame", "group", "ovc", "need", "sa_at", "granted", "prio")

    def __init__(self, pkt: Packet, out: int, frame, group: int, need: int, prio: int = 0) -> None:
        self.pkt, self.out, self.frame, self.group, self.need = pkt, out, frame, group, need
        self.prio = prio
        """1: a high-priority frame (fabric header prio > 0, ``link.priority`` on its output): the
        allocators serve it before every priority-0 one."""
        self.ovc = -1
        self.sa_at = INF
        self.granted = False


class Rounds:
    """The allocation round and its timing."""

    # -- allocation -------------------------------------------------------------------------------
    def _heads(self):
        """(input, VC, head packet) of every non-empty VC buffer, in (input, VC) order."""
        q, vm = self.q, self.VMAX
        for key in self.active:
            p, v = divmod(key, vm)
            yield p, v, q[p][v][0]

    def _round(self, now: int) -> list:
        self.iq_stats["rounds"] += 1
        heads = list(self._heads())
        if not heads:
            return []
        self._allocate_vcs(heads, now)
        out = self._allocate_switch(heads, now)
        self._granted = bool(out)
        return out

    def _allocate_vcs(self, heads, now: int) -> None:
        by_out: dict[int, list] = {}
        for _p, _v, pkt in heads:
            if pkt.rc_at > now:
                continue
            for c in pkt.copies:
                if c.ovc < 0:
                    by_out.setdefault(c.out, []).append(c)
        V = self.spec.vcs + 1
        N = (self.nports + 1) * V
        for o in sorted(by_out):
            reqs = by_out[o]
            hold = self.vc_hold[o]
            if hold is None:  # unbounded receiver (a host): no VCs to allocate
                for c in reqs:
                    c.ovc = c.group
                    c.sa_at = now + self.va
                continue
            ptrs = self.va_ptr
            reqs.sort(key=lambda c: (-c.prio, (c.pkt.port * V + c.pkt.vc - ptrs[c.prio][o]) % N))
            free_at = self.vc_free[o]
            for c in reqs:
                w = next((w for w in self.allowed[o][c.group] if hold[w] is None and free_at[w] <= now
                          and (not c.prio or self.oc.empty(o, w))), None)  # high priority: a VC no frame waits in
                if w is None and c.prio:
                    w = next((w for w in self.allowed[o][c.group] if hold[w] is None and free_at[w] <= now), None)
                if w is None:
                    continue
                hold[w] = c
                c.ovc = w
                c.sa_at = now + self.va
                n, b = self.wait_vc.get((o, w), (0, 0))
                self.wait_vc[(o, w)] = (n + 1, b + self.mlen(o, c.frame))
                ptrs[c.prio][o] = (c.pkt.port * V + c.pkt.vc + 1) % N
                self.iq_stats["va_grants"] += 1

    def _ready(self, c: Copy, now: int) -> bool:
        if c.granted or c.ovc < 0 or c.sa_at > now:
            return False
        if self.out_ready[c.out] > now and (not c.prio or self._cut_at(c, self._t0(c, now)) is None):
            return False
        return self.credits[c.out] is None or self.oc.place(c.out, c.ovc, c.need) is not None

    def _allocate_switch(self, heads, now: int) -> list:
        # requests: per input, its ready copies in VC order
        req: dict[int, list] = {}
        for p, v, pkt in heads:
            if self.in_ready[p] > now:
                continue
            for c in pkt.copies:
                if self._ready(c, now):
                    req.setdefault(p, []).append((v, c))
        if not req:
            return []
        grants = self._islip(req) if self.islip else self._separable(req)
        return [self._grant(c, now) for c in grants]

    def _grant(self, c: Copy, now: int) -> tuple[int, bytes, int]:
        self.iq_stats["sa_grants"] += 1
        o, pkt = c.out, c.pkt
        n = self.mlen(o, c.frame)
        self.wait_n[o] -= 1
        self.wait_b[o] -= n
        ser = self._ser_out(o, n)
        depart = self._t0(c, now)  # (the tail never leaves before it came)
        busy = depart + ser - self.sa - self.st
        if self.out_ready[o] > now:  # high priority, into the packet on the line at its next boundary
            depart = self._cut_at(c, depart)
            busy = depart + ser - self.sa - self.st
            self._hold_longer(self.line[o][4], ser, depart)
            self.iq_stats["cut_in"] = self.iq_stats.get("cut_in", 0) + 1
        else:
            self.out_ready[o] = busy
            self.line[o] = [depart, depart + ser, n, o in self.prio_ports and cuttable(c.frame), c, []]
        self.in_ready[pkt.port] = busy
        cr = self.credits[o]
        pool = False
        if cr is not None:
            pool = self.oc.place(o, c.ovc, c.need)
            view = self.ports
            if view is None or view.up(o, depart):  # (a frame the port drops takes no room downstream)
                self.oc.debit(o, c.ovc, c.need, pool)
                if self.oc.cap[o][1]:
                    self.oc.frames[o][c.ovc] += 1
            self.vc_hold[o][c.ovc] = None
            k, b = self.wait_vc[(o, c.ovc)]
            if k == 1:
                del self.wait_vc[(o, c.ovc)]
            else:
                self.wait_vc[(o, c.ovc)] = (k - 1, b - n)
            self.vc_free[o][c.ovc] = depart + ser
        c.granted = True
        frame = bytearray(c.frame)
        if cr is not None or self.sel is not None:
            frame[VC_OFF] = c.ovc
        if self.pool or pool:  # (the POOL flag is link-local: set or cleared for the next link)
            mark(frame, pool)
        pkt.left -= 1
        leaves = depart - self.st + ser
        if leaves > pkt.exit:
            pkt.exit = leaves
        if pkt.left == 0:
            self._pop(pkt, busy)
        return o, bytes(frame), depart

    def _pop(self, pkt: Packet, t_next: int) -> None:
        qv = self.q[pkt.port][pkt.vc]
        qv.popleft()
        if pkt.port < self.nports:
            self.bufs.free(pkt.port, pkt.vc, pkt.vpart, pkt.ppart)
            self._credit(pkt.port, pkt.vc, pkt.vpart, pkt.ppart, pkt.exit)
        if qv:
            nxt = qv[0]
            base = nxt.head if self.vct or pkt.port == self.nports else nxt.tail
            nxt.rc_at = max(base, t_next) + (self.rc if pkt.port < self.nports else 0)
        else:
            self.active.remove(pkt.port * self.VMAX + pkt.vc)

    # -- the next allocation round ----------------------------------------------------------------
    def _retime(self, now: int) -> None:
        """After a round at ``now``: the next round is the earliest time a waiting copy's stage
        is over, or -- for a copy that lost a round, waits for a VC or for credit -- an input, an
        output or a VC frees (a credit, a new frame or a link change wakes the router itself)."""
        t = INF
        waiting = False
        for p, _v, pkt in self._heads():
            rc = pkt.rc_at
            for c in pkt.copies:
                if c.granted:
                    continue
                waiting = True
                if rc > now:
                    cand = rc
                elif c.ovc < 0:
                    continue  # a VC of its group frees: below
                else:
                    cand = c.sa_at
                    r = self.in_ready[p]
                    if r > cand:
                        cand = r
                    r = self.out_ready[c.out]
                    if r > cand:
                        if c.prio and self._cut_at(c, cand) is not None:
                            r = cand  # it may go into the packet on the line: at its round
                        cand = r
                    if cand <= now:  # lost the round (or no credit: a credit wakes it)
                        if self._granted:  # the others' grants changed what it competes with: next slot
                            if self.credits[c.out] is None or self.oc.place(c.out, c.ovc, c.need) is not None:
                                cand = now + self.slot
                        if cand <= now:
                            continue
                if cand < t:
                    t = cand
        if waiting:
            for r in self.in_ready:
                if now < r < t:
                    t = r
            for r in self.out_ready:
                if now < r < t:
                    t = r
            for fa in self.vc_free:
                if fa is not None:
                    for r in fa:
                        if now < r < t:
                            t = r
        self._next = t
        b = self._btimer
        if b is not None and b < t:
            t = b
        self.timer = None if t >= INF else t
