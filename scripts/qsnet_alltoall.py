#!/usr/bin/env python3
"""Spec 03's measurement: per-node bandwidth under all-to-all and bisection as the network grows,
static vs dispersive vs adaptive vs qsnet routing, with and without a broken up link.

    python scripts/qsnet_alltoall.py [--topos 'fattree:k=4,n=1;fattree:k=4,n=2;...'] [--max-nodes 64]
                                     [--routing static,dispersive,adaptive,qsnet,qsnet/random]
                                     [--size 4KiB] [--seed 1] [--jobs 2] [--out results/qsnet_alltoall/]
                                     [--set elan.retransmit_ns=10000 ...] [--peers K]
                                     [--manager none,reset,rewrite] [--vcs 1,2,3,4]
    python scripts/qsnet_alltoall.py --full     # 1,024 nodes (qsnet:nodes=1024), static against qsnet,
                                                # all-to-all (32 shifts) and bisection

Traffic is QsNet memory-based communication (spec 03) through each node's adapter (``host.put``:
packets of ``elan.packet_bytes``, every packet acknowledged, a window of ``elan.window``, resends on
NACK or timeout on the next route id; a put that fails ``elan.max_tries`` times returns ``ok=False``).
A put blocks its node until its last packet is acknowledged. Every node moves ``(n - 1) x --size``
bytes:

* ``alltoall`` -- ``n - 1`` puts of ``--size``, put j to rank ``(i + j) mod n`` (the pairwise
  exchange order): every node sends to, and receives from, every other node, one peer at a time;
* ``bisection`` -- one put of ``(n - 1) x --size`` to the node's mirror ``(i + n/2) mod n``: the
  lower half exchanges with the upper half, streaming at the adapter's window;
* ``permutation`` -- one put of ``(n - 1) x --size`` to ``perm[i]``, a random derangement drawn
  from ``--seed`` (the same for every policy): the pattern static routing is known to suffer from
  (several flows on one up link); its model is the bisection bound, an upper limit.

``--peers K`` keeps K of the n - 1 shifts, evenly spaced over 1..n-1 (each shift is a permutation of
the machine, so every step is still a full exchange; the all-to-all of the source at 1,024 nodes is
otherwise 2 million packets of 4 KiB): a node then moves ``K x --size`` bytes in every pattern.

A node's bandwidth is the data bytes of its puts that completed over its own completion time
(virtual time, from the common start to its last put's acknowledgement); the table gives the
average and the worst node, and ``alone``: node 0 doing the same puts to its mirror on an otherwise
idle network (what the put protocol gives without contention). Beside them, the model: the per-node
injection limit ``inj`` (the host link's rate times the data share of what the node's link carries:
each 1 KiB of data travels as one QsNet packet -- 24-byte transaction header, 8-byte and 4-byte
segment headers, CRC-32 and packet id: its modelled length on a ``qsnet:`` link, ``link.framing=qsnet``
-- and, since every node receives as much as it sends, one 16-byte ACK token for a packet it received
goes out beside it); and ``model``, that limit capped by the topology's bisection (bisection width x
that rate over n/2 nodes; for all-to-all only a share (n/2)/(n-1) of a node's bytes crosses it).
Small blocking puts pay a round trip each that the model leaves out: compare with ``alone``
(which only sends, so no ACK frames share its link: it may pass ``inj`` by the ACK share, ~4 %).

The broken-link runs take the first up link of the switch of the first host down at half the
model's time for the pattern (well inside every run), both directions; frames on the wire are lost
(resent after ``elan.retransmit_ns``), packets that meet the dead link are NACKed by the router
(invalid-destination trap) and resent on another route id. A put that still fails is counted, and
its bytes are not; a run never hangs. With ``--manager ACTIONS`` each broken-link run is repeated with
the network manager attached (out of band on ``qsnet:``) and each action (``manager.action``: none,
reset -- the links of the router that can no longer reach the destinations are reset --, rewrite --
the tables of the routers that would send into the dead end are rewritten), on the same fault.

``--vcs 1,2,3,4`` repeats every run on the input-queued router (``switch.model=input_queued``,
virtual cut-through) with that many VCs per link, to measure the source's claim that 2-3 VCs per link
keep a link at line rate: per-node bandwidth against VCs, the rest of the router as its defaults
give it (printed). Links default to QsNet's 20 Gbit/s of data
(``bandwidth_gbps=20`` appended to specs that do not set it). The seed is fixed and printed.
"""

