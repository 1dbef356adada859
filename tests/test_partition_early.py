"""``emu run --processes N`` asks worker 1 for the partition as soon as the topology is built, before
the rest of the input is checked (those checks import the engines, which the partition then
overlaps), where nothing after changes the graph; else after the checks, as before. Whatever the
order, the graph asked is the final topology's, and bad input is refused in the same order."""

from __future__ import annotations

import pytest

import emu.front.run_prepare as rp
from emu.config import ConfigError
from emu.front.cli_parser import _parser
from emu.partition import graph_of


class FakeLaunch:
    def __init__(self, seen: list):
        self.seen, self.asked = seen, []

    async def ask_partition(self, graph, parts, method):
        self.seen.append("asked")
        self.asked.append((graph, parts, method))


def _args(*extra):
    return _parser(only="run").parse_args(["run", "--topo", "fattree:k=4,n=2", "--test", "allreduce", "--processes",
                                           "2", *extra])


@pytest.mark.parametrize("extra, early", [
    ((), True), (("--algo", "ring", "--size", "2KiB"), True),
    (("--offload", "switch"), False),  # (attaches the network manager: a node more)
    (("--manager", "on"), False), (("--fault", "at=0,link=h0-s0,ber=1e-6"), False)])
async def test_the_partition_is_asked_before_the_checks_where_the_graph_is_final(monkeypatch, extra, early):
    seen: list = []
    checked = rp._checked_run_args
    monkeypatch.setattr(rp, "_checked_run_args", lambda args: seen.append("checked") or checked(args))
    launch = FakeLaunch(seen)
    names, topo, faults, extra_ = await rp._prepare(_args(*extra), launch)
    assert seen[:2] == (["asked", "checked"] if early else ["checked", "asked"])
    assert launch.asked[0] == (graph_of(topo), 2, "metis")  # (the graph the plan will look it up by)


async def test_bad_input_is_refused_as_without_workers():
    """A bad option is the error reported, not the topology's, as with one process."""
    for argv in (["--topo", "fattree:k=3,n=2", "--seed", "-1"], ["--topo", "fattree:k=4,n=2", "--seed", "-1"]):
        args = _parser(only="run").parse_args(["run", *argv, "--processes", "2"])
        launch = FakeLaunch([])
        with pytest.raises(ConfigError, match="--seed"):
            await rp._prepare(args, launch)
