"""Smaller rough edges a new user met (issue 42, item 4)."""

import os
from pathlib import Path
import subprocess
import sys

from emu.front.runrecord import record


def test_import_emu_then_a_subpackage_by_attribute():
    # a fresh interpreter: nothing has imported emu.topologies yet
    code = "import emu; t = emu.topologies.build('star:n=3'); print(len(t.hosts), emu.switch.__name__)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["3", "emu.switch"]


def test_version_and_run_record_say_which_element_loop_runs():
    env = {**os.environ, "EMU_PURE": "1"}
    p = subprocess.run([sys.executable, "-m", "emu", "--version"], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and "element loop: pure Python (EMU_PURE is set)" in p.stdout, p.stdout + p.stderr
    from emu import native

    rec = record(["run"], topo=["star:n=2"], offload=[None], seed=0, processes=1, mpi=False, partition=None,
                 settings=[{}])
    assert rec["element_loop"] == ("compiled" if native.CORE is not None else "pure-python")


def test_a_row_says_only_what_its_operation_has(tmp_path):
    import json

    from emu.front.cli import main

    out = tmp_path / "r.json"
    assert main(["run", "--topo", "star:n=4", "--test", "barrier+alltoall+allreduce", "--json", str(out)]) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert rows["barrier"]["result"] == "every rank left"
    assert not {"size_bytes", "dtype", "op"} & set(rows["barrier"])  # a barrier moves no data
    assert rows["alltoall"]["dtype"] == "float32" and "op" not in rows["alltoall"]  # and reduces nothing
    assert rows["allreduce"]["op"] == "sum" and rows["allreduce"]["result"] == "equal to numpy"


def test_a_noise_sweep_may_start_at_zero_noise(tmp_path):
    import json

    from emu.front.cli import main

    out, base = tmp_path / "n.json", tmp_path / "b.json"
    common = ["run", "--topo", "star:n=4", "--test", "allreduce", "--size", "64KiB"]
    assert main([*common, "--set", "host.noise=periodic", "--set", "host.noise_interval_ns=10000",
                 "--set", "host.noise_duration_ns=0,2000", "--json", str(out)]) == 0
    assert main([*common, "--json", str(base)]) == 0
    rows = json.loads(out.read_text())["results"]
    quiet = json.loads(base.read_text())["results"][0]["completion_ns"]
    assert [r["point"]["host.noise_duration_ns"] for r in rows] == ["0", "2000"]
    assert rows[0]["completion_ns"] == quiet < rows[1]["completion_ns"]  # zero-length detours: no noise at all


def test_set_takes_the_units_of_its_field(tmp_path):
    import pytest

    from emu.config import ConfigError, load_settings, parse_settings

    got = parse_settings(["link.latency_ns=1us", "link.bandwidth_bps=25Gbps", "host.mtu_bytes=4KiB",
                          "host.rto_ns=1.5ms", "host.eager_limit_bytes=64K", "host.send_overhead_ns=435"])
    assert got == {"link": {"latency_ns": 1000, "bandwidth_bps": 25 * 10**9},
                   "host": {"mtu_bytes": 4096, "rto_ns": 1_500_000, "eager_limit_bytes": 65536,
                            "send_overhead_ns": 435}}
    (tmp_path / "c.toml").write_text('[link]\nlatency_ns = "250ns"\nbandwidth_bps = 400e9\n')
    assert load_settings(str(tmp_path / "c.toml")) == {"link": {"latency_ns": 250, "bandwidth_bps": 400 * 10**9}}
    for item, word in [("link.latency_ns=1GiB", "'GiB' is not a unit of a time"),
                       ("switch.vcs=4KiB", "takes a plain number"),
                       ("link.latency_ns=1.5ns", "must be an integer")]:
        with pytest.raises(ConfigError, match=word):
            parse_settings([item])


def test_a_core_that_fails_to_build_leaves_no_earlier_build_behind(tmp_path, monkeypatch):
    """A stale build of the compiled core is never packed into a wheel (issue 42): the build step
    removes the last build before compiling, so a failed (optional) build leaves none."""
    import pytest
    from setuptools import Distribution, Extension

    from emu.buildext import BuildExt

    (tmp_path / "broken.c").write_text("this is not C\n")
    dist = Distribution({"name": "x", "ext_modules": [Extension("pkg._core", [str(tmp_path / "broken.c")])]})
    cmd = BuildExt(dist)
    cmd.build_lib, cmd.build_temp = str(tmp_path / "lib"), str(tmp_path / "tmp")
    cmd.ensure_finalized()
    cmd.build_lib, cmd.build_temp = str(tmp_path / "lib"), str(tmp_path / "tmp")
    target = tmp_path / "lib" / cmd.get_ext_filename("pkg._core")
    target.parent.mkdir(parents=True)
    target.write_bytes(b"an old build")
    import emu
    ours = Path(emu.__file__).parent / os.path.basename(target)  # (this checkout's core, if built)
    built = ours.exists()
    with pytest.raises(Exception):  # CompileError: the C does not compile
        cmd.build_extension(dist.ext_modules[0])
    assert not target.exists()
    assert ours.exists() == built  # (another project's failed build never removes this one's core)


def test_per_link_names_parallel_links_as_emu_topo_does():
    from emu.front.checks import named_links
    from emu.topologies.registry import build

    t = build("qsnet:nodes=64")
    per = {t.port_name(lk.a, lk.a_port): {"frames": 1} for lk in t.links}
    names = [v["link"] for v in named_links(t, per).values()]
    assert sorted(names) == sorted(t.link_names())  # one name per link, s0-s8.0 and s0-s8.1 apart
    assert "s0-s8.0" in names and "s0-s8.1" in names
