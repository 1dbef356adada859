#!/usr/bin/env python3
"""Where the link time goes in one QsNet put pattern on the input-queued router (spec 03): why a loaded
network stays below the model of ``scripts/qsnet_alltoall.py``.

    python scripts/qsnet_linetime.py [--topo qsnet:nodes=128] [--routing qsnet] [--pattern bisection]
                                     [--peers 16] [--vcs N] [--set SECTION.FIELD=VALUE ...]

One run of ``qsnet_alltoall``'s pattern (the same puts, seed and figures: the per-node bandwidth
printed is that script's ``avg``), observed from outside the model:

* **per level of links** (host -> stage 1, stage 1 -> 2, ..., back down): the share of the run each
  router output spent sending, and, while it was idle, why -- the state of the copies that wanted
  it, read after every allocation round of the router and held until its next: ``wanted/input_busy``
  (a packet at the head of a VC buffer wants it, but its input is sending another packet elsewhere),
  ``wanted/credit`` (no room at the next router), ``wanted/vc`` (no free VC there), ``wanted/route``
  (its route computation or VC stage is not over), ``wanted/alloc`` (ready: it lost a round, or its round is to come),
  ``hol`` (only packets behind another at the head of their VC want it) or ``nobody`` (no packet in
  this router wants it: they are elsewhere). ``port busy`` is the ports' own figure (``busy_ns``)
  over the run; links of routers the traffic never crossed are left out.
* **per adapter**: packets outstanding (time average over the run, and the share of the run the
  window was full), and the time from a packet's send to its ACK (mean, largest) beside
  ``elan.retransmit_ns``: a packet is resent only after a NACK or that long without its ACK.

The instruments wrap the router's allocation round and the adapter's window in this process (one
process: ``RunConfig.processes=1``); they read state and never change it.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys

import trio

STATES = ("busy", "wanted/alloc", "wanted/input_busy", "wanted/credit", "wanted/route", "wanted/vc", "hol", "nobody")
"""An idle output wanted by several copies is counted in the first of their states in this order."""


class Observer:
    """The wrappers and what they gathered."""

    def __init__(self) -> None:
        self.levels: dict[tuple[str, int], collections.Counter] = collections.defaultdict(collections.Counter)
        """(router, output) -> state -> ns."""
        self.last: dict[str, tuple[int, dict]] = {}
        self.stage: dict[str, int] = {}
        self.peer: dict[tuple[str, int], str] = {}
        self.out: dict[str, list[int]] = {}   # adapter -> [last t, outstanding, integral, time full]
        self.window = 32
        self.ack_ns: list[int] = []
        self.t0 = 0
        """When the measured run started."""

    # -- routers ----------------------------------------------------------------------------------
    def after_round(self, eng, now: int) -> None:
        want: dict[int, list] = collections.defaultdict(list)
        hol = set()
        for p, v, pkt in eng._heads():
            for c in pkt.copies:
                if not c.granted:
                    want[c.out].append((p, c, pkt))
            for behind in list(eng.q[p][v])[1:]:
                hol.update(c.out for c in behind.copies)
        per: dict[int, str] = {}  # output -> its state
        for o in range(eng.nports):
            if (eng.name, o) not in self.peer:
                continue
            if eng.out_ready[o] > now:
                st = "busy"
            elif want[o]:
                seen = set()
                for p, c, pkt in want[o]:
                    if pkt.rc_at > now or (c.ovc >= 0 and c.sa_at > now):
                        seen.add("wanted/route")
                    elif c.ovc < 0:
                        seen.add("wanted/vc")
                    elif eng.in_ready[p] > now:
                        seen.add("wanted/input_busy")
                    elif eng.credits[o] is not None and eng.oc.place(o, c.ovc, c.need) is None:
                        seen.add("wanted/credit")
                    else:
                        seen.add("wanted/alloc")
                st = next(s for s in STATES if s in seen)
            else:
                st = "hol" if o in hol else "nobody"
            per[o] = (st, eng.out_ready[o])
        prev = self.last.get(eng.name)
        t0 = self.t0 if prev is None else prev[0]
        for o, (st, _u) in per.items():  # the ports' time since this router's last round
            was, until = prev[1][o] if prev is not None else ("nobody", 0)
            c = self.levels[(eng.name, o)]
            if was == "busy":  # busy until its frame's last bit left, then idle until now
                b = min(until, now) - t0
                c["busy"] += b
                c[st if st != "busy" else "wanted/alloc"] += now - t0 - b
            else:
                c[was] += now - t0
        self.last[eng.name] = (now, per)

    def reset(self, now: int) -> None:
        """The measured run starts at ``now``: forget what came before (the reference run)."""
        self.levels.clear()
        self.last.clear()
        self.out.clear()
        self.ack_ns.clear()
        self.t0 = now

    # -- adapters ---------------------------------------------------------------------------------
    def window_moved(self, rel, now: int) -> None:
        o = self.out.setdefault(rel.nic.name, [self.t0, 0, 0, 0])
        dt = now - o[0]
        o[2] += o[1] * dt
        if o[1] >= self.window:
            o[3] += dt
        o[0], o[1] = now, rel.outstanding

    def install(self):
        """Wrap the router's round and the adapter's window; returns the undo."""
        from emu.nodes.nic import qsreliable as R
        from emu.switch import iq as IQ
        from emu.wire import HDR_LEN
        from emu.wire.qsnet import ACK, AckKind

        obs = self
        saved = (IQ.InputQueuedEngine.on_timer, R.Reliable._pump, R.Reliable._release, R.Reliable._send,
                 R.Reliable.on_ack)
        timer, pump, release, send, on_ack = saved

        def _on_timer(eng, now):  # the router's round runs inline in on_timer: after it, when one ran
            st = eng.iq_stats
            n = st["rounds"] + st["repeats"]
            out = timer(eng, now)
            if st["rounds"] + st["repeats"] != n:
                obs.after_round(eng, now)
            return out

        def _pump(rel, t):
            out = pump(rel, t)
            obs.window_moved(rel, rel.nic.now)
            return out

        def _release(rel, tx):
            out = release(rel, tx)
            obs.window_moved(rel, rel.nic.now)
            return out

        def _send(rel, tx, t):
            tx.sent_ns = t
            return send(rel, tx, t)

        def _on_ack(rel, frame, src, port, now):
            kind, _r, _f, _x, pkt_id, _v = ACK.unpack(frame, HDR_LEN)
            tx = rel.by_id.get(pkt_id)
            if tx is not None and tx.state is R.TxState.SENT and kind == AckKind.ACK:
                obs.ack_ns.append(now - tx.sent_ns)
            return on_ack(rel, frame, src, port, now)

        IQ.InputQueuedEngine.on_timer, R.Reliable._pump, R.Reliable._release = _on_timer, _pump, _release
        R.Reliable._send, R.Reliable.on_ack = _send, _on_ack

        def undo():
            (IQ.InputQueuedEngine.on_timer, R.Reliable._pump, R.Reliable._release, R.Reliable._send,
             R.Reliable.on_ack) = saved
        return undo


def _state_shares(obs: Observer, seen: set, T: int) -> dict[str, dict[str, float]]:
    """Per level, the share of its outputs' time in each state over the run (links between ``seen``
    nodes; after a router's last round its ports were busy until their last frame left, then idle
    with nothing to send)."""
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for name, (t1, last) in obs.last.items():
        for o, (st, until) in last.items():
            c = obs.levels[(name, o)]
            end = obs.t0 + T
            b = max(0, min(until, end) - t1) if st == "busy" else 0
            c["busy"] += b
            c["nobody" if st == "busy" else st] += max(0, end - t1 - b)
    for (name, o), c in obs.levels.items():
        peer = obs.peer[(name, o)]
        if peer in seen:
            per[f"{obs.stage[name]}->{obs.stage[peer]}"].update(c)
    out = {}
    for lev, c in per.items():
        tot = sum(c.values())
        out[lev] = {s: c[s] / tot for s in STATES} if tot else {}
    return out


async def _run(q, job, obs: Observer) -> dict:
    import emu

    t = q.topology(job)
    for name, node in t.nodes.items():
        obs.stage[name] = 0 if node.kind == "host" else node.info.get("stage", 1)
    for name, nbs in t.neighbours().items():
        for p, v, _vp, _lk in nbs:
            obs.peer[(name, p)] = v
    obs.window = t.hosts[0].spec.elan.window
    n = len(t.hosts)
    steps = q.shifts(n, job.peers)
    size = job.size * len(steps) if job.pattern != "alltoall" else job.size
    m = q.model(t, job.size)
    async with emu.Cluster(t, seed=job.seed) as net:
        # the reference qsnet_alltoall runs first (node 0 alone), so that this run is that script's
        await net.run({net.hosts[0]: (q.puts, n, size, job.pattern, n // 2)})
        before = {(s["name"], p["port"]): p["busy_ns"] for s in await net.stats() for p in s["ports"]}
        obs.reset(net.now)
        res = await net.run({h: (q.puts, n, size, job.pattern, None, q.derangement(n, job.seed), steps)
                             for h in net.hosts})
        stats = await net.stats()
    T = max(dt for dt, *_ in res.values())
    for o in obs.out.values():  # close every adapter's last stretch at the end of the run
        end = obs.t0 + T
        if o[0] < end:
            o[2] += o[1] * (end - o[0])
            o[3] += (end - o[0]) if o[1] >= obs.window else 0
    ports: dict[str, list[float]] = collections.defaultdict(list)
    seen = set(obs.last) | {h.name for h in t.hosts}  # routers the traffic crossed, and the hosts
    for s in stats:
        for p in s["ports"]:
            a, b = s["name"], (p.get("peer") or "").rsplit("-", 1)[0]
            if a in seen and b in seen:
                ports[f"{obs.stage[a]}->{obs.stage[b]}"].append((p["busy_ns"] - before[(a, p["port"])]) / T)
    bws = [d * 8 / dt for dt, d, _f, _r in res.values()]
    outs = list(obs.out.values())
    return {"avg_gbps": sum(bws) / n, "worst_gbps": min(bws), "model_gbps": m[job.pattern], "completion_ns": T,
            "resent": sum(v[3] for v in res.values()), "port_busy": {k: sum(v) / len(v) for k, v in ports.items()},
            "states": _state_shares(obs, seen, T), "outstanding": sum(o[2] for o in outs) / T / len(outs),
            "window_full": sum(o[3] for o in outs) / T / len(outs),
            "ack_mean_ns": sum(obs.ack_ns) / len(obs.ack_ns) if obs.ack_ns else 0,
            "ack_max_ns": max(obs.ack_ns, default=0),
            "retransmit_ns": t.hosts[0].spec.elan.retransmit_ns}


def main(argv: list[str] | None = None) -> dict:
    from rich.console import Console
    from rich.table import Table

    from emu.config import ConfigError, SwitchSpec, parse_settings
    from emu.front.checks import parse_size

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import qsnet_alltoall as q

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--topo", default="qsnet:nodes=128")
    ap.add_argument("--routing", default="qsnet", help="one policy (qsnet/PICK for a pick)")
    ap.add_argument("--pattern", default="bisection", choices=q.PATTERNS)
    ap.add_argument("--peers", type=int, default=16, help="as qsnet_alltoall --peers (default 16)")
    ap.add_argument("--vcs", type=int, default=0, help="VCs per link (default: the topology's router)")
    ap.add_argument("--size", default="4KiB")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    a = ap.parse_args(argv)
    try:
        parse_settings(a.set + q.routing_settings(a.routing))
        if a.vcs:
            SwitchSpec(**parse_settings(q.vc_settings(a.vcs))["switch"])
        size = parse_size(a.size)
    except (ConfigError, ValueError) as e:
        ap.error(str(e))
    if a.peers < 0:
        ap.error("--peers must be >= 0")
    job = q.Job(q.with_bandwidth(a.topo), a.routing, a.pattern, False, size, a.seed, tuple(a.set), vcs=a.vcs,
                peers=a.peers)
    obs = Observer()
    undo = obs.install()
    try:
        r = trio.run(_run, q, job, obs)
    finally:
        undo()
    con = Console(width=max(140, Console().width))
    con.print(f"{a.topo} {a.pattern} --peers {a.peers}, routing {a.routing}, vcs {a.vcs or 'default'}"
              f"{' ' + ' '.join(a.set) if a.set else ''}, seed {a.seed}: avg {r['avg_gbps']:.2f} worst "
              f"{r['worst_gbps']:.2f} Gbit/s per node (model {r['model_gbps']:.2f}), completion {r['completion_ns']} ns, "
              f"resent {r['resent']}")
    tb = Table(title="router outputs: share of the run in each state (after every allocation round)")
    tb.add_column("level")
    tb.add_column("port busy", justify="right")
    for s in STATES:
        tb.add_column(s, justify="right")
    for lev in sorted(set(r["port_busy"]) | set(r["states"])):
        st = r["states"].get(lev, {})
        tb.add_row(lev, f"{r['port_busy'].get(lev, 0):.3f}", *(f"{st[s]:.3f}" if st else "-" for s in STATES))
    con.print(tb)
    con.print(f"adapters: {r['outstanding']:.1f} packets outstanding on average (window {obs.window}, full "
              f"{100 * r['window_full']:.0f} % of the run); send -> ACK mean {r['ack_mean_ns'] / 1000:.1f} us, "
              f"largest {r['ack_max_ns'] / 1000:.1f} us (elan.retransmit_ns {r['retransmit_ns'] / 1000:.0f} us)")
    return r


if __name__ == "__main__":
    main()
