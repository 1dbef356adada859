"""A topology family and a routing policy from outside the repository (issue 43, item 2, those
parts): a package that declares ``emu.topologies`` and ``emu.routing`` entry points is found by name
in every process of a run."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

RING = '''
from emu.config import ConfigError
from emu.topologies import Family, Param, Topology, register


def ring(n, *, link=None, host=None, switch=None):
    """n switches in a ring, a host on each."""
    if not isinstance(n, int) or not 3 <= n <= 64:
        raise ConfigError(f"ring: n must be an integer within 3..64, got {n!r}")
    t = Topology(f"ring:n={n}")
    for i in range(n):
        t.add_host(f"h{i}", host)
    for i in range(n):
        t.add_switch(f"s{i}", switch)
    for i in range(n):
        t.add_link(f"h{i}", f"s{i}", link)
    for i in range(n):
        t.add_link(f"s{i}", f"s{(i + 1) % n}", link)
    t.compute_routes()
    t.diameter, t.bisection = 2 + n // 2, 2
    return t


register(Family("ring", ring, (Param("n", int, True, "switches (and hosts)"),), "n switches in a ring"))
'''


LAST = '''
from emu.switch.routing import register


def last(engine, seed):
    """Always the highest-numbered of the minimal next hops (a policy as small as they come)."""
    def choose(dst, static, frame, now):
        return engine.candidates[dst][-1]
    return choose


register("last", last)
'''


MIRROR = '''
from emu.nodes.collectives.offloads import Offload, offload_named, register_offload


@register_offload
class Mirror(Offload):
    name, summary, title = "outside_mirror", "host software under another name, from a package", "mirror"
    operations = ("allreduce",)

    async def allreduce(self, comm, x, op, root, algo, branch):
        y = await offload_named("none").run(comm, "allreduce", x, op, root, algo, branch)
        comm.last_algo = f"mirror({comm.last_algo})"
        return y

    def estimate(self, operation, o, ranks, spec):
        return None
'''


FIXED = '''
from emu.nodes.nic.transport import RttEstimator, Transport, register_transport


class Fixed(RttEstimator):
    def sample(self, r):  # the measured round trip is not used: every message waits host.rto_ns
        self.samples += 1


@register_transport("outside_fixed_rto")
class FixedRto(Transport):
    """The reliable transport with a fixed timeout (host.rto_ns), as before RFC 6298."""

    def __init__(self, nic, put):
        super().__init__(nic, put)
        self.rtt = Fixed(self.spec.rto_ns, self.spec.rto_ns, self.spec.rto_ns)
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A package on a path of its own, with the metadata pip would write: ``ringpkg`` declaring the
    family ``ring`` in the group ``emu.topologies``."""
    d = tmp_path_factory.mktemp("site")
    (d / "ringpkg").mkdir()
    (d / "ringpkg" / "__init__.py").write_text("")
    (d / "ringpkg" / "ring.py").write_text(RING)
    (d / "ringpkg" / "last.py").write_text(LAST)
    (d / "ringpkg" / "mirror.py").write_text(MIRROR)
    (d / "ringpkg" / "fixed.py").write_text(FIXED)
    info = d / "ringpkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ringpkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [emu.topologies]
        ring = ringpkg.ring

        [emu.routing]
        last = ringpkg.last

        [emu.offloads]
        outside_mirror = ringpkg.mirror

        [emu.transports]
        outside_fixed_rto = ringpkg.fixed
        """))
    return d


def emu_run(site, tmp_path, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "emu", *args], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("how", [[], ["--processes", "2"], ["--direct"]], ids=["one", "two-processes", "direct"])
def test_a_family_from_an_installed_package_runs_by_name(site, tmp_path, how):
    out = tmp_path / "r.json"
    p = emu_run(site, tmp_path, "run", "--topo", "ring:n=6", "--test", "pingall+allreduce", *how, "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = json.loads(out.read_text())["results"]
    assert [r["name"] for r in rows] == ["pingall", "allreduce"] and all(r["ok"] for r in rows)
    assert rows[1]["result"] == "equal to numpy" and rows[1]["ranks"] == 6


def test_its_figures_are_the_same_in_one_process_and_two(site, tmp_path):
    figs = []
    for how in ([], ["--processes", "2"]):
        out = tmp_path / f"r{len(figs)}.json"
        assert emu_run(site, tmp_path, "run", "--topo", "ring:n=5", "--test", "allreduce", *how,
                       "--json", str(out)).returncode == 0
        figs.append({k: v for k, v in json.loads(out.read_text())["results"][0].items() if k != "wall_s"})
    assert figs[0] == figs[1]


def test_its_refusals_and_an_unknown_family(site, tmp_path):
    p = emu_run(site, tmp_path, "run", "--topo", "ring:n=2", "--test", "pingall")
    assert p.returncode == 2 and "ring: n must be an integer within 3..64, got 2" in p.stdout
    p = emu_run(site, tmp_path, "run", "--topo", "rung:n=4", "--test", "pingall")
    assert p.returncode == 2 and "unknown topology 'rung'" in p.stdout and len(p.stdout.splitlines()) == 1
    assert "ring (from ringpkg)" in p.stdout  # what is installed, and which package gives it


def test_a_routing_policy_from_an_installed_package_routes(site, tmp_path):
    figs = {}
    for routing, how in (("static", []), ("last", []), ("last", ["--processes", "2"]), ("last", ["--direct"])):
        out = tmp_path / "r.json"
        p = emu_run(site, tmp_path, "run", "--topo", "fattree:k=2,n=3", "--test", "alltoall", "--size", "4KiB",
                    "--set", f"switch.routing={routing}", *how, "--json", str(out))
        assert p.returncode == 0, p.stdout + p.stderr
        row = json.loads(out.read_text())["results"][0]
        assert row["result"] == "equal to numpy"
        busy = {v["link"]: v["frames"] for v in row["per_link"].values()}
        figs[(routing, tuple(how))] = (row["completion_ns"], sorted(busy.items()))
    assert figs[("last", ())] == figs[("last", ("--processes", "2"))] == figs[("last", ("--direct",))]
    assert figs[("last", ())][1] != figs[("static", ())][1]  # the policy chose other links than the tables
    p = emu_run(site, tmp_path, "run", "--topo", "fattree:k=2,n=2", "--test", "pingall", "--set", "switch.routing=lst")
    assert p.returncode == 2 and "unknown routing policy 'lst'" in p.stdout and "last (from ringpkg)" in p.stdout


def test_an_offload_from_an_installed_package_runs_by_name(site, tmp_path):
    rows = {}
    for offload, how in (("none", []), ("outside_mirror", []), ("outside_mirror", ["--processes", "2"]),
                         ("outside_mirror", ["--direct"])):
        out = tmp_path / "r.json"
        p = emu_run(site, tmp_path, "run", "--topo", "star:n=4", "--test", "allreduce", "--size", "4KiB",
                    "--offload", offload, *how, "--json", str(out))
        assert p.returncode == 0, p.stdout + p.stderr
        rows[(offload, tuple(how))] = json.loads(out.read_text())["results"][0]
    soft = rows[("none", ())]
    for key, r in rows.items():
        if key[0] == "outside_mirror":
            assert r["algo"] == f"mirror({soft['algo']})" and r["result"] == "equal to numpy"
            assert (r["completion_ns"], r["frames"]) == (soft["completion_ns"], soft["frames"])
    p = emu_run(site, tmp_path, "run", "--topo", "star:n=4", "--test", "allreduce", "--offload", "outside_mirro")
    assert p.returncode == 2 and len(p.stdout.splitlines()) == 1, p.stdout
    assert "outside_mirror (from ringpkg)" in p.stdout
    p = emu_run(site, tmp_path, "mpirun", "--help")
    assert p.returncode == 0 and "outside_mirror" in p.stdout  # emu mpirun --offload takes it too


def test_a_transport_from_an_installed_package_carries_host_messages(site, tmp_path):
    """A core link dies mid-allreduce: the built-in transport's timeout follows the measured round trip,
    the package's waits a fixed host.rto_ns (1 ms) -- the same collective, recovered later."""
    rows = {}
    for transport, how in (("reliable", []), ("outside_fixed_rto", []), ("outside_fixed_rto", ["--processes", "2"]),
                           ("outside_fixed_rto", ["--direct"])):
        out = tmp_path / "r.json"
        p = emu_run(site, tmp_path, "run", "--topo", "fattree:k=4,n=2", "--test", "allreduce", "--size", "64KiB",
                    "--fault", "at=10us,link=s0-s4,down", "--set", f"host.transport={transport}", *how,
                    "--json", str(out))
        assert p.returncode == 0, p.stdout + p.stderr
        row = json.loads(out.read_text())["results"][0]
        assert row["result"] == "equal to numpy"
        rows[(transport, tuple(how))] = (row["completion_ns"], row["frames"], row["dropped"])
    fixed = rows[("outside_fixed_rto", ())]
    assert fixed == rows[("outside_fixed_rto", ("--processes", "2"))] == rows[("outside_fixed_rto", ("--direct",))]
    assert rows[("reliable", ())][0] < 1_000_000 < fixed[0]  # a measured timeout against a fixed millisecond
    p = emu_run(site, tmp_path, "run", "--topo", "star:n=4", "--test", "allreduce", "--processes", "2",
                "--set", "host.transport=outside_fixed_rt")
    assert p.returncode == 2 and len(p.stdout.splitlines()) == 1, p.stdout + p.stderr
    assert "unknown host.transport 'outside_fixed_rt'" in p.stdout and "outside_fixed_rto (from ringpkg)" in p.stdout
