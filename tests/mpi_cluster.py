"""Run under ``mpiexec -n N python tests/mpi_cluster.py OUT.json``: a cluster whose domains are the
N ranks; rank 0 writes what the test checks (figures, who owns what, datagrams per element)."""

import json
import pathlib
import sys

import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import apps  # noqa: E402
import emu  # noqa: E402
from emu.mpi import entry, world  # noqa: E402


async def main(out: str) -> None:
    n = world()[1]
    run = emu.RunConfig(processes=n, mpi=n > 1, capture=True, direct=True)  # in one process: in memory
    async with emu.Cluster("fattree:k=4,n=2", run=run) as net:
        hosts = net.hosts
        res = await net.run({h: (apps.ping, hosts[(i + 5) % len(hosts)]) for i, h in enumerate(hosts)})
        procs = await net.process_stats()
        recs = await net.capture_records()
        m = net.metrics
        json.dump({"rtt": res, "end_ns": m.end_ns, "frames": m.frames, "hops": m.hop_count,
                   "owner": net.plan.owner, "windows": net.windows, "records": len(recs),
                   "datagrams": [p["udp_received"] for p in procs]},
                  open(out, "w"))


if __name__ == "__main__":
    entry(lambda: trio.run(main, sys.argv[1]))
