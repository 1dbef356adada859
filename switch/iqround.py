"""The input-queued router's allocation round (mixed into :class:`emu.switch.iq.InputQueuedEngine`;
the rules are in that module's text): VC allocation, switch allocation, grants, and when the next
round is.

The round is event-driven: it looks only at the heads that may be allocated, kept as their state
changes -- heads whose route computation is not over (a heap by ``rc_at``), copies waiting for a VC
(per output; an output with no VC free for them is not looked at again until one frees), copies
holding a VC (per output; a busy output's are passed over at once unless one is high priority) --
and the next round's time is kept from a heap of the times inputs, outputs and VCs free. It decides exactly what a scan of every waiting head decides
(``_allocate_vcs`` keeps that scan's form for the allocator's own tests): the same grants in the
same order at the same times, round for round.

This code is the specification of the compiled twin ``emu._core.iq_round`` / ``iq_retime``
(``emu/csrc/iq.h``), which runs the rounds of the plain case (``CoreRound._core_plain``, ``emu.switch.iqcore``: round robin,
no per-class weights, no shared pools, priority-0 copies) on the same lists and dicts; any other
configuration runs here. ``tests/test_iq_core.py`` runs both on the same traffic: same figures,
same capture bytes.
"""

from __future__ import annotations

import heapq

from .forward import VC_OFF
from .iqcut import cuttable
from .iqdrr import drr_separable
from .iqpacket import INF, Copy, Packet
from .iqpool import FLAGS_OFF, in_pool, mark

__all__ = ["INF", "Copy", "Packet", "Rounds"]


