"""Engine kinds by name: the runtime builds whatever kind a node names, also in worker processes."""

import pytest

import apps
import emu
import hub  # noqa: F401  (registers the "hub" engine kind)
from emu.build import ENGINES, make_engine
from emu.sim import EngineNet
from emu.topologies import star


def hub_star(n):
    t = star(n)
    t.nodes["s0"].info["engine"] = "hub"
    return t


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_registered_engine_kind_runs_in_every_process(processes):
    t = hub_star(4)
    async with emu.Cluster(t, processes=processes) as net:
        rtt = await net["h0"].ping("h2")
        stats = {s["name"]: s for s in await net.stats()}
    assert stats["s0"]["kind"] == "hub" and stats["s0"]["engine"]["repeated"] == 2 * 3
    # the hosts the hub should not have reached count what they got as misdelivered
    assert stats["h1"]["engine"]["misdelivered"] == 2 and stats["h3"]["engine"]["misdelivered"] == 2
    assert rtt == EngineNet(t).run({"h0": (apps.ping, "h2")})["h0"]
    assert "hub" in net.plan.engine_modules and len(net.plan.engine_modules) == 2  # the hub, the hosts


def test_an_unknown_kind_is_refused_before_anything_starts():
    t = star(2)
    t.nodes["s0"].info["engine"] = "nosuch"
    with pytest.raises(emu.ConfigError, match="no engine kind 'nosuch' is registered"):
        emu.Cluster(t)
    assert make_engine(star(2), "s0").kind == "switch" and {"host", "switch", "hub"} <= set(ENGINES)


def test_the_readme_engine_example_runs_in_the_harness_and_shows_in_wireshark(tmp_path):
    import pathlib
    import re
    import shutil
    import subprocess

    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "class Hub" in b]
    ns: dict = {}
    exec(block.replace('"hub"', '"readme_hub"'), ns)   # registers it under a name of its own here
    t = star(3)
    t.nodes["s0"].info["engine"] = "readme_hub"
    net = EngineNet(t, seed=1, duplicate=0.2)
    assert net.run({"h0": (apps.ping, "h2")})["h0"] > 0
    assert net.engines["s0"].stats["repeated"] >= 4 and net.faults["duplicated"] >= 0
    assert len(ns["Hub"]("x", 3, 5).receive(b"f", 0, 10)) == 2


async def test_a_registered_engines_frames_decode_in_wireshark(tmp_path):
    import shutil
    import subprocess

    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    from emu.dissector import GENERATED_PATH
    import pathlib

    lua = pathlib.Path(emu.__file__).resolve().parent / GENERATED_PATH
    cap = tmp_path / "hub.pcapng"
    async with emu.Cluster(hub_star(3), capture=cap) as net:
        await net["h0"].ping("h2")
    out = subprocess.run(["tshark", "-X", f"lua_script:{lua}", "-r", str(cap), "-T", "fields",
                          "-e", "frame.interface_name", "-e", "hpcemu.fabric.ptype"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    rows = [r.split("\t") for r in out if r]
    # the request out of h0, into s0, repeated to h1 and h2; the reply back the same way
    assert sum(1 for iface, _ in rows if iface.startswith("s0-")) == 6 and {p for _, p in rows} == {"2", "3"}


def test_the_ground_floor_imports_nothing_above_it():
    import subprocess
    import sys

    code = ("import sys, emu, emu.build, emu.element, emu.domain, emu.sync, emu.worker, emu.control, emu.link, "
            "emu.port, emu.reduce, emu.faults, emu.pcapng, emu.dissector, emu.metrics, emu.config\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'nodes', 'switch', 'topologies'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
