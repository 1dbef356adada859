"""The input-queued router's compiled allocation round (mixed into
:class:`emu.switch.iq.InputQueuedEngine`): when the compiled core's twin of ``emu.switch.iqround``
(``emu._core.iq_round`` and ``iq_retime``, ``emu/csrc/iq.h``) may run this router's rounds, and the
state it runs them on -- the router's own lists and dicts, shared, not copied, so either side may
take the next round from where the other left it."""

from __future__ import annotations

import emu.native as native
from emu.wire.fabric import FLAG_POOL
from emu.wire.framing import ETHERNET, Framing

from .forward import VC_OFF
from .iqalloc import Allocators
from .iqcut import _QPKT, PRIO_OFF, PTYPE_OFF, cuttable
from .iqpacket import INF, Copy, Packet
from .iqpool import FLAGS_OFF
from .iqround import Rounds

__all__ = ["CoreRound", "USE_CORE"]

USE_CORE = True
"""Let the compiled core (``emu._core.iq_round``, ``emu/csrc/iq.h``) run the plain rounds
(``CoreRound._core_state``); the twin tests turn it off to run this module's code alone."""
_CORE_READY: list = []
"""The core ``iq_setup`` was given Copy, Packet and InputQueuedEngine (once per process)."""


class CoreRound:
    """``_core_plain`` and ``_core_state`` (see the module's text)."""

    def _core_class(self) -> type:
        """The router's class whose ``on_timer`` and ``on_credit`` the compiled core stands in for in the
        element's window (``emu/csrc/iqtimer.h``: an engine of exactly that class, those methods its own):
        the one that defines ``_core_methods_plain`` (``emu.switch.iq.InputQueuedEngine``)."""
        return next(c for c in type(self).__mro__ if "_core_methods_plain" in c.__dict__)

    def _core_plain(self) -> bool:
        """May the compiled core run this router's rounds? Only the plain case it was written and tested
        for: the separable round-robin allocator (no per-class weights), every copy of priority 0 (no cut-in into a busy line:
        ``InputQueuedEngine._file`` hands the rounds back to Python for good at the first high-priority
        copy), no shared pool at the inputs or at any receiver, and none of this
        class's round methods replaced. Any new allocator setting (weights, another arbiter) must be
        added here as not plain until the core does it too."""
        core = native.CORE
        if not USE_CORE or core is None or not hasattr(core, "iq_round") or self.islip or self.pool or \
                self.drr is not None:  # (per-class weights: ``emu.switch.iqdrr``, Python's)
            return False
        if any(cap[1] for cap in self.oc.cap) or self._sa_prio:
            return False
        cls = type(self)
        mine = {"_rc_done": Rounds, "_va_round": Rounds, "_va_output": Rounds, "_sa_round": Rounds, "_grant": Rounds,
                "_pop": Rounds, "_separable": Allocators}
        if any(getattr(cls, name) is not getattr(owner, name) for name, owner in mine.items()):
            return False
        return self._core_methods_plain()  # (the router's own ``_credit_left``, ``_credit``: ``emu.switch.iq``)

    def _core_state(self):
        """(iq_round, state, settings, iq_retime) for the compiled core's round, or False (not plain: Python
        runs). The state is this router's own lists and dicts, shared, not copied."""
        if not self._core_plain():
            return False
        core = native.CORE
        if not _CORE_READY:
            core.iq_setup(Copy, Packet, self._core_class())
            _CORE_READY.append(core)
        rules = ("tail_left", "head_left", "per_flit")
        st = (self.active, self._rcq, self.q, self._va, self._va_chk, self._sa, self.vc_hold, self.vc_free, self.allowed,
              self.va_ptr[0], self.credits, self.oc.pool, self.oc.cap, self.oc.frames, self.wait_vc, self.wait_n,
              self.wait_b, self.in_ready, self.out_ready, self.in_ptr[0], self.out_ptr[0], self._rel, self.line,
              self.bufs.occ, self.bufs.pool, self._tail_wait, self.iq_stats, self.prio_ports, cuttable)
        ks = (self._RK, self.VMAX, self._V1, self._N, self._RS, self._OUT, self._VCF, self._VS, self.nports,
              self.spec.vcs, self.fb, self.va, self.sa, self.st, self.rc, int(bool(self.vct)), self.vc_rule,
              rules.index(self.credit_rule), self.spec.credit_delay_ns, int(bool(self.pool)), int(self.sel is not None),
              VC_OFF, FLAGS_OFF, FLAG_POOL, INF, PTYPE_OFF, _QPKT, PRIO_OFF)
        return core.iq_round, st, ks, core.iq_retime

    def _core_receive_state(self):
        """(iq_receive, state) for the compiled core's receive of a plain data frame
        (``emu._core.iq_receive``, ``emu/csrc/iqrecv.h``), or False (Python's receive runs). Its plain
        case: no shared pool, no VC selector, the receive's methods this class's own, every port's
        framing one the core computes a length for; the rest (routing policies, held ports, priority,
        ...) it checks per frame, and declines before changing anything but the caches ``_ins`` and ``_lines``:
        the entries they lack it makes as ``receive`` and ``_copy`` make them (from ``in_bps``, ``port_bps``
        and ``downstream``), instead of handing the frame to Python's receive to make them."""
        core = native.CORE
        if not USE_CORE or core is None or not hasattr(core, "iq_receive") or self.pool or self.sel is not None or \
                not self._core_receive_methods_plain():
            return False
        if not _CORE_READY:
            core.iq_setup(Copy, Packet, self._core_class())
            _CORE_READY.append(core)
        framings = [self.port_framing.get(p, ETHERNET) for p in range(self.nports)]
        if any(type(f) is not Framing for f in framings):
            return False
        b = self.bufs
        rx = (self._ins, self._lines, b.occ, b.peak, self.arriving, self.q, self.active, self._rcq, self.wait_n,
              self.wait_b, self.iq_stats, self.stats, self.prio_ports, [f.add for f in framings], self.in_bps,
              self.port_bps, self.downstream, self._V, b.vc_bytes, self.groups_n, self.VMAX, self._RK, self.rc,
              int(bool(self.vct)), self.nports, VC_OFF, FLAG_POOL, self.fb)
        return core.iq_receive, rx
