"""``emu replay TRACE --format chakra``: a Chakra execution trace (one ``.et`` file per rank) replayed.

``TRACE`` is a directory of ``NAME.R.et`` files, one of them, or their prefix ``NAME`` (Astra-sim's
naming: rank R's file is ``NAME.R.et``). Every file is read once before the run, a node at a time
(``emu.nodes.workload.chakra.check_file``: malformed messages, dependencies on nodes a file lacks,
cycles, messages to ranks the trace does not have -- refused in one line naming the file and the
node), then read again by its rank's host as the run consumes it. Collectives run by the
emulator's own algorithms: ``--algo`` picks one (``NAME`` for every collective that has it, or
``COLL=NAME``), ``--offload`` runs those it takes on the NICs, switches or network hardware (the
communicator set up first, in a run of its own, as ``emu run`` does).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re

from ..config import ConfigError

_RANKED = re.compile(r"^(.*)\.(\d+)\.et$")


def is_chakra(path: str, fmt: str | None) -> bool:
    if fmt is not None:
        return fmt == "chakra"
    return path.endswith(".et") or os.path.isdir(path) or (not os.path.exists(path) and bool(glob.glob(
        glob.escape(path) + ".*.et")))


def rank_files(path: str) -> list[str]:
    """The files of ranks 0, 1, ... of the trace ``path`` (a directory, a rank's file, a prefix)."""
    if os.path.isdir(path):
        found = sorted(glob.glob(os.path.join(glob.escape(path), "*.et")))
        if not found:
            raise ConfigError(f"{path}: no .et files in this directory; give the folder of a Chakra trace "
                              "(NAME.0.et, NAME.1.et, ...)")
        prefixes = {m.group(1) for m in map(_RANKED.match, found) if m}
        if len(prefixes) != 1:
            raise ConfigError(f"{path}: its .et files are not one trace's NAME.R.et files ({len(prefixes)} names); "
                              "keep one trace per folder, or give its prefix")
        prefix = prefixes.pop()
    else:
        m = _RANKED.match(path)
        prefix = m.group(1) if m else path
        if not m and path.endswith(".et"):
            if not os.path.isfile(path):
                raise ConfigError(f"{path}: no such file; give a Chakra trace's NAME.R.et file, its folder or prefix")
            return [path]  # one rank's trace alone
    ranks = {}
    for p in glob.glob(glob.escape(prefix) + ".*.et"):
        m = _RANKED.match(p)
        if m and m.group(1) == prefix:
            ranks[int(m.group(2))] = p
    if not ranks:
        raise ConfigError(f"{path}: no such trace; give a Chakra trace's folder, a NAME.R.et file or the prefix NAME")
    missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ConfigError(f"{prefix}.{missing[0]}.et is missing{more}: the trace has ranks up to {max(ranks)}; "
                          "give every rank's file")
    return [ranks[r] for r in range(len(ranks))]


def load_groups(path: str | None, nranks: int) -> dict | None:
    """Process groups (``--comm-groups FILE.json``, Astra-sim's form ``{"NAME": [ranks]}``)."""
    if path is None:
        return None
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise ConfigError(f"--comm-groups {path}: {e.strerror}; give a JSON file of process groups") from None
    except ValueError as e:
        raise ConfigError(f"--comm-groups {path}: not JSON ({e}); write {{\"NAME\": [ranks], ...}}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"--comm-groups {path}: an object of groups expected: {{\"NAME\": [ranks], ...}}")
    out = {}
    for name, ranks in doc.items():
        if not (isinstance(ranks, list) and ranks and all(type(r) is int and 0 <= r < nranks for r in ranks)
                and len(set(ranks)) == len(ranks)):
            raise ConfigError(f"--comm-groups {path}: group {name!r} must list distinct ranks 0..{nranks - 1}")
        out[str(name)] = tuple(ranks)
    return out


class Trace:
    """A checked trace: its files, rank count, groups, node count, digest and collectives."""

    def __init__(self, path: str, groups_path: str | None, window: int):
        from emu.nodes.workload.chakra import check_file

        self.path = path
        self.files = rank_files(path)
        self.num_ranks = len(self.files)
        self.groups = load_groups(groups_path, self.num_ranks)
        self.window = window
        self.collectives: dict[tuple, int] = {}
        self.ops = 0
        digest = hashlib.sha256()
        for r, p in enumerate(self.files):
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            digest.update(h.digest())
            with open(p, "rb") as f:
                self.ops += check_file(f, p, r, self.num_ranks, self.groups, window, self.collectives)
        self.sha256 = digest.hexdigest() if self.num_ranks > 1 else h.hexdigest()
        """One file: its sha256; several: the sha256 of their sha256s in rank order."""


def algo_plan(trace: Trace, algo: str | None, offload: str | None, branch: int | None) -> tuple[dict, list]:
    """Per collective (name, group, size): (algorithm, offload, branch); and the offloads' setups to
    run before the replay. ``algo``: ``NAME`` (every collective having it) or ``COLL=NAME,...``."""
    from emu.nodes.collectives.offloads import offload_named
    from emu.nodes.collectives.select import ALGORITHMS, canonical, check

    given: dict[str, str] = {}
    if algo:
        for part in algo.split(","):
            coll, eq, name = part.strip().partition("=")
            if eq:
                if coll not in ALGORITHMS:
                    raise ConfigError(f"--algo {part}: {coll} is no collective; known: {', '.join(ALGORITHMS)}")
                given[coll] = name
            else:
                for c in ALGORITHMS:
                    try:
                        canonical(c, coll)
                    except ConfigError:
                        continue
                    given.setdefault(c, coll)
        if not given:
            raise ConfigError(f"--algo {algo}: no collective has such an algorithm; write NAME or COLL=NAME")
    off = offload_named(offload)
    plan, setups = {}, []
    for (name, members, size), _count in sorted(trace.collectives.items(), key=lambda kv: repr(kv[0])):
        a = given.get(name)
        if a is not None and not off.own_algos:
            try:
                check(name, canonical(name, a), len(members))
            except ConfigError as e:
                raise ConfigError(f"--algo {a} for the {name} of {len(members)} ranks: {e}") from None
        plan[(name, members, size)] = (a, None, branch)
        if offload and off.supports(name) and len(members) > 1:
            setups.append((name, members, size))
    return plan, setups


async def _prepare(net, trace: Trace, hosts: list[str], plan: dict, setups: list, offload: str) -> None:
    """Each collective the offload takes: validated on this network, its communicator set up in an
    episode of its own (``run_collective``'s way); one it refuses runs in host software."""
    from emu.nodes.collectives.offloads import offload_named
    from emu.nodes.collectives.run import setup_app
    from emu.nodes.workload.chakra_replay import operand

    off = offload_named(offload)
    for name, members, size in setups:
        algo, _, branch = plan[(name, members, size)]
        x = operand(name, size, len(members))
        dtype, count = ("float32", 0) if x is None else (str(x.dtype), x.shape[-1])
        mh = [hosts[r] for r in members]
        try:
            branch, setup = await off.prepare(net, name, mh, dtype, "sum", count, 0, branch, algo)
        except ConfigError:
            continue
        plan[(name, members, size)] = (algo, offload, branch)
        if setup is not None:
            fn, args = setup
            await net.run({h: (setup_app, mh, fn, *args) for h in mh})


async def _run(topo, trace: Trace, hosts, run, capture, plan, setups, offload, keep):
    from emu.nodes.workload.chakra_replay import chakra_rank

    from .cluster import Cluster

    async with Cluster(topo, capture=capture, run=run) as net:
        if setups:
            await _prepare(net, trace, hosts, plan, setups, offload)
        t0 = net.now
        m0 = (net.metrics.frames, net.metrics.bytes) if net.metrics is not None else (0, 0)
        out = await net.run({h: (chakra_rank, r, trace.files[r], hosts, bool(run.trace), trace.num_ranks,
                                 trace.groups, trace.window, plan, keep) for r, h in enumerate(hosts)})
        results = [out[h] for h in hosts]
        for res in results:
            res["end_ns"] = max(0, res["end_ns"] - t0)
            if keep:
                for k in ("start", "end", "ready"):
                    res[k] = type(res[k])("q", (v - t0 if v >= 0 else v for v in res[k]))
        return results, net.metrics, m0


def run_trace(topo, trace: Trace, hosts: list[str], run=None, capture: str | None = None, algo: str | None = None,
              offload: str | None = None, branch: int | None = None, keep: bool = True):
    """Replay ``trace`` (rank r on ``hosts[r]``): each rank's figures (``chakra_rank``, times from
    the replay's start), the run's metrics, and (frames, bytes) the offloads' setups took."""
    import trio

    from ..config import RunConfig

    plan, setups = algo_plan(trace, algo, offload, branch)
    run = run or RunConfig()
    return trio.run(_run, topo, trace, hosts, run, capture, plan, setups, offload, keep)


class PathView:
    """What ``replay_path.critical_path`` reads of a schedule, from the ranks' kept arrays."""

    class _Rank:
        def __init__(self, res, goal: bool):
            self.kind, self.ids, self.labels, self.goal = res["kind"], res["ids"], res.get("labels"), goal
            self.line = res["lines"] if goal else res["ids"]

        def name(self, i: int) -> str:
            if self.labels and self.labels[i] is not None:
                return self.labels[i]
            return f"#{i}" if self.goal else f"node {self.ids[i]}"

    def __init__(self, results: list[dict], goal: bool = False):
        self.ranks = [self._Rank(r, goal) for r in results]


def replay_trace(opts, run) -> dict:
    """Run the replay of ``opts`` (``replay_goal.Options`` of a Chakra trace); what ``--json`` writes."""
    import time

    from ..errors import DeadlockError
    from .checks import named_links
    from .replay_path import critical_path, path_summary, per_rank_rows, totals

    t, a = opts.schedule, opts.args
    keep = a.path > 0 or bool(a.json)
    t0 = time.perf_counter()
    try:
        results, metrics, setup = run_trace(opts.topo, t, opts.hosts, run, a.pcap, a.algo, a.offload, a.branch, keep)
    except DeadlockError as e:
        text = str(e)
        for h, r in sorted({h: r for r, h in enumerate(opts.hosts)}.items(), key=lambda x: -len(x[0])):
            text = text.replace(f"{h} blocked", f"rank {r} ({h}) blocked")
        raise DeadlockError(f"{a.schedule}: the replay cannot go on: {text}") from None
    wall = time.perf_counter() - t0
    steps = critical_path(PathView(results), results) if keep else []
    for res in results:  # (the arrays are the critical path's; the row keeps the figures)
        for k in ("start", "end", "ready", "cause", "matched", "sent", "kind", "ids", "lines", "labels", "_by_end"):
            res.pop(k, None)
    algos: dict[str, int] = {}
    for res in results:
        for k, v in res["algos"].items():
            algos[k] = algos.get(k, 0) + v
    return {"topology": a.topo, "name": f"replay {os.path.basename(a.schedule.rstrip('/'))}", "format": "chakra",
            "schedule": os.path.abspath(a.schedule), "files": [os.path.abspath(p) for p in t.files],
            "sha256": t.sha256, "ranks": t.num_ranks, "ops": t.ops,
            "completion_ns": max((r["end_ns"] for r in results), default=0),
            "virtual_ns": metrics.end_ns - metrics.start_ns, "frames": metrics.frames, "bytes": metrics.bytes,
            "setup_frames": setup[0], "setup_bytes": setup[1], "hop_count": metrics.hop_count,
            "wall_s": round(wall, 3), "ops_per_wall_s": round(t.ops / wall) if wall > 0 else None,
            "collectives": algos, "offload": a.offload, "window": t.window,
            "totals": totals(results), "critical_path": {"summary": path_summary(steps), "steps": steps},
            "per_rank": per_rank_rows(None, results, opts.hosts),
            "per_link": named_links(opts.topo, metrics.per_link())}
