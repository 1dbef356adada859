"""``--job NAME:hosts=...,mpirun=[PROGRAM.py,ARG,...]``: an unchanged mpi4py program as a job's
workload, as ``emu mpirun`` runs it (a process per rank, ``emu.rank``; ``--compute zero``: the
program's own CPU time is not charged, so the figures are deterministic), rank r on the job's r-th
host. Registered as the test ``mpirun`` when ``emu.front.jobs`` reads a job (only a job can name it: it
needs the program)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..config import ConfigError
from ..errors import EmuError
from .check_registry import Options, register


def program(text: str) -> list[str]:
    """``PROGRAM.py`` or ``[PROGRAM.py,ARG,...]``: the path and its arguments, the path checked."""
    import os

    items = [w.strip() for w in text.strip().strip("[]").split(",") if w.strip()] if text.strip().startswith("[") \
        else [text.strip()]
    if not items or not os.path.isfile(items[0]):
        raise ConfigError(f"mpirun={text}: {items[0] if items else '(nothing)'} is no file; give the path of an "
                          "mpi4py program (with its arguments: mpirun=[prog.py,ARG,...])")
    return items


@register("mpirun")
async def mpirun(net, options: Options) -> dict[str, Any]:
    """An mpi4py program on the job's hosts (a job's mpirun=[PROGRAM.py,ARG,...]; alone: emu mpirun)."""
    from .mpicalls import HANDLERS
    from .mpicoll import h_coll
    from .mpicomms import with_comms
    from .mpirun import Ranks
    from .mpiserve import Job, rank_app

    prog = options.extra.get("mpirun")
    if prog is None:
        raise ConfigError("the test mpirun runs a job's program: give --job NAME:hosts=...,mpirun=PROGRAM.py "
                          "(alone: emu mpirun)")
    hosts = net.hosts
    ranks = Ranks(SimpleNamespace(hosts=hosts, scale=0.0, target=[prog[0]], argv=prog[1:], tag=True))
    ranks.start()
    job = None
    try:
        job = Job(hosts, ranks.conns, None, 0.0, [p.pid for p in ranks.procs], ranks.procs)
        await net.run({h: (rank_app, job, r, with_comms({**HANDLERS, "coll": h_coll})) for r, h in enumerate(hosts)})
    finally:
        codes = ranks.stop(10.0 if job is not None and not job.failed else 0.5)
    bad = {r: c for r, c in enumerate(codes) if c}
    if bad:
        raise EmuError(f"rank(s) {', '.join(map(str, bad))} ended with status {', '.join(map(str, bad.values()))}")
    calls = sum(f.count for st in job.ranks if st for f in st.calls.values())
    return {"ranks": len(hosts), "program": " ".join(prog), "mpi_calls": calls}
