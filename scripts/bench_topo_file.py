#!/usr/bin/env python3
"""Loading a topology from a file against building it from its spec (issue 41: within 2x).

For each spec, builds the topology from the spec, writes it (``emu.topologies.files.dumps``, what
``emu topo SPEC --format FMT -o FILE`` writes) as node-link JSON and as GraphML, and loads each file
back (``emu.topologies.build(FILE)``, what ``--topo FILE`` does); prints CPU seconds (the best of
``--reps``: the machine may be shared) and the ratios load/build (the goal: at most 2) and
write/build, and checks that the loaded topology is the built one.

    python scripts/bench_topo_file.py [--reps 3] [SPEC ...]

``star:n=30000`` is past the family's own bound (4096 hosts on one switch): it is built by the
same steps as ``star:``, and a 30,001-element topology needs ``EMU_MAX_ELEMENTS`` above this
machine's default (set to 65536 here unless given). Times are of the emulator on this machine.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sys
import tempfile
import time

os.environ.setdefault("EMU_MAX_ELEMENTS", "65536")

from emu.config import HostSpec, LinkSpec, SwitchSpec  # noqa: E402
from emu.topologies import Topology, build  # noqa: E402
from emu.topologies.files import dumps  # noqa: E402

DEFAULT = ["star:n=30000", "fattree:k=16,n=3", "twolevel:ports=128,hosts=16384", "qsnet:nodes=4096"]
GOAL = 2.0


def big_star(n: int) -> Topology:
    """``star:n=N`` past the family's bound, given one spec object per kind as ``build`` gives it."""
    from emu.topologies.star import star_unbounded

    return star_unbounded(n, host=HostSpec(), link=LinkSpec(), switch=SwitchSpec())


def make(spec: str) -> Topology:
    name, _, rest = spec.partition(":")
    if name == "star" and rest.startswith("n=") and int(rest[2:]) > 4096:
        return big_star(int(rest[2:]))
    return build(spec)


def best(fn, reps: int):
    """fn's result and its least CPU time over ``reps`` calls, each from the same state (the previous
    result freed and collected: the collector's passes cost in proportion to what is alive)."""
    out, times = None, []
    for _ in range(reps):
        out = None
        gc.collect()
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return out, min(times)


def digest(t: Topology) -> str:
    """A digest of what a run reads of a topology (kept instead of the topology, which is freed
    before loading: the loads run with nothing else alive, as in a fresh ``emu run``)."""
    key = ([(n.name, n.kind, n.id, n.spec) for n in t.nodes.values()],
           [(lk.a, lk.a_port, lk.b, lk.b_port, lk.spec) for lk in t.links], sorted(t.routes.items()))
    return hashlib.sha256(repr(key).encode()).hexdigest()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("specs", nargs="*", default=DEFAULT)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    rows = [("spec", "format", "hosts", "links", "MB", "build_s", "write_s", "load_s", "load/build", "write/build")]
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.specs:
            t, t_build = best(lambda: make(spec), args.reps)
            want, hosts, links = digest(t), len(t.hosts), len(t.links)
            texts = {}
            for fmt in ("json", "graphml"):
                texts[fmt], t_write = best(lambda: dumps(t, fmt), 1)
                texts[fmt] = (texts[fmt], t_write)
            t = None
            for fmt, (text, t_write) in texts.items():
                path = os.path.join(tmp, f"t.{fmt}")
                with open(path, "w") as fh:
                    fh.write(text)
                u, t_load = best(lambda: build(path), args.reps)
                if digest(u) != want:
                    raise SystemExit(f"{spec} {fmt}: the topology loaded is not the one built")
                u = None
                worst = max(worst, t_load / t_build)
                rows.append((spec, fmt, str(hosts), str(links), f"{len(text) / 1e6:.1f}", f"{t_build:.2f}",
                             f"{t_write:.2f}", f"{t_load:.2f}", f"{t_load / t_build:.2f}", f"{t_write / t_build:.2f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print(f"\nworst load/build: {worst:.2f} (goal: at most {GOAL}); CPU seconds, best of {args.reps}")
    return 0 if worst <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
