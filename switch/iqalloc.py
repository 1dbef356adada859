"""The input-queued router's switch allocators and its credit-wait diagnosis (mixed into
:class:`emu.switch.iq.InputQueuedEngine`; the rules are in that module's text).

Each rotating priority is kept per priority class (``ptr[prio]``): a high-priority grant moves the
high-priority pointer only. One shared pointer let every high-priority grant (an ACK token, every
few hundred ns under load) reset the rotation among the priority-0 requesters to the one after the
token's VC or input, so the lowest-numbered of them always won the next round and the others starved
(a QsNet packet waited 53 us in one router while 60 later packets of its input passed it)."""

from __future__ import annotations


class Allocators:
    """``round_robin`` (separable, input first) and ``islip``; who waits for whom."""

    def _heads(self):
        """(input, VC, head packet) of every non-empty VC buffer, in (input, VC) order."""
        q, vm = self.q, self.VMAX
        for key in self.active:
            p, v = divmod(key, vm)
            yield p, v, q[p][v][0]

    def _allocate_vcs(self, heads, now: int) -> None:
        """VC allocation over ``heads`` ((input, VC, head packet), as ``_heads`` gives them): the scan
        form of the round's, for the allocator's tests."""
        by_out: dict[int, list] = {}
        for _p, _v, pkt in heads:
            if pkt.rc_at > now:
                continue
            for c in pkt.copies:
                if c.ovc < 0:
                    by_out.setdefault(c.out, []).append(c)
        for o in sorted(by_out):
            self._va_output(o, by_out[o], now)

    def _separable(self, req: dict) -> list:
        """Input first: each input its ready copy next after its pointer (over VCs, then copies);
        each output the requesting input next after its pointer."""
        V = self.spec.vcs
        in_ptr, out_ptr = self.in_ptr, self.out_ptr
        picked: dict[int, list] = {}
        for p in sorted(req):
            rq = req[p]
            if len(rq) == 1:
                v, c = rq[0]
            else:
                prio = 0  # the highest class asking, served first
                for _v, c in rq:
                    if c.prio > prio:
                        prio = c.prio
                ptr = in_ptr[prio][p]
                best = V
                for vc in rq:  # the first of the nearest after the pointer
                    if vc[1].prio == prio:
                        k = (vc[0] - ptr) % V
                        if k < best:
                            best, v, c = k, vc[0], vc[1]
            po = picked.get(c.out)
            if po is None:
                picked[c.out] = [(p, v, c)]
            else:
                po.append((p, v, c))
        out = []
        nin = self.nports + 1
        for o in sorted(picked):
            po = picked[o]
            if len(po) == 1:
                p, v, c = po[0]
                prio = c.prio
            else:
                prio = 0
                for t in po:
                    if t[2].prio > prio:
                        prio = t[2].prio
                ptr = out_ptr[prio][o]
                best = nin
                for t in po:
                    if t[2].prio == prio:
                        k = (t[0] - ptr) % nin
                        if k < best:
                            best = k
                            p, v, c = t
                self.iq_stats["sa_conflicts"] += len(po) - 1
            out_ptr[prio][o] = (p + 1) % nin
            in_ptr[prio][p] = (v + 1) % V
            out.append(c)
        return out

    def _islip(self, req: dict) -> list:
        """iSLIP: unmatched inputs request every output they have a ready copy for; each
        unmatched output grants the requesting input next after its pointer; each input accepts
        the granting output next after its pointer. Pointers move on first-iteration accepts."""
        nin, nout, V = self.nports + 1, self.nports, self.spec.vcs
        matched_in: dict[int, int] = {}
        matched_out: set[int] = set()
        for it in range(self.iters):
            grants: dict[int, list] = {}
            for o in range(nout):
                if o in matched_out:
                    continue
                asking = [p for p in req if p not in matched_in and any(c.out == o for _v, c in req[p])]
                if asking:
                    ptr = self.out_ptr[0][o]
                    grants.setdefault(min(asking, key=lambda p: (p - ptr) % nin), []).append(o)
            if not grants:
                break
            for p in sorted(grants):
                ptr = self.in_ptr[0][p]
                o = min(grants[p], key=lambda o: (o - ptr) % nout)
                matched_in[p] = o
                matched_out.add(o)
                self.iq_stats["sa_conflicts"] += len(grants[p]) - 1
                if it == 0:
                    self.out_ptr[0][o] = (p + 1) % nin
                    self.in_ptr[0][p] = (o + 1) % nout
        out = []
        for p in sorted(matched_in):
            o = matched_in[p]
            # the VC of that input toward o: the first at or after the input's VC pointer
            cands = [(v, c) for v, c in req[p] if c.out == o]
            vptr = self.vc_ptr[p]
            v, c = min(cands, key=lambda vc: (vc[0] - vptr) % V)
            self.vc_ptr[p] = (v + 1) % V
            out.append(c)
        return out

    def credit_waits(self) -> tuple[list, list]:
        """Who waits for whom (credit deadlock diagnosis): ``blocked`` (out port, VC, frames) for every
        output VC whose waiting frames have no credit; ``held`` (in port, in VC, out port, out VC) for
        every frame at the head of an input buffer waiting for credit or for a VC at an output (a
        VC it waits for: each of its group's)."""
        blocked: dict[tuple[int, int], int] = {}
        held = []
        for p, v, pkt in self._heads():
            for c in pkt.copies:
                if c.granted or self.credits[c.out] is None:
                    continue
                if c.ovc >= 0:
                    if self.oc.place(c.out, c.ovc, c.need) is None:
                        blocked[(c.out, c.ovc)] = blocked.get((c.out, c.ovc), 0) + 1
                        held.append((p, v, c.out, c.ovc))
                else:
                    for w in self.allowed[c.out][c.group]:
                        held.append((p, v, c.out, w))
        return [(o, w, n) for (o, w), n in sorted(blocked.items())], held