class Rounds:
    """The allocation round and its timing (event-driven: see the module's text)."""

    def _setup_rounds(self) -> None:
        n = self.nports
        self._V1 = self.spec.vcs + 1
        self._N = (n + 1) * self._V1
        """The VC allocator's rotation: (input, VC) as input * (vcs + 1) + VC, modulo N."""
        self._RK = (n + 1) * self.VMAX
        self._rcq: list[int] = []
        """rc_at * _RK + input * VMAX + VC of the heads whose route computation is not yet seen over (ints:
        no garbage for the collector)."""
        self._va: dict[int, list] = {}
        """Per output: the copies waiting for a VC there (their heads' route computation over)."""
        self._va_chk: list[int] = [0] * n
        """Per output: no VC can be given there before this time (none free for its requests); 0: no bound."""
        self._sa: dict[int, list] = {}
        """Per output: the copies holding a VC there and not yet granted (none: no entry)."""
        self._sa_prio: dict[int, int] = {}
        """Per output: how many of those are high-priority (they may cut into a busy output's packet)."""
        self._fresh: list = []
        """Copies given a VC whose switch allocation stage may not be over (``sa_at`` in the future)."""
        self._OUT = n + 1
        self._VCF = 2 * n + 2
        self._VS = max((len(f) for f in self.vc_free if f is not None), default=0) + 1
        """(more than the VCs of any receiver: they need not be this router's)"""
        self._RS = self._VCF + n * self._VS
        self._rnow = -1
        """The time of the last allocation round."""
        self._rel: list[int] = []
        """time * _RS + slot of every time an input (slot p), an output (``_OUT + o``) or a VC at an output
        (``_VCF + o * _VS + w``) frees, pushed as they are set; stale ones are dropped when seen."""
        cls = type(self)
        self._cw = self.vc_rule != 2 and all(getattr(cls, m) is getattr(Rounds, m) for m in _ROUND_METHODS)
        """May a credit skip the round a credit would wake when it can change nothing (``_credit_wakes``)?"""

    # -- the heads' state ---------------------------------------------------------------------------
    def _rc_push(self, pkt: Packet) -> None:
        """``pkt`` is at the head of its VC buffer now (its ``rc_at`` set)."""
        heapq.heappush(self._rcq, pkt.rc_at * self._RK + pkt.port * self.VMAX + pkt.vc)

    def _rc_done(self, now: int) -> None:
        """Heads whose route computation is over by ``now``: their copies ask for a VC."""
        q = self._rcq
        va, chk = self._va, self._va_chk
        K, vm, bufs = self._RK, self.VMAX, self.q
        due = (now + 1) * K
        while q and q[0] < due:
            p, v = divmod(heapq.heappop(q) % K, vm)
            pkt = bufs[p][v][0]
            for c in pkt.copies:
                o = c.out
                r = va.get(o)
                if r is None:
                    va[o] = [c]
                else:
                    r.append(c)
                chk[o] = 0

    def _to_sa(self, c: Copy, now: int) -> None:
        """``c`` was given its VC at ``now``."""
        o = c.out
        lst = self._sa.get(o)
        if lst is None:
            self._sa[o] = [c]
        else:
            lst.append(c)
        if c.prio:
            self._sa_prio[o] = self._sa_prio.get(o, 0) + 1
        if c.sa_at > now:
            self._fresh.append(c)

    def _released(self, slot: int, t: int) -> None:
        heapq.heappush(self._rel, t * self._RS + slot)

    def _release_at(self, slot: int) -> int:
        """The time now held by ``slot`` of ``_rel``."""
        if slot < self._OUT:
            return self.in_ready[slot]
        if slot < self._VCF:
            return self.out_ready[slot - self._OUT]
        o, w = divmod(slot - self._VCF, self._VS)
        return self.vc_free[o][w]

    # -- allocation -------------------------------------------------------------------------------
    def _round(self, now: int) -> list:
        """The allocation round at ``now``: one per instant. What arrives at an instant whose round has
        run (a frame, a credit: they come after the timer, ``emu.element``) is allocated at that
        instant too, with what the round left (inputs, outputs, VCs), but nothing that asked in the
        round asks again at the same instant -- no hidden second iteration of the allocators, whose
        pointers move for the new requests' grants only."""
        again = self._rnow == now
        self._rnow = now
        self.iq_stats["repeats" if again else "rounds"] += 1
        if not self.active:
            return []
        if self._rcq and self._rcq[0] < (now + 1) * self._RK:
            self._rc_done(now)
        if self._va:
            self._va_round(now, again)
        out = self._sa_round(now, again) if self._sa else []
        self._granted = bool(out) or (again and self._granted)
        return out

    def _va_round(self, now: int, again: bool = False) -> None:
        """VC allocation at the outputs with requests (each output's on its own: their order does not
        matter); ``again``: a second round at ``now``, for the requests that did not ask in the first."""
        va, chk = self._va, self._va_chk
        for o in list(va):
            reqs = va[o]
            if chk[o] > now:
                continue  # no VC there has freed since its requests found none
            ask = reqs
            if again:
                ask = [c for c in reqs if c.va_try != now]
                if not ask:
                    continue
            for c in ask:
                c.va_try = now
            if self._va_output(o, ask if again else reqs, now):
                left = []
                sa, fresh = self._sa, self._fresh
                for c in reqs:
                    if c.ovc < 0:
                        left.append(c)
                        continue
                    lst = sa.get(o)  # (``_to_sa``)
                    if lst is None:
                        sa[o] = [c]
                    else:
                        lst.append(c)
                    if c.prio:
                        self._sa_prio[o] = self._sa_prio.get(o, 0) + 1
                    if c.sa_at > now:
                        fresh.append(c)
                if not left:
                    del va[o]
                    continue
                va[o] = left
            hold, free_at = self.vc_hold[o], self.vc_free[o]
            t = INF
            for w, h in enumerate(hold):
                if h is None and now < free_at[w] < t:
                    t = free_at[w]
            chk[o] = t

    def _va_output(self, o: int, reqs: list, now: int) -> bool:
        """Output ``o``'s VC allocator over its requests ``reqs`` (sorted in place when more than one
        VC is free); True when one was given. In the order of priority class, then rotating from the
        class's pointer over (input, VC) (the pointers as they were when the round began): each takes
        the first free VC of its group -- a high-priority one a VC no frame waits in, if one is free."""
        hold = self.vc_hold[o]
        va_at = now + self.va
        if hold is None:  # unbounded receiver (a host): no VCs to allocate
            for c in reqs:
                c.ovc = c.group
                c.sa_at = va_at
            return True
        free_at = self.vc_free[o]
        free = [w for w, h, f in zip(range(len(hold)), hold, free_at) if h is None and f <= now]
        if not free:
            return False
        nfree, w1 = len(free), free[-1]
        ptrs = self.va_ptr
        V, N = self._V1, self._N
        allowed = self.allowed[o]
        if nfree == 1 and len(reqs) > 1:  # the first in that order whose group may take it
            p0, p1 = ptrs[0][o], ptrs[1][o]
            best, bk = None, 2 * N
            for c in reqs:
                if w1 in allowed[c.group]:
                    k = (c.pkt.port * V + c.pkt.vc - p1) % N if c.prio else N + (c.pkt.port * V + c.pkt.vc - p0) % N
                    if k < bk:
                        best, bk = c, k
            if best is None:
                return False
            reqs = [best]
        elif len(reqs) > 1:
            reqs.sort(key=lambda c: (-c.prio, (c.pkt.port * V + c.pkt.vc - ptrs[c.prio][o]) % N))
        given = False
        for c in reqs:
            w = -1
            for x in allowed[c.group]:
                if hold[x] is None and free_at[x] <= now:
                    if not c.prio or self.credits[o] is None or self.oc.empty(o, x):  # high priority: a VC no frame waits in
                        w = x
                        break
                    if w == -1:
                        w = -2 - x  # the first free one, for a high-priority copy that finds none empty
            if w < -1:
                w = -2 - w
            if w < 0:
                continue
            hold[w] = c
            c.ovc = w
            c.sa_at = va_at
            n, b = self.wait_vc.get((o, w), (0, 0))
            self.wait_vc[(o, w)] = (n + 1, b + c.n)
            ptrs[c.prio][o] = (c.pkt.port * V + c.pkt.vc + 1) % N
            self.iq_stats["va_grants"] += 1
            given = True
            nfree -= 1
            if not nfree:
                break
        return given

    def _ready(self, c: Copy, now: int) -> bool:
        """May ``c`` (holding a VC, at a free input) be granted at ``now``?"""
        if c.granted or c.ovc < 0 or c.sa_at > now:
            return False
        o = c.out
        if self.out_ready[o] > now and (not c.prio or self._cut_at(c, self._t0(c, now)) is None):
            return False
        return self.credits[o] is None or self.oc.place(o, c.ovc, c.need) is not None

    def _sa_round(self, now: int, again: bool = False) -> list:
        """Switch allocation among the copies that may go at ``now``: per input, its ready copies in
        VC order (then in their packet's order), as the scan of the heads finds them."""
        req: dict[int, list] = {}
        in_ready, out_ready, credits, pools = self.in_ready, self.out_ready, self.credits, self.oc.pool
        sa_prio = self._sa_prio
        for o, lst in self._sa.items():
            busy = out_ready[o] > now
            if busy and not sa_prio.get(o):
                continue  # (only a high-priority copy may go into the packet on its line)
            cr = credits[o]
            for c in lst:
                if c.sa_at > now or (again and c.sa_try == now):
                    continue
                p = c.pkt.port
                if in_ready[p] > now:
                    continue
                if busy and (not c.prio or self._cut_at(c, self._t0(c, now)) is None):
                    continue
                if cr is not None and (cr[c.ovc] < c.vpart or pools[o] < c.need - c.vpart) and pools[o] < c.need:
                    continue  # no room for it downstream (``OutCredits.place`` is None)
                rq = req.get(p)
                if rq is None:
                    req[p] = [c]
                else:
                    rq.append(c)
        if not req:
            return []
        for p, rq in req.items():
            if len(rq) > 1:
                for c in rq:
                    c.sa_try = now
                rq.sort(key=_vc_rank)
                req[p] = [(c.pkt.vc, c) for c in rq]
            else:
                c = rq[0]
                c.sa_try = now
                req[p] = [(c.pkt.vc, c)]
        grants = self._islip(req) if self.islip else self._separable(req) if self.drr is None else drr_separable(self, req)
        grant = self._grant
        return [grant(c, now) for c in grants]

    def _grant(self, c: Copy, now: int) -> tuple[int, bytes, int]:
        stats = self.iq_stats
        stats["sa_grants"] += 1
        o, pkt = c.out, c.pkt
        n, ser = c.n, c.ser
        self.wait_n[o] -= 1
        self.wait_b[o] -= n
        st = self.st
        depart = now + self.sa + st  # (_t0: the tail never leaves before it came)
        if self.vct and pkt.tail - c.lag > depart:
            depart = pkt.tail - c.lag
        lead = ser - self.sa - st
        rel, RS = self._rel, self._RS
        out_ready = self.out_ready
        if out_ready[o] > now:  # high priority, into the packet on the line at its next boundary
            depart = self._cut_at(c, depart)
            self._hold_longer(self.line[o][4], ser, depart)
            stats["cut_in"] = stats.get("cut_in", 0) + 1
        else:
            out_ready[o] = depart + lead
            heapq.heappush(rel, (depart + lead) * RS + self._OUT + o)
            self.line[o] = [depart, depart + ser, n, o in self.prio_ports and cuttable(c.frame), c, []]
        busy = depart + lead
        p = pkt.port
        self.in_ready[p] = busy
        heapq.heappush(rel, busy * RS + p)
        w = c.ovc
        cr = self.credits[o]
        pool = False
        debited = False
        if cr is not None:
            oc = self.oc
            need, head = c.need, c.vpart
            pools = oc.pool
            pool = not (cr[w] >= head and pools[o] >= need - head)  # (OutCredits.place: it was ready)
            up = self._up
            if up is None or up(o, depart):  # (a frame the port drops takes no room downstream: OutCredits.debit)
                debited = True
                if pool:
                    pools[o] -= need
                else:
                    cr[w] -= head
                    pools[o] -= need - head
                if oc.cap[o][1]:
                    oc.frames[o][w] += 1
        hold = self.vc_hold[o]
        if hold is not None:
            hold[w] = None
            key = (o, w)
            wait_vc = self.wait_vc
            k, b = wait_vc[key]
            if k == 1:
                del wait_vc[key]
            else:
                wait_vc[key] = (k - 1, b - n)
            rule = self.vc_rule
            if rule == 0:  # its tail flit wins switch allocation (the head's grant, lag later)
                t = depart - st + c.lag
            elif rule == 2 and debited:  # the receiver's credit for its tail (``on_credit``)
                t = INF
                self._tail_wait[key] = depart + ser
            else:  # its tail has left on the line
                t = depart + ser
            self.vc_free[o][w] = t
            if t < INF:  # (``_vc_freed``)
                heapq.heappush(rel, t * RS + self._VCF + o * self._VS + w)
                chk = self._va_chk
                if chk[o] > t:
                    chk[o] = t  # its VC is free for the requests there then
        c.granted = True
        lst = self._sa[o]
        if len(lst) == 1:
            del self._sa[o]
        else:
            lst.remove(c)
        if c.prio:
            self._sa_prio[o] -= 1
        frame = c.frame
        setvc = cr is not None or self.sel is not None
        setpool = self.pool or pool  # (the POOL flag is link-local: set or cleared for the next link)
        if type(frame) is not bytes or (setvc and frame[VC_OFF] != w) or \
                (setpool and len(frame) > FLAGS_OFF and in_pool(frame) != pool):  # (else its bytes as they are)
            frame = bytearray(frame)
            if setvc:
                frame[VC_OFF] = w
            if setpool:
                mark(frame, pool)
            frame = bytes(frame)
        pkt.left -= 1
        leaves = depart - st + ser
        if leaves > pkt.exit:
            pkt.exit = leaves
        if depart - st > pkt.hexit:
            pkt.hexit = depart - st
        if pkt.left == 0:
            self._pop(pkt, busy)
            if pkt.tail <= now:  # arrived whole: no stretch reaches it, nothing reads its copies again
                pkt.copies = []  # (no Packet-Copy cycle left for the collector)
        return o, frame, depart

    def _vc_freed(self, o: int, w: int, t: int) -> None:
        """VC ``w`` at output ``o`` may be given again from ``t``."""
        heapq.heappush(self._rel, t * self._RS + self._VCF + o * self._VS + w)
        if self._va_chk[o] > t:
            self._va_chk[o] = t  # its VC is free for the requests there then

    def _pop(self, pkt: Packet, t_next: int) -> None:
        port, vc = pkt.port, pkt.vc
        qv = self.q[port][vc]
        qv.popleft()
        inner = port < self.nports
        if inner:
            bufs = self.bufs  # (``InBuffers.free``)
            bufs.occ[port][vc] -= pkt.vpart
            bufs.pool[port] -= pkt.ppart
            self._credit_left(pkt)
        if qv:
            nxt = qv[0]
            base = nxt.head if self.vct or not inner else nxt.tail
            rc_at = nxt.rc_at = (base if base > t_next else t_next) + (self.rc if inner else 0)
            heapq.heappush(self._rcq, rc_at * self._RK + port * self.VMAX + vc)  # (``_rc_push``)
        else:
            self.active.remove(port * self.VMAX + vc)

    # -- the next allocation round ----------------------------------------------------------------
    def _retime(self, now: int) -> None:
        """After a round at ``now``: the next round is the earliest time a waiting copy's stage
        is over, or -- for a copy that lost a round, waits for a VC or for credit -- an input, an
        output or a VC frees (a credit, a new frame or a link change wakes the router itself).

        As the scan of every waiting copy found it: a head whose route computation is not over
        counts its ``rc_at``; a copy holding a VC counts the latest of its ``sa_at``, its input's and
        its output's freeing (or the packet on its output's line it may cut into) -- and since any
        such time in the future is an input's or an output's freeing, which count anyway while a
        copy waits, only copies whose ``sa_at`` is in the future are looked at one by one; a copy that
        could have gone but lost a round with grants tries again one slot later."""
        rcq, K = self._rcq, self._RK
        if rcq and rcq[0] < (now + 1) * K:
            self._rc_done(now)
        t = rcq[0] // K if rcq else INF
        in_ready, out_ready = self.in_ready, self.out_ready
        if self._fresh:
            keep = []
            for c in self._fresh:
                if c.granted or c.sa_at <= now:
                    continue
                keep.append(c)
                cand = c.sa_at
                r = in_ready[c.pkt.port]
                if r > cand:
                    cand = r
                r = out_ready[c.out]
                if r > cand:
                    if c.prio and self._cut_at(c, cand) is not None:
                        r = cand  # it may go into the packet on the line: at its round
                    cand = r
                if cand < t:
                    t = cand
            self._fresh = keep
        if self._granted and now + self.slot < t and self._lost(now):
            t = now + self.slot  # the others' grants changed what it competes with: next slot
        if self.active:
            rel, RS, OUT, VCF = self._rel, self._RS, self._OUT, self._VCF
            while rel:
                r, slot = divmod(rel[0], RS)
                if r > now:  # (``_release_at``, inline: the time ``slot`` holds now)
                    if slot < OUT:
                        cur = in_ready[slot]
                    elif slot < VCF:
                        cur = out_ready[slot - OUT]
                    else:
                        o, w = divmod(slot - VCF, self._VS)
                        cur = self.vc_free[o][w]
                    if cur == r:
                        if r < t:
                            t = r
                        break
                heapq.heappop(rel)
        self._next = t
        b = self._btimer
        if b is not None and b < t:
            t = b
        self.timer = None if t >= INF else t

    def _credit_wakes(self, now: int) -> bool:
        """May a round at ``now``, after a credit came (``InputQueuedEngine.on_credit``), grant or change
        anything? Not when no head's route computation is over, no output's VC allocator would be asked
        (every output with requests has ``_va_chk`` in the future) and no copy holding a VC may go now --
        its stages over, its input and output free, credit for it downstream, and (a second round at an
        instant) not asked yet. Such a round only marks the instant as having had a round, which
        nothing reads in that case: the VC allocator asks no one, no switch request is made, and
        ``_granted`` (false after it) is read before the next round only with a copy ready and lost,
        which this check finds. ``vc_release=tail_credit`` (a tail's credit frees a VC from the next
        slot when the instant's round has run), high-priority copies (cut-in) and a router whose
        round methods are replaced: always (the round runs, as it did before this check).

        A copy the credit finds not ready yet goes when it is: its ``sa_at`` is a ``_fresh`` time and
        its input's and output's freeing are ``_rel`` times, which ``_retime`` wakes at whatever waits
        -- a change that drops such a wake must count the copies a skipped credit left waiting."""
        if not self._cw or any(self._sa_prio.values()):
            return True
        rcq = self._rcq
        if rcq and rcq[0] < (now + 1) * self._RK:
            return True
        chk = self._va_chk
        for o in self._va:
            if chk[o] <= now:
                return True
        again = self._rnow == now
        in_ready, out_ready, credits, pools = self.in_ready, self.out_ready, self.credits, self.oc.pool
        for o, lst in self._sa.items():
            if out_ready[o] > now:
                continue
            cr = credits[o]
            for c in lst:
                if c.sa_at > now or (again and c.sa_try == now) or in_ready[c.pkt.port] > now:
                    continue
                if cr is not None and (cr[c.ovc] < c.vpart or pools[o] < c.need - c.vpart) and pools[o] < c.need:
                    continue  # (``_sa_round``'s test: no room for it downstream)
                return True
        return False

    def _lost(self, now: int) -> bool:
        """Did a copy that could have gone at ``now`` (its stages over, its input and its output free
        or its line cuttable) lose the round, with credit for it?"""
        in_ready, out_ready, credits, oc = self.in_ready, self.out_ready, self.credits, self.oc
        for o, lst in self._sa.items():
            busy = out_ready[o] > now
            if busy and not self._sa_prio.get(o):
                continue
            for c in lst:
                if c.sa_at > now:
                    continue
                r = in_ready[c.pkt.port]
                if r > now:
                    continue
                if busy and (not c.prio or self._cut_at(c, c.sa_at if c.sa_at > r else r) is None):
                    continue
                if credits[o] is None or oc.place(o, c.ovc, c.need) is not None:
                    return True
        return False


_ROUND_METHODS = ("_rc_done", "_va_round", "_va_output", "_sa_round", "_grant", "_round")
"""The round's methods ``_credit_wakes`` reads the round of: replaced in a subclass, every credit wakes it."""


def _vc_rank(c: Copy) -> tuple[int, int]:
    return c.pkt.vc, c.rank