from __future__ import annotations

import argparse
import csv
import logging
import multiprocessing
import pathlib
import sys
import time
from dataclasses import dataclass

import trio

DEFAULT_TOPOS = ("fattree:k=4,n=1;fattree:k=4,n=2;clos:radix=8,stages=2;fattree:k=4,n=3;"
                 "qsnet:nodes=128")
DEFAULT_ROUTING = "static,dispersive,adaptive,qsnet"
PATTERNS = ("alltoall", "bisection", "permutation")
LOCAL = 0x1000_0000
REMOTE = 0x4000_0000


@dataclass(frozen=True)
class Job:
    spec: str
    routing: str
    """A policy name, or ``qsnet/PICK`` for qsnet with ``emu.switch.adaptive_pick=PICK``."""
    pattern: str
    broken: bool
    size: int
    seed: int
    settings: tuple[str, ...] = ()
    ber: float = 0.0
    """A seeded bit-error rate on every link from the start (0: none)."""
    manager: str = ""
    """The network manager's action on the broken-link runs ("": no manager)."""
    vcs: int = 0
    """VCs per link on the input-queued router (0: the topology's router as it is)."""
    peers: int = 0
    """Shifts of the all-to-all kept (0: all n - 1)."""
    direct: bool = False
    """Frames handed over in memory instead of over UDP (``Cluster(direct=True)``: the same figures)."""


def with_bandwidth(spec: str, gbps: int = 20) -> str:
    return spec if "bandwidth_gbps" in spec else f"{spec},bandwidth_gbps={gbps}"


def routing_settings(routing: str) -> list[str]:
    name, _, pick = routing.partition("/")
    return [f"switch.routing={name}"] + ([f"switch.adaptive_pick={pick}"] if pick else [])


def vc_settings(vcs: int) -> list[str]:
    return ["switch.model=input_queued", "switch.cut_through=true", f"switch.vcs={vcs}"] if vcs else []


def topology(job: Job):
    from emu.config import ManagerSpec, merge_settings, parse_settings
    from emu.topologies.registry import build

    t = build(with_bandwidth(job.spec), settings=merge_settings(
        parse_settings(list(job.settings)), parse_settings(routing_settings(job.routing) + vc_settings(job.vcs))))
    if job.manager:
        t.add_manager(spec=ManagerSpec(action=job.manager))
    return t


