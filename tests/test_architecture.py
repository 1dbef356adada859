"""docs/architecture.md's example NIC mechanism runs as written: one file, one registration line."""

import pathlib
import re
import sys

import pytest

import emu
from emu import topologies
from emu.config import HostSpec
from emu.nodes.nic.engine import BUILT_IN, NicEngine

DOC = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC, re.S)


@pytest.fixture
def counter(tmp_path, monkeypatch):
    """The example mechanism, written to counter.py and imported as a user would."""
    mech = next(b for b in _blocks() if b.startswith("# counter.py"))
    (tmp_path / "counter.py").write_text(mech)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("counter", None)
    import counter as module

    yield module
    from emu.nodes.nic.interface import MECHANISMS

    MECHANISMS.pop("counter", None)
    sys.modules.pop("counter", None)


def test_the_example_mechanism_is_short():
    mech = next(b for b in _blocks() if b.startswith("# counter.py"))
    code = [ln for ln in mech.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(code) <= 40, len(code)
    assert mech.count("register_mechanism") == 2  # imported once, registered once


async def test_the_example_mechanism_runs_as_the_doc_says(counter):
    usage = next(b for b in _blocks() if "import counter" in b)
    ns: dict = {}
    exec(usage.replace("import counter", "pass"), ns)  # the module is imported by the fixture
    t = topologies.star(4)
    for h in t.host_names():
        t.nodes[h].info["nic_mechanisms"] = (*BUILT_IN, "counter")

    async def timed(host, n):
        t0 = host.now
        value = await ns["app"](host, n)
        return value, host.now - t0

    async def ping(host):
        t0 = host.now
        await host.ping("h0")
        return host.now - t0

    async with emu.Cluster(t) as net:
        res = await net.run({h: (timed, i + 1) for i, h in enumerate(net.hosts)})
        adds = {st["name"]: st["counter"]["adds"] for st in await net.stats() if "counter" in st}
        assert adds == {"h0": 4, "h1": 0, "h2": 0, "h3": 0}  # every add landed at h0
        # each host saw the running sum just after its own add: in the order the adds reached h0,
        # each value is the one before plus that host's own number
        seen = sorted((v, i + 1) for i, (v, _) in enumerate(res[h] for h in net.hosts))
        assert [v for v, _ in seen] == [sum(n for _, n in seen[:k + 1]) for k in range(4)]
        rtt = (await net.run({"h1": ping}))["h1"]
        alone = (await net.run({"h1": (timed, 5)}))["h1"]
        assert alone == (15, rtt)  # one add's round trip is exactly a ping's: same frames, same delays


def test_a_nic_without_the_mechanism_refuses_its_verb_in_one_line(counter):
    nic = NicEngine("h1", 1, HostSpec(), None, {"h0": 0, "h1": 1}, ["h0", "h1"])
    assert "counter" not in nic.loaded and nic.verb_owner("counter_add") is None
    with pytest.raises(AttributeError, match="no 'counter_add'.*mechanisms loaded on h1 \\(coll, qsnet, inc, coding\\)"):
        nic.host.api.counter_add("h0", 1)
    with_counter = NicEngine("h1", 1, nic.spec, None, {"h0": 0, "h1": 1}, ["h0", "h1"], mechanisms=(*BUILT_IN, "counter"))
    assert with_counter.verb_owner("counter_add") is with_counter.mechanism("counter")
    with pytest.raises(ValueError, match="no NIC mechanism 'nosuch' is registered"):
        NicEngine("h1", 1, nic.spec, None, {"h0": 0, "h1": 1}, ["h0", "h1"], mechanisms=("nosuch",))


def test_registries_are_filled_from_entry_points_in_a_fresh_interpreter():
    """Nothing imported the engine or mechanism modules: asking for them by name finds them through
    the entry points pyproject.toml declares (groups emu.engines, emu.nic_mechanisms)."""
    import subprocess

    code = (
        "import sys\n"
        "from emu import plugins\n"
        "from emu.build import ENGINES\n"
        "assert 'emu.nodes.nic.engine' not in sys.modules and not ENGINES\n"
        "from emu.sim import EngineNet\n"
        "from emu.topologies import star\n"
        "net = EngineNet(star(2))\n"
        "assert sorted(ENGINES) == ['host', 'switch'], sorted(ENGINES)\n"
        "assert plugins.load(plugins.NIC_MECHANISMS, 'coll') and not plugins.load(plugins.NIC_MECHANISMS, 'nosuch')\n"
        "print(type(net.engines['h0']).__module__, net.engines['h0'].loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "emu.nodes.nic.engine ('coll', 'qsnet', 'inc', 'coding')"


def test_the_verbs_of_the_mechanisms_loaded_are_the_hosts_and_dir_lists_only_those(counter):
    plain = NicEngine("h1", 1, HostSpec(), None, {"h0": 0, "h1": 1}, ["h0", "h1"]).host.api
    with_counter = NicEngine("h1", 1, HostSpec(), None, {"h0": 0, "h1": 1}, ["h0", "h1"],
                             mechanisms=(*BUILT_IN, "counter"))
    api = with_counter.host.api
    assert api.counter_add == with_counter.mechanism("counter").counter_add  # the mechanism's own bound method
    assert api.put == with_counter.mechanism("qsnet").put and plain.put == plain._engine.nic.mechanism("qsnet").put
    assert "counter_add" in dir(api) and "counter_add" not in dir(plain)
    assert {"put", "nic_post", "send", "recv", "now", "_engine"} <= set(dir(plain))
    assert not hasattr(plain, "counter_add") and getattr(plain, "counter_add", 7) == 7
    with pytest.raises(AttributeError) as e:
        plain._nosuch  # noqa: B018 (a private name: Python's own AttributeError, as before)
    assert "the host API has no" not in str(e.value)
    with pytest.raises(AttributeError):
        plain.sned  # noqa: B018


def test_a_host_call_wins_over_a_verb_of_the_same_name():
    from emu.nodes.host import api

    send, now = api.HostAPI.__dict__["send"], api.HostAPI.__dict__["now"]
    api._offer_verbs(["send", "now", "_hidden"])
    assert api.HostAPI.__dict__["send"] is send and api.HostAPI.__dict__["now"] is now
    assert "_hidden" not in api.HostAPI.__dict__ and not {"send", "now", "_hidden"} & api._VERB_NAMES


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="CPython 3.11's names of specialised instructions")
async def test_the_hosts_calls_are_specialised_loads_even_after_dir():
    """The host API's class has no ``__getattr__`` (its verbs are descriptors): CPython 3.11 refuses to
    specialise any attribute load on instances of a class with one, and ``host.send`` cost ~900
    instructions more per call. ``dir(host)`` keeps the instance's inline attributes (``__dict__``
    would make them a dict for good, and the loads unspecialised again)."""
    import dis

    from emu.nodes.host.api import HostAPI

    assert "__getattr__" not in dir(HostAPI) and HostAPI.__getattribute__ is object.__getattribute__

    async def app(host):
        assert "put" in dir(host)
        for _ in range(30):  # (3.11 quickens a function after a few loops)
            await host.send("h1", b"x")
            await host.recv()
        return [i.opname for i in dis.get_instructions(app.__code__, adaptive=True) if i.argval in ("send", "recv")]

    async def peer(host):
        for _ in range(30):
            await host.recv()
            await host.send("h0", b"y")

    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
        loads = (await net.run({"h0": app, "h1": peer}))["h0"]
    assert loads == ["LOAD_METHOD_WITH_VALUES", "LOAD_METHOD_WITH_VALUES"], loads
