"""Where a collective runs is one object by name (issue 43, item 1; design principle 8): the
registry of offloads (``emu.nodes.collectives.offloads``) is the only place that tells them apart."""

import json
import pathlib
import re

import numpy as np
import pytest

from emu.config import ConfigError
from emu.nodes.collectives.offloads import OFFLOADS, Offload, offload_named, register_offload, unregister_offload

ROOT = pathlib.Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "nodes" / "collectives" / "offloads"

NAME_TEST = re.compile(
    r"""(\b\w*offload\w*|\bwhere)(\.\w+)?\s*(==|!=|(not\s+)?in\s*[(\[{]|is\s+(not\s+)?None)"""  # offload == ..., o.offload in (...
    r"""|(==|!=)\s*\w*offload\b"""                                                            # ... == offload
    r"""|\bSUPPORTS\s*=""")                                                                   # a table of names beside the registry
"""A test on an offload's name: what only the offload modules may do."""


def test_the_name_test_pattern_catches_what_the_registry_replaced():
    for line in ('if offload == "switch":', 'if o.offload != "nic" or x', 'if args.offload not in (None, *X):',
                 'elif where == "hw":', 'if self.offload == "hw" and n > 1:', 'if offload is None:',
                 'if "nic" == offload:', 'SUPPORTS = {"nic": ("allreduce",)}', 'if offload in {"nic", "hw"}:'):
        assert NAME_TEST.search(line), line
    for line in ('off = offload_named(offload)', 'if off.needs_manager:', 'kind == "switch"', 'if anywhere is None:',
                 'offload=offload, branch=branch', 'if args.branch is not None and not offload:'):
        assert not NAME_TEST.search(line), line


def test_no_offload_name_is_tested_outside_the_offload_modules():
    found = []
    for folder in ("emu", "nodes", "switch", "topologies", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            if REGISTRY in path.parents:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if NAME_TEST.search(code):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == [], "\n".join(found)


def test_the_built_in_offloads_and_what_they_say():
    assert list(OFFLOADS) == ["none", "nic", "switch", "hw"]  # --offload {none,nic,switch,hw}
    assert offload_named(None) is OFFLOADS["none"]
    by_op = {op: [n for n, o in OFFLOADS.items() if not o.hosted and o.supports(op)]
             for op in ("allreduce", "reduce", "bcast", "barrier", "allgather")}
    assert by_op == {"allreduce": ["nic", "switch", "hw"], "reduce": ["nic", "switch"], "bcast": ["switch", "hw"],
                     "barrier": ["switch", "hw"], "allgather": []}
    # the operations' one-line summaries (emu run --help) name the same offloads
    from emu.nodes.collectives.operations import OPERATIONS

    for op, names in by_op.items():
        said = re.search(r"--offload ([a-z ,]+)\)", OPERATIONS[op].summary)
        assert sorted(re.findall(r"\w+", said.group(1)) if said else []) == sorted(names + ["or"] * (len(names) > 1))
    assert [n for n, o in OFFLOADS.items() if o.needs_manager] == ["switch"]
    assert [n for n, o in OFFLOADS.items() if o.sparse] == ["none", "switch"]


def test_an_unknown_offload_is_refused_in_one_line_naming_the_known_ones(capsys):
    with pytest.raises(ConfigError) as e:
        offload_named("gpu")
    assert str(e.value) == "--offload gpu: not a place a collective runs; give one of none, nic, switch, hw"
    from emu.front.cli import main

    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--offload", "gpu"]) == 2
    out = capsys.readouterr().out.strip()
    assert "--offload gpu: not a place a collective runs; give one of none, nic, switch, hw" in out
    assert len(out.replace("error:", "").strip().splitlines()) == 1, out


class Mirror(Offload):
    """An offload of its own, one class: an allreduce that delegates to host software under another name."""

    name = "mirror"
    summary = "host software under another name (a test)"
    title = "mirror"
    operations = ("allreduce",)

    async def allreduce(self, comm, x, op, root, algo, branch):
        y = await offload_named("none").run(comm, "allreduce", x, op, root, algo, branch)
        comm.last_algo = f"mirror({comm.last_algo})"
        return y

    def estimate(self, operation, o, ranks, spec):
        return None  # counted as host software is


@pytest.fixture
def mirror():
    register_offload(Mirror)
    yield OFFLOADS["mirror"]
    unregister_offload("mirror")


def _run(capsys, *args):
    from emu.front.cli import main

    code = main(["run", "--topo", "star:n=4", *args, "--json", "-"])
    out = capsys.readouterr()
    return code, (json.loads(out.out)["results"] if code == 0 else out.out + out.err)


def test_a_new_offload_is_one_class_and_runs_through_emu_run(mirror, capsys):
    code, [mine] = _run(capsys, "--test", "allreduce", "--offload", "mirror", "--size", "4KiB")
    code2, [soft] = _run(capsys, "--test", "allreduce", "--offload", "none", "--size", "4KiB")
    assert code == code2 == 0 and mine["ok"] and mine["result"] == "equal to numpy"
    assert mine["algo"] == f"mirror({soft['algo']})"
    assert (mine["completion_ns"], mine["frames"], mine["bytes"]) == (soft["completion_ns"], soft["frames"], soft["bytes"])
    # a sweep over offloads takes it too, and what it does not run is refused in its words
    code, rows = _run(capsys, "--test", "allreduce", "--offload", "none,mirror", "--size", "1KiB")
    assert code == 0 and [r["algo"].startswith("mirror(") for r in rows] == [False, True]
    code, out = _run(capsys, "--test", "bcast", "--offload", "mirror")
    assert code == 2 and "bcast cannot be offloaded to mirror; allreduce can" in out


async def test_a_new_offload_runs_through_comm(mirror):
    from emu import Cluster
    from emu.nodes.collectives import Comm

    async def app(host):
        comm = Comm(host)
        x = np.arange(8, dtype=np.float32) * (comm.rank + 1)
        y = await comm.allreduce(x, offload="mirror")
        with pytest.raises(ConfigError, match="bcast cannot be offloaded to mirror"):
            await comm.bcast(x, offload="mirror")
        return y, comm.last_algo

    async with Cluster("star:n=3") as net:
        out = await net.run({h: (app,) for h in net.hosts})
    for y, algo in out.values():
        assert np.array_equal(y, np.arange(8, dtype=np.float32) * 6) and algo.startswith("mirror(")