def shifts(n: int, peers: int) -> list[int]:
    """The all-to-all's shifts: 1..n-1, or ``peers`` of them evenly spaced."""
    if not peers or peers >= n - 1:
        return list(range(1, n))
    return sorted({1 + (k * (n - 1)) // peers for k in range(peers)})


# -- the model ----------------------------------------------------------------------------------

def model(t, size: int) -> dict:
    """Per-node injection and bisection limits (Gbit/s of data) for traffic in puts of ``size``
    bytes or more on ``t`` (packet overhead only; the put's closing round trip is left out)."""
    from emu.wire import PacketType
    from emu.wire.qsnet import ACK, TXN_LEN, packet_bytes

    h0 = t.hosts[0].name
    rate = next(lk.spec.bandwidth_bps for lk in t.links if h0 in (lk.a, lk.b))
    spec = t.hosts[0].spec.elan
    link = next(lk.spec for lk in t.links if h0 in (lk.a, lk.b))
    ack = link.frame_bytes(PacketType.QACK, ACK.size)  # modelled lengths on the link (``link.framing``)
    wire, left = 0, size
    while left > 0:
        p = min(left, spec.packet_bytes)
        wire += link.frame_bytes(PacketType.QPKT, packet_bytes(TXN_LEN + p)) + ack
        left -= p
    inj = rate * size / wire / 1e9
    n = len(t.hosts)
    out = {"link_gbps": rate / 1e9, "inj_gbps": inj, "bis_links": t.bisection}
    if t.bisection:
        share = t.bisection / (n / 2)
        out["bisection"] = out["permutation"] = min(inj, inj * share)
        out["alltoall"] = min(inj, inj * share * (n - 1) / (n / 2))
    else:
        out["bisection"] = out["alltoall"] = out["permutation"] = inj
    return out


def broken_link(t) -> tuple[str, str] | None:
    """The first up link of the first host's switch (None: a one-switch network has no up link)."""
    t.compute_candidates()
    nb = t.neighbours()
    sw = nb[t.hosts[0].name][0][1]
    far = t.hosts[-1].id
    ports = t.candidates.get(sw, [])
    ups = ports[far] if far < len(ports) else ()
    peers = {p: peer for p, peer, _, _ in nb[sw]}
    ups = [p for p in ups if t.nodes[peers[p]].kind == "switch"]
    return (sw, peers[ups[0]]) if ups else None


# -- one run ------------------------------------------------------------------------------------

def derangement(n: int, seed: int) -> list[int]:
    """A random permutation of 0..n-1 with no fixed point, from ``seed``."""
    import random

    rng = random.Random(seed * 7_919 + n)
    while True:
        p = list(range(n))
        rng.shuffle(p)
        if all(p[i] != i for i in range(n)):
            return p


async def puts(host, n: int, size: int, pattern: str, peer: int | None = None, perm: list[int] | None = None,
               steps_of: list[int] | None = None):
    """This node's part (see the module docstring); (time, bytes done, puts failed, packets resent).
    ``peer``: the ``alone`` reference, the same puts to that one rank."""
    me = host.rank
    host.mem_write(LOCAL, bytes((me + i) & 0xFF for i in range(size)))
    t0 = host.now
    done = failed = resent = 0
    if pattern == "alltoall":
        steps = [((me + j) % n, size) for j in (steps_of or range(1, n))]
    elif pattern == "permutation":
        steps = [(perm[me] if peer is None else peer, size)]
    else:
        steps = [((me + n // 2) % n, size)]
    for to, nbytes in steps:
        r = await host.put(to if peer is None else peer, LOCAL, REMOTE + (me % 256) * size, nbytes)
        if r.ok:
            done += nbytes
        else:
            failed += 1
        resent += r.resent
    return host.now - t0, done, failed, resent


async def _run(job: Job) -> dict:
    import emu

    t = topology(job)
    m = model(t, job.size)
    n = len(t.hosts)
    row = {"topology": job.spec, "nodes": n, "pattern": job.pattern, "routing": job.routing,
           "manager": job.manager, "vcs": job.vcs or "", "peers": len(shifts(n, job.peers)),
           "broken": "", "ber": job.ber, "avg_gbps": None, "worst_gbps": None, "model_gbps": round(m[job.pattern], 3),
           "inj_gbps": round(m["inj_gbps"], 3), "alone_gbps": None, "bis_links": m["bis_links"], "failed_puts": 0,
           "resent": 0, "completion_ns": None, "frames": None, "status": "ok"}
    link = broken_link(t) if job.broken else None
    if job.broken and link is None:
        row.update(status="no up link", broken="-")
        return row
    steps = shifts(n, job.peers)
    size = job.size * len(steps) if job.pattern != "alltoall" else job.size  # bytes per put
    perm = derangement(n, job.seed)
    t_ideal = len(steps) * job.size * 8 / m[job.pattern]  # ns
    async with emu.Cluster(t, seed=job.seed, direct=job.direct) as net:
        if job.ber:
            for lk in t.links:
                await net.schedule(net.now, "ber", link=(lk.a, lk.b), rate=job.ber)
        if not link:  # the reference: one node alone doing the same puts to its mirror
            dt, done, _f, _r = (await net.run({net.hosts[0]: (puts, n, size, job.pattern, n // 2)}))[net.hosts[0]]
            row["alone_gbps"] = round(done * 8 / dt, 3)
        if link:
            at = int(t_ideal / 2)
            await net.schedule(net.now + at, "down", link=link)
            row["broken"] = f"{link[0]}-{link[1]}@{at / 1000:.1f}us"
        try:
            res = await net.run({h: (puts, n, size, job.pattern, None, perm, steps) for h in net.hosts})
        except Exception as e:  # DeadlockError/AppError: reported, not raised
            row["status"] = f"{type(e).__name__}: {str(e)[:120]}"
            return row
        bws = [done * 8 / dt for dt, done, _f, _r in res.values()]
        row.update(avg_gbps=round(sum(bws) / n, 3), worst_gbps=round(min(bws), 3),
                   failed_puts=sum(v[2] for v in res.values()), resent=sum(v[3] for v in res.values()),
                   completion_ns=net.metrics.completion_ns, frames=net.metrics.frames)
        if job.manager:
            st = {s["name"]: s for s in await net.stats()}[t.manager]
            row["mgr_actions"] = "; ".join(a for _t, a in st["actions"])[:160]
        if row["failed_puts"]:
            row["status"] = f"{row['failed_puts']} puts failed"
    return row


def run_job(job: Job) -> dict:
    w = time.perf_counter()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # failed transfers are counted in the row, not logged one by one
    try:
        row = trio.run(_run, job)
    finally:
        root.setLevel(level)
    row["wall_s"] = round(time.perf_counter() - w, 2)
    return row


# -- output -------------------------------------------------------------------------------------

COLUMNS = ["topology", "nodes", "pattern", "routing", "manager", "vcs", "peers", "broken", "ber", "avg_gbps", "worst_gbps",
           "alone_gbps",
           "model_gbps", "inj_gbps", "bis_links", "loss_pct", "failed_puts", "resent", "completion_ns", "frames", "status",
           "mgr_actions", "wall_s"]


def add_loss(rows: list[dict]) -> None:
    """Average bandwidth lost with the broken link, per policy, against the same run unbroken."""
    base = {(r["topology"], r["pattern"], r["routing"], r.get("vcs")): r["avg_gbps"] for r in rows
            if not r["broken"] and not r.get("ber")}
    for r in rows:
        b = base.get((r["topology"], r["pattern"], r["routing"], r.get("vcs")))
        hurt = (r["broken"] and r["broken"] != "-") or r.get("ber")
        r["loss_pct"] = round(100 * (1 - r["avg_gbps"] / b), 1) if hurt and b and r["avg_gbps"] is not None else None


def table(rows: list[dict], seed: int, size: int):
    from rich.table import Table

    tb = Table(title=f"QsNet puts of {size} B, per-node bandwidth (Gbit/s of data, virtual time), seed {seed}")
    for c in ("topology", "n", "pattern", "routing", "vcs", "link", "avg", "worst", "alone", "model", "inj",
              "loss %", "failed", "resent", "completion ns", "status"):
        tb.add_column(c, justify="left" if c in ("topology", "pattern", "routing", "status") else "right")
    f = lambda v: "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)  # noqa: E731
    for r in rows:
        tb.add_row(r["topology"], str(r["nodes"]), r["pattern"], r["routing"], str(r.get("vcs") or "-"),
                   ("broken" + (f", manager {r['manager']}" if r.get("manager") else "")) if r["broken"]
                   else f"ber {r['ber']:g}" if r.get("ber") else "ok",
                   f(r["avg_gbps"]), f(r["worst_gbps"]), f(r["alone_gbps"]), f(r["model_gbps"]), f(r["inj_gbps"]), f(r["loss_pct"]),
                   str(r["failed_puts"]), str(r["resent"]), f(r["completion_ns"]), r["status"])
    return tb


def write(rows: list[dict], out: pathlib.Path, seed: int, size: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    md = [f"# QsNet puts of {size} B per peer, seed {seed} (Gbit/s of data per node, virtual time)", "",
          "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    md += ["| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in COLUMNS) + " |" for r in rows]
    (out / "results.md").write_text("\n".join(md) + "\n")
    plot(rows, out / "qsnet_alltoall.png")


def plot(rows: list[dict], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    patterns = [p for p in PATTERNS if any(r["pattern"] == p for r in rows)]
    conds = [c for c in ("ok", "broken", "ber") if any(_cond(r) == c for r in rows)]
    fig, axes = plt.subplots(len(patterns), len(conds), figsize=(6 * len(conds), 4 * len(patterns)), sharex=True,
                             squeeze=False)
    policies = list(dict.fromkeys(r["routing"] for r in rows))
    for i, pattern in enumerate(patterns):
        for j, cond in enumerate(conds):
            ax = axes[i][j]
            sel = [r for r in rows if r["pattern"] == pattern and _cond(r) == cond and r["avg_gbps"] is not None]
            for k, pol in enumerate(policies):
                pts = sorted((r["nodes"], r["avg_gbps"], r["worst_gbps"]) for r in sel if r["routing"] == pol)
                if pts:
                    c = f"C{k}"
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=c, label=f"{pol} avg")
                    ax.plot([p[0] for p in pts], [p[2] for p in pts], "x--", color=c, label=f"{pol} worst")
            lim = sorted({(r["nodes"], r["model_gbps"]) for r in rows if r["pattern"] == pattern})
            if lim:
                ax.plot([p[0] for p in lim], [p[1] for p in lim], "k:", label="model limit")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{pattern}, " + {"ok": "all links up", "broken": "one up link broken",
                                            "ber": "seeded bit-error rate"}[cond])
            ax.set_ylabel("Gbit/s per node")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("nodes")
    axes[0][0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _cond(r: dict) -> str:
    return "broken" if r["broken"] else "ber" if r.get("ber") else "ok"


# -- main ---------------------------------------------------------------------------------------

def jobs_for(topos: list[str], routings: list[str], size: int, seed: int, settings: tuple[str, ...],
             broken: bool, ber: float = 0.0, patterns: tuple[str, ...] = PATTERNS, managers: tuple[str, ...] = (),
             vcs: tuple[int, ...] = (0,), peers: int = 0, direct: bool = False) -> list[Job]:
    conds = [(False, 0.0, "")] + ([(True, 0.0, a) for a in managers or ("",)] if broken else []) \
        + ([(False, ber, "")] if ber else [])
    return [Job(spec, r, p, b, size, seed, settings, e, a, v, peers, direct) for spec in topos for p in patterns
            for v in vcs for b, e, a in conds for r in routings]


def main(argv: list[str] | None = None) -> list[dict]:
    from rich.console import Console

    from emu.config import parse_settings
    from emu.front.checks import parse_size
    from emu.topologies.registry import build

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--topos", default=DEFAULT_TOPOS, help="topology specs separated by ';'")
    ap.add_argument("--max-nodes", type=int, default=64, help="skip topologies with more hosts (default 64)")
    ap.add_argument("--routing", default=DEFAULT_ROUTING, help="policies, comma separated; qsnet/PICK for a pick")
    ap.add_argument("--size", default="4KiB", help="bytes per put (default 4KiB)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel OS processes (default 2)")
    ap.add_argument("--no-broken", action="store_true", help="skip the broken-link runs")
    ap.add_argument("--ber", type=float, default=0.0, help="also run with this seeded bit-error rate on every link")
    ap.add_argument("--patterns", default=",".join(PATTERNS), help="comma separated: " + ", ".join(PATTERNS))
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                    help="a setting for every run, as emu run --set")
    ap.add_argument("--peers", type=int, default=0, help="all-to-all over this many evenly spaced shifts (default: all)")
    ap.add_argument("--manager", default="", help="broken-link runs with the network manager, per action: "
                                                  "comma separated among none, reset, rewrite")
    ap.add_argument("--vcs", default="", help="VCs per link to sweep on the input-queued router, comma separated")
    ap.add_argument("--full", action="store_true", help="the source's size: qsnet:nodes=1024, static against qsnet, "
                                                        "alltoall (--peers 32 unless given) and bisection")
    ap.add_argument("--direct", action="store_true", help="hand frames over in memory, not over UDP (same figures, "
                                                          "faster)")
    ap.add_argument("--out", default="results/qsnet_alltoall/")
    a = ap.parse_args(argv)
    if a.full:
        a.topos, a.max_nodes, a.routing, a.patterns = "qsnet:nodes=1024", max(a.max_nodes, 1024), "static,qsnet", \
            "alltoall,bisection"
        a.peers = a.peers or 32
        a.no_broken = a.no_broken or not a.manager
    managers = tuple(m.strip() for m in a.manager.split(",") if m.strip())
    bad = [m for m in managers if m not in ("none", "reset", "rewrite")]
    if bad:
        ap.error(f"--manager {bad}: give actions among none, reset, rewrite")
    try:
        vcs = tuple(int(v) for v in a.vcs.split(",") if v.strip()) or (0,)
    except ValueError:
        ap.error(f"--vcs {a.vcs!r}: give VC counts, e.g. 1,2,3,4")
    from emu.config import ConfigError, SwitchSpec

    try:
        for v in vcs:
            if v:
                SwitchSpec(**parse_settings(vc_settings(v))["switch"])
    except ConfigError as e:
        ap.error(f"--vcs: {e}")
    if a.peers < 0:
        ap.error("--peers must be >= 0")
    console = Console(stderr=True)
    size = parse_size(a.size)
    parse_settings(a.set)  # refuse a bad setting before anything runs
    routings = [r.strip() for r in a.routing.split(",") if r.strip()]
    for r in routings:
        parse_settings(routing_settings(r))
    topos = []
    for spec in (s.strip() for s in a.topos.split(";") if s.strip()):
        n = len(build(with_bandwidth(spec)).hosts)
        if n > a.max_nodes:
            console.print(f"skipped {spec}: {n} nodes > --max-nodes {a.max_nodes}")
        else:
            topos.append(spec)
    patterns = tuple(p.strip() for p in a.patterns.split(",") if p.strip())
    bad = [p for p in patterns if p not in PATTERNS]
    if bad or not 0.0 <= a.ber <= 1.0:
        ap.error(f"--patterns {bad} not among {PATTERNS}" if bad else "--ber must be within 0..1")
    jobs = jobs_for(topos, routings, size, a.seed, tuple(a.set), not a.no_broken, a.ber, patterns, managers, vcs, a.peers,
                    a.direct)
    if not jobs:
        ap.error("nothing to run: every topology was skipped (raise --max-nodes) or no pattern/routing given")
    console.print(f"seed {a.seed}; {len(jobs)} runs on {a.jobs} process(es); puts of {size} B")
    w = time.perf_counter()
    if a.jobs > 1:
        with multiprocessing.get_context("spawn").Pool(a.jobs) as pool:
            rows = []
            for row in pool.imap(run_job, jobs):
                console.print(f"  {row['topology']} {row['pattern']} {row['routing']} "
                              f"{'broken' if row['broken'] else 'ok'}: {row['avg_gbps']} Gbit/s ({row['wall_s']} s)")
                rows.append(row)
    else:
        rows = [run_job(j) for j in jobs]
    add_loss(rows)
    Console(width=max(160, Console().width)).print(table(rows, a.seed, size))
    out = pathlib.Path(a.out)
    write(rows, out, a.seed, size)
    console.print(f"{len(rows)} runs in {time.perf_counter() - w:.0f} s wall; wrote {out}/results.csv, "
                  f"results.md, qsnet_alltoall.png")
    return rows


if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    main()
