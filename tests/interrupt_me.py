"""Run by test_cluster: a two-process cluster busy for a long time, to be interrupted with SIGINT."""

import sys

import trio

import emu
from emu.topologies import star

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import apps  # noqa: E402


async def main():
    async with emu.Cluster(star(4), processes=2) as net:
        print("pids", " ".join(map(str, net.worker_pids)), flush=True)
        await net.run({"h0": (apps.send_to, "h3", 1000, 0, 10**7), "h3": (apps.recv_n, 10**7)})


trio.run(main)
