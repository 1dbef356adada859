"""Weighted switch allocation in the input-queued router (``queues.arbiter=drr`` with
``switch.model=input_queued``; ``queues.weights``, ``queues.drr_quantum_bytes``).

The output-queued switch shares a busy port between its class queues by deficit round robin
(``emu.pause.PrioQueues.drr_pick``). The input-queued router has no output queues: what decides who
goes through an output is its switch allocator. So the weights go there, into the separable
allocator (``emu.switch.iqalloc``'s ``_separable``, input first), at both of its stages:

* **input stage**: an input with ready copies of several classes picks the class by deficit round
  robin over those classes (its own deficits), then among that class's copies the VC nearest after
  its pointer, as the plain allocator does;
* **output stage**: an output picked by several inputs picks the class by deficit round robin over
  the classes among them (its own deficits), then among that class's inputs the one nearest after
  its pointer.

A copy's class is its frame's fabric ``prio`` (0..7, the job's class through ``queues.class_map``).
Deficit round robin as Shreedhar and Varghese, one frame at a time: a class's turn adds its quantum
(weight x ``drr_quantum_bytes``), it is served while its deficit covers its frame's modelled bytes,
and a class with no ready copy when its turn comes keeps no deficit. The output's deficits move on
every grant; an input's only when its pick was granted (a pick the output refused costs nothing).

No class is strict here: with weights on, the router drops its high-priority rule (``link.priority``:
no overtaking in the allocators, no cutting into a packet on the line), as the output-queued
switch's DRR serves class 7 by its weight too.

Why not weights per VC: a VC is the router's deadlock-avoidance resource (``switch.vc_policy``), taken
by routes, datelines and hops; classes travel in the prio byte, independent of it, and every copy
carries it into the allocator -- so the allocator can weigh the classes directly, whatever VCs they
hold. What weights cannot undo is head-of-line blocking: copies of two classes in one VC buffer wait
in arrival order. With ``vc_policy=by_class`` and ``switch.classes`` the hosts' ``vc`` keeps the
classes in separate buffers (the per-VC analogue of class queues).
"""

from __future__ import annotations

from emu.port import PRIO_OFF


class Drr:
    """One arbiter's deficit round robin over the 8 classes."""

    __slots__ = ("quanta", "deficit", "rr", "fresh")

    def __init__(self, quanta: list[int]):
        self.quanta = quanta
        self.deficit = [0] * 8
        self.rr = 0
        self.fresh = True

    def pick(self, ready: dict) -> int:
        """``ready``: class -> the modelled bytes of the frame it would send; the class that sends."""
        q, d = self.quanta, self.deficit
        while True:
            v = self.rr
            n = ready.get(v)
            if n is not None:
                if self.fresh:
                    d[v] += q[v]
                    self.fresh = False
                if d[v] >= n:
                    d[v] -= n
                    return v
            else:
                d[v] = 0
            self.rr = (v + 1) & 7
            self.fresh = True

    def copy(self) -> Drr:
        c = Drr(self.quanta)
        c.deficit, c.rr, c.fresh = list(self.deficit), self.rr, self.fresh
        return c


def cls(c) -> int:
    f = c.frame
    return f[PRIO_OFF] & 7 if len(f) > PRIO_OFF else 0


def setup(eng, quanta: list[int]) -> None:
    """Give ``eng`` (an ``InputQueuedEngine``) its arbiters' deficits, one per input and per output."""
    eng.drr_in = [Drr(quanta) for _ in range(eng.nports + 1)]
    eng.drr_out = [Drr(quanta) for _ in range(eng.nports)]
    eng.class_grants = [0] * 8
    """Switch allocation grants per class (the router's stats: ``class_grants``)."""


def drr_separable(eng, req: dict) -> list:
    """The separable allocator (input first) with deficit round robin over the classes at each stage
    (see the module): ``req`` as ``_separable`` takes it (per input, its ready (VC, copy), in VC
    order); the granted copies."""
    V = eng.spec.vcs
    in_ptr, out_ptr = eng.in_ptr[0], eng.out_ptr[0]
    picked: dict[int, list] = {}
    trial: dict[int, Drr] = {}
    for p in sorted(req):
        ptr = in_ptr[p]
        best: dict = {}
        for vc, x in req[p]:  # per class, the first of the nearest after the pointer
            k = cls(x)
            d = (vc - ptr) % V
            if k not in best or d < best[k][0]:
                best[k] = (d, vc, x)
        t = trial[p] = eng.drr_in[p].copy()
        _d, v, c = best[t.pick({k: b[2].n for k, b in best.items()})]
        picked.setdefault(c.out, []).append((p, v, c))
    out = []
    nin = eng.nports + 1
    grants = eng.class_grants
    for o in sorted(picked):
        po = picked[o]
        ptr = out_ptr[o]
        best = {}
        for t in po:
            k = cls(t[2])
            d = (t[0] - ptr) % nin
            if k not in best or d < best[k][0]:
                best[k] = (d, t)
        k = eng.drr_out[o].pick({k: b[1][2].n for k, b in best.items()})
        p, v, c = best[k][1]
        if len(po) > 1:
            eng.iq_stats["sa_conflicts"] += len(po) - 1
        if p in trial:
            eng.drr_in[p] = trial[p]
        grants[k] += 1
        out_ptr[o] = (p + 1) % nin
        in_ptr[p] = (v + 1) % V
        out.append(c)
    return out
