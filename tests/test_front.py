"""The front door fits people's habits (issue 9): the ways people expect to call ``emu``."""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_license_file_matches_the_package_metadata():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    text = (ROOT / "LICENSE").read_text()
    assert meta["license"]["text"] == "MIT" and text.startswith("MIT License\n")
    assert "Copyright (c) 2026 hpc-emu contributors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


async def test_cluster_repr_says_topology_hosts_processes_and_virtual_time():
    from emu import Cluster

    net = Cluster("fattree:k=2,n=2", processes=2)
    assert repr(net) == ("<Cluster fattree:k=2,n=2: 4 hosts, 4 switches, 2 processes, virtual time 0 ns, "
                         "not started>")
    async with net:
        rtt = await net["h0"].ping("h3")
        assert repr(net) == (f"<Cluster fattree:k=2,n=2: 4 hosts, 4 switches, 2 processes, "
                             f"virtual time {net.now:,} ns, running>") and net.now >= rtt > 0
    assert repr(net).endswith(f"virtual time {net.now:,} ns, closed>")
    assert repr(Cluster("star:n=3")).startswith("<Cluster star:n=3: 3 hosts, 1 switch, 1 process,")


def emu_cmd(*args, module=False, **kw):
    import subprocess
    import sys

    exe = [sys.executable, "-m", "emu"] if module else [str(pathlib.Path(sys.executable).parent / "emu")]
    return subprocess.run([*exe, *args], capture_output=True, text=True, timeout=120, **kw)


def test_version_comes_from_the_installed_metadata():
    from importlib.metadata import version

    for module in (False, True):
        out = emu_cmd("--version", module=module)
        assert (out.returncode, out.stdout) == (0, f"emu (hpc-emu) {version('hpc-emu')}\n")


def test_python_dash_m_emu_works_like_emu():
    a, b = emu_cmd("topo", "star:n=5"), emu_cmd("topo", "star:n=5", module=True)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and "hosts" in a.stdout
    bad = emu_cmd("topo", "fattree:k=4", module=True)
    assert bad.returncode == 2 and "fattree: missing parameter n;" in bad.stdout
