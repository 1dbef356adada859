"""What a replayed schedule reports: per rank figures, the critical path, the LogGP parameters.

The critical path runs back from the operation that ended last: from an operation to what it
waited for last -- the dependency that made it ready (``requires``: its end; ``irequires``: its
start), for a receive the send on another rank whose message it matched when that came later, or
else the operation before it on the rank's CPU (it was ready, the CPU was not).
"""

from __future__ import annotations

import bisect
from fractions import Fraction

from emu.nodes.workload.goal import CALC, KIND_NAMES, RECV, SEND, Schedule
from emu.nodes.workload.loggp import LogGP


def critical_path(s: Schedule, results: list[dict], limit: int = 100_000) -> list[dict]:
    """The steps of the critical path, first to last: rank, operation, kind, start, end, and
    what it waited on."""
    sends_of: dict[tuple[int, int, int], int] = {}  # (src, dst, seq) -> op
    for res in results:
        for i, (dst, seq) in res["sent"].items():
            sends_of[(res["rank"], dst, seq)] = i
    r = max(range(len(results)), key=lambda k: (results[k]["end_ns"], -k))
    if not results[r]["end"]:
        return []
    i = max(range(len(results[r]["end"])), key=lambda j: results[r]["end"][j])
    steps: list[dict] = []
    seen: set[tuple[int, int]] = set()
    while i is not None and len(steps) < limit and (r, i) not in seen:
        seen.add((r, i))
        res, rs = results[r], s.ranks[r]
        st, en, rd = res["start"][i], res["end"][i], res["ready"][i]
        step = {"rank": r, "op": rs.name(i), "kind": KIND_NAMES[rs.kind[i]], "start_ns": st, "end_ns": en,
                "line": rs.line[i]}
        nxt = None
        if rs.kind[i] == RECV and i in res["matched"]:
            src, seq = res["matched"][i]
            j = sends_of.get((src, r, seq))
            if j is not None and src != r and results[src]["start"][j] >= rd:
                step["waited_on"] = f"rank {src} {s.ranks[src].name(j)} (its message)"
                nxt = (src, j)
        if nxt is None:
            c = res["cause"][i]
            if c >= 0 and st <= rd:
                step["waited_on"] = f"{rs.name(c)} (dependency)"
                nxt = (r, c)
            else:
                prev = _cpu_before(res, st, i)
                if prev is not None:
                    step["waited_on"] = f"{rs.name(prev)} (the CPU)"
                    nxt = (r, prev)
        steps.append(step)
        if nxt is None:
            break
        r, i = nxt
    steps.reverse()
    return steps


def _cpu_before(res: dict, t: int, i: int) -> int | None:
    """The operation of the rank that ended last at or before ``t`` having started before it (the
    CPU was busy with it)."""
    order = res.get("_by_end")
    if order is None:  # (once per rank: its operations by end time)
        order = res["_by_end"] = sorted((e, j) for j, e in enumerate(res["end"]) if e >= 0)
    k = bisect.bisect_right(order, (t, len(res["end"])))
    start = res["start"]
    for e, j in reversed(order[max(0, k - 64):k]):  # (the latest few: one of them started before t)
        if j != i and start[j] < t:
            return j
    return None


def path_summary(steps: list[dict]) -> dict:
    """Time along the path by kind (ns) and how many of its steps cross ranks."""
    out: dict = {"steps": len(steps), "ns_by_kind": {}, "rank_changes": 0}
    for a, b in zip(steps, steps[1:]):
        if a["rank"] != b["rank"]:
            out["rank_changes"] += 1
    for st in steps:
        out["ns_by_kind"][st["kind"]] = out["ns_by_kind"].get(st["kind"], 0) + st["end_ns"] - st["start_ns"]
    return out


def loggp_of(topo, hosts: list[str]) -> tuple[LogGP, dict]:
    """LogGP parameters from the topology's settings, and how each was got: ``o`` the hosts' send
    overhead (the receive overhead if larger), ``L`` the one-way time of a message of one byte
    between the first two ranks' hosts when nothing else moves (links' latency and one frame's
    serialisation per hop, switches' processing delay, the NICs' delays), ``G`` the host link's ns
    per byte (rounded up), ``g`` 0 (a host has no per-message gap), ``O`` 0, ``S`` the eager limit."""
    h0 = topo.nodes[hosts[0]]
    spec = h0.spec
    o = max(spec.send_overhead_ns, spec.recv_overhead_ns)
    path = topo.route(hosts[0], hosts[1]) if len(hosts) > 1 else [hosts[0]]
    frame = 46 + 4 + 17 + 1  # headers, FCS, MPI envelope, one byte
    L = 2 * spec.nic_delay_ns
    how = [f"2 x nic_delay {spec.nic_delay_ns}"]
    for a, b in zip(path, path[1:]):
        link = _link(topo, a, b)
        ser = link.serialization_ns(frame)
        L += link.latency_ns + ser
        how.append(f"{a}-{b} {link.latency_ns}+{ser}")
        node = topo.nodes[b]
        if node.kind != "host":
            d = getattr(node.spec, "processing_delay_ns", 0)
            L += d
            if d:
                how.append(f"{b} {d}")
    bw = _link(topo, path[0], path[1]).bandwidth_bps if len(path) > 1 else 10**11
    G = Fraction(8 * 10**9, bw)
    p = LogGP(L=L, o=o, g=0, G=G, O=0, S=spec.eager_limit_bytes)
    return p, {"L": " + ".join(how), "o": f"max(send_overhead {spec.send_overhead_ns}, recv_overhead "
                                              f"{spec.recv_overhead_ns})",
               "G": f"8e9 / {bw} bit/s ns per byte", "g": "0 (no per-message gap)", "S": "host.eager_limit_bytes"}


def _link(topo, a: str, b: str):
    for _port, peer, _pp, link in topo.neighbours()[a]:
        if peer == b:
            return link.spec
    raise KeyError(f"no link {a}-{b}")


def per_rank_rows(s: Schedule, results: list[dict], hosts: list[str]) -> list[dict]:
    """Rows ``emu report`` draws (its MPI-calls plot: each operation kind a call kind)."""
    rows = []
    for res in results:
        rows.append({"rank": res["rank"], "host": hosts[res["rank"]], "end_ns": res["end_ns"], "ops": res["ops"],
                     "unmatched": res["unmatched"],
                     "calls": {k: {"count": v["count"], "bytes": v["bytes"], "virtual_ns": v["busy_ns"]}
                               for k, v in res["kinds"].items()}})
    return rows


def totals(results: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for res in results:
        for k, v in res["kinds"].items():
            t = out.setdefault(k, {"count": 0, "bytes": 0, "busy_ns": 0})
            for f in t:
                t[f] += v[f]
    return out


__all__ = ["CALC", "SEND", "critical_path", "loggp_of", "path_summary", "per_rank_rows", "totals"]
