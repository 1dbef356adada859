"""Quality of service (issue 49 item 3): per-class buffer reserves in the shared buffer, per-class
counters in ``per_link``, more than two classes with a class map, weighted arbitration in the input-
queued router. Exact figures against hand models."""

from dataclasses import replace

import pytest

import apps
import emu
from emu.config import ConfigError, HostSpec, LinkSpec, QueueSpec, RunConfig, SwitchSpec, parse_settings
from emu.pause import PrioQueues
from emu.port import OutPort
from emu.switch.queues import SwitchQueues
from emu.topologies.base import Topology
from emu.topologies.registry import build
from emu.wire.fabric import PacketType, build_frame
from emu.wire.host import MSG

WIRE = 1024 + 50  # a full message segment on the wire, FCS included
FAST, SLOW = -(-WIRE * 8 // 100), -(-WIRE * 8 // 10)  # its time on a 100 and a 10 Gbit/s line (ns)


def _frame(prio, size=1024):
    return build_frame(1, 2, PacketType.MSG, MSG.pack(7, 0, 1 << 20, 0) + bytes(size), prio=prio)


def _admitted(spec, classes, ports=1):
    """Frames of ``classes`` (port i % ports) offered at time 0 to a switch whose ports send nothing:
    which were admitted."""
    ps = []
    for i in range(ports):
        p = OutPort(i, f"s0-p{i}", i, i, "h1", "h1-nic0", 100, 10**11)
        p.flow = PrioQueues(framing=p.framing)
        ps.append(p)
    SwitchQueues(spec, ps, 0, 5)
    out = []
    for i, c in enumerate(classes):
        p = ps[i % ports]
        g = p.flow.admit(_frame(c), 0)
        out.append(g is not None)
        if g is not None:
            p.hand_over(g, 0, None)
    return out, ps


def _model(buffer, alpha, reserve, classes, ports=1):
    """The documented rule, by hand: reserve first, then the shared rest under the dynamic threshold
    of the queue's bytes beyond its class's reserve."""
    n = WIRE
    by = [0] * 8
    queue: dict = {}
    shared = buffer - sum(reserve)
    out = []
    for i, c in enumerate(classes):
        q = queue.get((i % ports, c), 0)
        if by[c] + n <= reserve[c]:
            ok = True
        else:
            used = sum(max(0, b - r) for b, r in zip(by, reserve))
            free = shared - used
            ok = by[c] + n - max(reserve[c], by[c]) <= free and q - reserve[c] < alpha * free
        out.append(ok)
        if ok:
            by[c] += n
            queue[(i % ports, c)] = q + n
    return out


@pytest.mark.parametrize("shares, ports", [("", 1), ("0+4296", 1), ("0+0.4", 1), ("0.2+0.3", 2), ("0+0+0+30%", 2)])
def test_reserves_then_the_shared_rest_under_the_dynamic_threshold(shares, ports):
    buffer = 10 * WIRE
    spec = QueueSpec(buffer_bytes=buffer, alpha=1.0, class_shares=shares)
    reserve = spec.reserves or [0] * 8
    classes = [0] * 8 + [1] * 8 + [3] * 6 + [0, 1, 3] * 2
    got, ps = _admitted(spec, classes, ports)
    assert got == _model(buffer, 1.0, reserve, classes, ports)
    drops = [sum(p.flow.drops[c] for p in ps) for c in range(8)]
    assert drops == [sum(1 for k, ok in zip(classes, got) if k == c and not ok) for c in range(8)]


def test_a_reserve_admits_a_class_the_full_shared_buffer_would_refuse():
    buffer = 10 * WIRE
    # class 0 first: with no reserve it fills to alpha x free = half the buffer (5 frames), class 1
    # then 3 more (q < 5 - q); with 4 frames reserved for class 1, class 0 gets q < 6 - q: 3 frames,
    # class 1 its 4 reserved and 2 shared (q - 4 < 6 - 3 - (q - 4))
    got, _ = _admitted(QueueSpec(buffer_bytes=buffer), [0] * 8 + [1] * 8)
    assert got == [True] * 5 + [False] * 3 + [True] * 3 + [False] * 5
    got, _ = _admitted(QueueSpec(buffer_bytes=buffer, class_shares=f"0+{4 * WIRE}"), [0] * 8 + [1] * 8)
    assert got == [True] * 3 + [False] * 5 + [True] * 6 + [False] * 2


@pytest.mark.parametrize("sets, says", [
    (["queues.class_shares=0+0.5"], "queues.buffer_bytes=0 is unbounded; give queues.buffer_bytes too"),
    (["queues.buffer_bytes=10000", "queues.class_shares=0.5+0.5"], "reserve 10000 of queues.buffer_bytes=10000 bytes"),
    (["queues.buffer_bytes=10000", "queues.class_shares=6000+4000"], "leave nothing shared"),
    (["queues.buffer_bytes=10000", "queues.class_shares=0+1.5"], "each a fraction of queues.buffer_bytes"),
    (["queues.buffer_bytes=10000", "queues.class_shares=a"], "e.g. queues.class_shares=0+0.25"),
    (["queues.buffer_bytes=10000", "queues.class_shares=" + "+".join(["1"] * 9)], "up to 8 shares"),
    (["queues.class_map=0+9"], "priorities 0..7"),
])
def test_inconsistent_shares_and_maps_are_refused_in_one_line(sets, says):
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(".", r"\.").replace("+", r"\+")) as e:
        build("star:n=2", settings=parse_settings(sets))
    assert "\n" not in str(e.value)


def _two_ports(queues, late=50):
    """h0 (class 0) -> h2 and h1 (class 1) -> h3 through s0, 100 Gbit/s in, 10 Gbit/s out; h1's link
    ``late`` ns longer (no two arrivals at one instant)."""
    t = Topology("two-ports")
    t.add_host("h0", HostSpec(traffic_class=0))
    t.add_host("h1", HostSpec(traffic_class=1))
    t.add_host("h2")
    t.add_host("h3")
    t.add_switch("s0", SwitchSpec(queues=queues))
    for i, (lat, bw) in enumerate(((100, 10**11), (100 + late, 10**11), (100, 10**10), (100, 10**10))):
        t.add_link(f"h{i}", "s0", LinkSpec(latency_ns=lat, bandwidth_bps=bw), a_port=0, b_port=i)
    t.routes = {"s0": [0, 1, 2, 3]}
    return t


def _switch_model(arrivals, buffer, reserve, alpha=1.0, delay=50):
    """By hand: arrivals (time, class) at s0, class c to its own port (FIFO at 10 Gbit/s, a frame handed
    to it ``delay`` after it arrived); a frame holds its bytes from its arrival until its last bit has
    left. The admission rule of ``_model``. Per class: (admitted, dropped)."""
    done: dict = {0: [], 1: []}
    free = {0: 0, 1: 0}
    shared = buffer - sum(reserve)
    kept, lost = [0, 0], [0, 0]
    for a, c in sorted(arrivals):
        by = [WIRE * sum(1 for d in done[k] if d > a) for k in (0, 1)]
        if by[c] + WIRE <= reserve[c]:
            ok = True
        else:
            used = sum(max(0, by[k] - reserve[k]) for k in (0, 1))
            f = shared - used
            ok = by[c] + WIRE - max(reserve[c], by[c]) <= f and by[c] - reserve[c] < alpha * f
        if not ok:
            lost[c] += 1
            continue
        kept[c] += 1
        free[c] = max(a + delay, free[c]) + SLOW
        done[c].append(free[c])
    return kept, lost


@pytest.mark.parametrize("shares", ["", f"0+{6 * WIRE}"])
async def test_per_class_counters_and_reserves_on_a_switch_match_the_model(shares):
    """Two 40-segment messages, class 0 and class 1, through two 10 Gbit/s ports of one switch with a
    10-frame buffer: the tail drops of each class are the model's, and ``per_link``'s per-class
    counters add up to the port's."""
    buffer = 10 * WIRE
    q = QueueSpec(buffer_bytes=buffer, class_shares=shares)
    async with emu.Cluster(_two_ports(q), run=RunConfig(capture=True, direct=True)) as net:
        await net.run({"h0": (apps.send_to, "h2", 1024 * 40, 0), "h1": (apps.send_to, "h3", 1024 * 40, 0)})
        recs = await net.capture_records()
        base = net.plan.iface_base["s0"]
        link = net.metrics.per_link()
    arrivals = [(t, i - base) for t, i, d, f in recs if i in (base, base + 1) and d == 1]
    kept, lost = _switch_model(arrivals, buffer, q.reserves or [0] * 8)
    assert len(arrivals) == 80 and min(lost) > 0 or shares
    for c, port in ((0, "s0-p2"), (1, "s0-p3")):
        cls = link[port]["classes"]
        assert set(cls) == {str(c)}
        assert cls[str(c)]["frames"] == kept[c] == link[port]["frames"]
        assert cls[str(c)]["bytes"] == link[port]["bytes"] == kept[c] * WIRE
        assert cls[str(c)]["drops"] == lost[c] == link[port].get("tail_drops", 0)
    if shares:  # class 1's six reserved frames and its share of the rest, class 0 only the rest
        assert lost[1] < lost[0]
        no_res = _switch_model(arrivals, buffer, [0] * 8)
        assert no_res[1][1] > lost[1]


async def test_pauses_per_class():
    """A lossless class 3 beside lossy class 0 (prio 3 from host.traffic_class=3): the PAUSEs the
    incast raises are all class 3's, at both ends of the link."""
    sets = ["queues.buffer_bytes=40000", "queues.pfc_classes=3", "queues.xoff_bytes=6000", "queues.xon_bytes=3000",
            "queues.headroom_bytes=5000"]
    t = build("star:n=5", settings=parse_settings(sets))
    for h in ("h0", "h1"):
        t.nodes[h] = replace(t.nodes[h], spec=replace(t.nodes[h].spec, traffic_class=3))
    async with emu.Cluster(t, run=RunConfig(direct=True)) as net:
        await net.run({f"h{i}": (apps.send_to, "h4", 30_000, 0, 2) for i in range(4)})
        link = net.metrics.per_link()
    xoff = {p: v["classes"] for p, v in link.items() if any(c.get("xoff_tx") for c in v.get("classes", {}).values())}
    assert xoff and all(set(c for c, x in cls.items() if x["xoff_tx"]) == {"3"} for cls in xoff.values())
    for p, v in link.items():
        for c, x in v.get("classes", {}).items():
            assert not x["pauses"] or c == "3"
            assert not x["drops"] or c == "0"
    assert sum(v["3"]["xoff_tx"] for v in xoff.values()) == sum(v.get("xoff_tx", 0) for v in link.values())
    assert sum(x["pauses"] for v in link.values() for x in v.get("classes", {}).values()) == \
        sum(v.get("xoff_tx", 0) for v in link.values())
    for p, v in link.items():
        if "classes" in v and p.startswith("s0"):
            assert sum(x["frames"] for x in v["classes"].values()) == v["frames"]
            assert sum(x["bytes"] for x in v["classes"].values()) == v["bytes"]


def _three(queues):
    """h0, h2, h3 (classes 0, 1, 2) -> h1 through s0's 10 Gbit/s port."""
    t = Topology("three-classes")
    for h, c in (("h0", 0), ("h1", 0), ("h2", 1), ("h3", 2)):
        t.add_host(h, HostSpec(traffic_class=c))
    t.add_switch("s0", SwitchSpec(queues=queues))
    for i in range(4):
        t.add_link(f"h{i}", "s0", LinkSpec(latency_ns=100, bandwidth_bps=10**10 if i == 1 else 10**11), a_port=0, b_port=i)
    t.routes = {"s0": [0, 1, 2, 3]}
    return t


async def _ends(queues):
    async with emu.Cluster(_three(queues), run=RunConfig(direct=True)) as net:
        res = await net.run({**{h: (apps.send_to, "h1", 1024 * 100, c) for h, c in (("h0", 0), ("h2", 1), ("h3", 2))},
                             "h1": (apps.recv_n, 3)})
        link = net.metrics.per_link()
    return {tag: t for _s, tag, _n, t, *_ in res["h1"]}, link


async def test_three_classes_by_strict_priority_and_by_weights():
    """Three 100-segment messages of classes 0, 1, 2 into one 10 Gbit/s port (L: one segment's line
    time). Strict priority: class 2 ends after 100 L, 1 after 200 L, 0 after 300 L. DRR 1+2+3: class 2
    has half the line while all three wait (100 frames in 200 L), then class 1 two thirds of it (its
    33.3 frames left in 50 L: 250 L), then class 0 alone (300 L)."""
    L = SLOW
    strict, link = await _ends(QueueSpec(buffer_bytes=1 << 30))
    cls = link["s0-p1"]["classes"]
    assert {c: (v["frames"], v["bytes"]) for c, v in cls.items()} == {c: (100, 100 * WIRE) for c in "012"}
    for c, k in ((2, 100), (1, 200), (0, 300)):
        assert abs(strict[c] - k * L) <= 3 * L, (c, strict)
    drr, _ = await _ends(QueueSpec(arbiter="drr", weights="1+2+3"))
    for c, k in ((2, 200), (1, 250), (0, 300)):
        assert abs(drr[c] - k * L) <= 3 * L, (c, drr)
    assert (strict, drr) == ({2: 86_836, 1: 172_836, 0: 258_836}, {2: 174_556, 1: 216_696, 0: 258_836})


def test_a_jobs_class_takes_its_vc_group_on_input_queued_routers(tmp_path):
    """switch.classes=2 (VC groups, vc_policy=by_class): a job of class 1 gets host.class_vc=1 on its
    hosts; a class without a group is refused in one line."""
    from emu.front.jobs import Job, apply_host_specs

    t = build("star:n=4", settings=parse_settings(["switch.model=input_queued", "switch.vcs=4", "switch.classes=2",
                                                   "queues.arbiter=drr", "queues.weights=1+3"]))
    jobs = [Job("a", "pingall", ("h0", "h1")), Job("b", "pingall", ("h2", "h3"), traffic_class=1)]
    apply_host_specs(t, jobs, {}, {})
    assert [(t.nodes[h].spec.traffic_class, t.nodes[h].spec.class_vc) for h in ("h0", "h2")] == [(0, 0), (1, 1)]
    with pytest.raises(ConfigError, match="class=2 has no VC group on the input-queued routers") as e:
        apply_host_specs(t, [Job("c", "pingall", ("h0",), traffic_class=2)], {}, {})
    assert "\n" not in str(e.value)


def test_jobs_classes_go_through_the_class_map(tmp_path):
    """Three jobs of classes 0, 1, 2 with queues.class_map=0+3+5: their frames cross the switch in class
    queues 0, 3 and 5 (``per_link``'s classes), and each row says its class and prio."""
    import json

    from emu.front.cli import main

    out = tmp_path / "r.json"
    assert main(["run", "--topo", "star:n=6", "--set", "queues.arbiter=drr", "--set", "queues.class_map=0+3+5",
                 "--job", "a:hosts=h0+h1,test=allreduce,size=4KiB",
                 "--job", "b:hosts=h2+h3,test=allreduce,size=4KiB,class=1",
                 "--job", "c:hosts=h4+h5,test=allreduce,size=4KiB,class=2", "--no-isolated", "--json", str(out)]) == 0
    rows = {r["job"]: r for r in json.loads(out.read_text())["results"]}
    assert [(rows[j]["class"], rows[j]["prio"]) for j in "abc"] == [(0, 0), (1, 3), (2, 5)]
    seen = {c for v in rows["a"]["per_link"].values() for c in v.get("classes", {})}
    assert seen == {"0", "3", "5"}
    for p, v in rows["a"]["per_link"].items():
        if "classes" in v:
            assert sum(x["frames"] for x in v["classes"].values()) == v["frames"]


def _iq(queues, **kw):
    """h0 (class 0) and h2 (class 1) -> h1 through an input-queued router, 10 Gbit/s out to h1."""
    t = Topology("iq-two-classes")
    t.add_host("h0", HostSpec(traffic_class=0))
    t.add_host("h1")
    t.add_host("h2", HostSpec(traffic_class=1))
    t.add_switch("s0", SwitchSpec(model="input_queued", queues=queues, **kw))
    for i in range(3):
        t.add_link(f"h{i}", "s0", LinkSpec(latency_ns=100, bandwidth_bps=10**10 if i == 1 else 10**11), a_port=0, b_port=i)
    t.routes = {"s0": [0, 1, 2]}
    return t


async def _iq_ends(queues, processes=1, **kw):
    async with emu.Cluster(_iq(queues, **kw), run=RunConfig(direct=processes == 1), processes=processes) as net:
        res = await net.run({"h0": (apps.send_to, "h1", 1024 * 100, 0), "h2": (apps.send_to, "h1", 1024 * 100, 1),
                             "h1": (apps.recv_n, 2)})
    return {tag: t for _s, tag, _n, t, *_ in res["h1"]}, None


async def test_weighted_switch_allocation_in_the_input_queued_router():
    """The router's output to h1 is the bottleneck; both inputs always hold a ready frame. Strict
    priority (link.priority, the default): class 1 first, 100 line times L, class 0 after 200 L.
    queues.arbiter=drr 1+3: the output's arbiter gives class 1 three quarters of the grants while
    both wait: 133.3 L, class 0 200 L; equal weights: both near 200 L."""
    L = SLOW
    big = dict(vcs=4, vc_buffer_bytes=4 * 1088)  # (a head ready in another VC while one is in the pipeline)
    strict, _ = await _iq_ends(QueueSpec(), **big)
    drr13, _ = await _iq_ends(QueueSpec(arbiter="drr", weights="1+3"), **big)
    drr11, _ = await _iq_ends(QueueSpec(arbiter="drr"), **big)
    assert abs(strict[1] - 100 * L) <= 3 * L and abs(strict[0] - 200 * L) <= 3 * L, strict
    assert abs(drr13[1] - 400 * L / 3) <= 3 * L and abs(drr13[0] - 200 * L) <= 3 * L, drr13
    assert abs(drr11[1] - drr11[0]) <= 3 * L and abs(drr11[0] - 200 * L) <= 3 * L, drr11
    assert (strict, drr13, drr11) == ({1: 86_836, 0: 172_836}, {1: 116_076, 0: 172_836}, {0: 171_976, 1: 172_836})
    assert (await _iq_ends(QueueSpec(arbiter="drr", weights="1+3"), processes=2, **big))[0] == drr13  # (sockets)


async def _send_vc(host, dst, size, tag, vc):
    await host.send(dst, bytes(size), tag, vc=vc)


def _iq_chain(queues, classes):
    """h0 (class 0) and h2 (class 1) -> s0 -> s1 -> h1, input-queued routers of 4 VCs: at s1 both classes
    come in through one input, and its switch arbiter chooses between them (the input stage)."""
    t = Topology("iq-chain")
    t.add_host("h0", HostSpec(traffic_class=0))
    t.add_host("h1")
    t.add_host("h2", HostSpec(traffic_class=1))
    for s in ("s0", "s1"):
        t.add_switch(s, SwitchSpec(model="input_queued", queues=queues, vcs=4, vc_buffer_bytes=4 * 1088, classes=classes))
    fast = LinkSpec(latency_ns=100, bandwidth_bps=10**11)
    t.add_link("h0", "s0", fast, a_port=0, b_port=0)
    t.add_link("h2", "s0", fast, a_port=0, b_port=1)
    t.add_link("s0", "s1", fast, a_port=2, b_port=0)
    t.add_link("h1", "s1", LinkSpec(latency_ns=100, bandwidth_bps=10**10), a_port=0, b_port=1)
    t.routes = {"s0": [0, 2, 1], "s1": [0, 1, 0]}
    return t


async def test_weights_at_the_input_stage_of_a_router():
    """Both classes through one input of s1. In VCs of their own (``switch.classes=2``, each host's
    messages on the VC of its class: the class -> VC map), s1's input arbiter gives class 1 three
    quarters of its bottleneck as the output's did above (133.3 L, 200 L). Sharing the VCs, the mix
    entering s1 is what s0's VC allocator let in, turn by turn: near 1:1 whatever the weights."""
    L = SLOW
    ends = {}
    for name, q, classes in (("strict", QueueSpec(), 2), ("drr13", QueueSpec(arbiter="drr", weights="1+3"), 2),
                             ("shared", QueueSpec(arbiter="drr", weights="1+3"), 1)):
        async with emu.Cluster(_iq_chain(q, classes), run=RunConfig(direct=True)) as net:
            res = await net.run({"h0": (_send_vc, "h1", 1024 * 100, 0, 0), "h2": (_send_vc, "h1", 1024 * 100, 1, 1),
                                 "h1": (apps.recv_n, 2)})
        ends[name] = {tag: t for _s, tag, _n, t, *_ in res["h1"]}
    hop = ends["strict"][1] - 100 * L - 836  # (the second router's fixed delay: strict's class 1 ends 100 L in)
    assert 0 < hop < 2 * L
    assert abs(ends["drr13"][1] - hop - 836 - 400 * L / 3) <= 4 * L and abs(ends["drr13"][0] - 200 * L) <= 3 * L, ends
    assert abs(ends["shared"][1] - ends["shared"][0]) <= 4 * L  # (the weights cannot reach past the shared VCs)
    assert ends == {"strict": {1: 87_932, 0: 173_222}, "drr13": {1: 119_752, 0: 173_072},
                    "shared": {0: 170_492, 1: 173_222}}
    # the class -> VC map a job gets (HostSpec.class_vc): h2's messages sent on VC 0 go on VC 1
    t = _iq_chain(QueueSpec(arbiter="drr", weights="1+3"), 2)
    t.nodes["h2"] = replace(t.nodes["h2"], spec=replace(t.nodes["h2"].spec, class_vc=1))
    async with emu.Cluster(t, run=RunConfig(capture=True)) as net:
        res = await net.run({"h0": (apps.send_to, "h1", 1024 * 100, 0), "h2": (apps.send_to, "h1", 1024 * 100, 1),
                             "h1": (apps.recv_n, 2)})
        recs = await net.capture_records()
        base = net.plan.iface_base["s0"]
    assert {tag: t for _s, tag, _n, t, *_ in res["h1"]} == ends["drr13"]
    vcs = {(i - base, f[22] % 2) for _t, i, d, f in recs if i in (base, base + 1) and d == 1 and len(f) > 100}
    assert vcs == {(0, 0), (1, 1)}


def test_three_backlogged_classes_share_a_port_by_their_weights():
    """queues.arbiter=drr, weights 1+2+3, every class always backlogged: at every frame each class's
    bytes are within its quantum and one frame of its weight's share of the total (the deficit round
    robin bound: a class is at most one turn and one frame ahead or behind), and at the end of every
    round of turns -- when class 0's turn comes again -- within one frame."""
    spec = QueueSpec(arbiter="drr", weights="1+2+3")
    p = OutPort(0, "s0-p0", 0, 0, "h1", "h1-nic0", 100, 10**11)
    p.flow = PrioQueues(framing=p.framing)
    p.flow.quanta = spec.quanta
    SwitchQueues(spec, [p], 0, 5)
    for _ in range(700):
        for c in range(3):
            p.hand_over(p.flow.admit(_frame(c), 0), 0, None)
    t, last, rounds, dev = 0, 0, 0, []
    for _ in range(600):
        p.start_ready(t)
        t = p.free_at
        sent = p.flow.tx_bytes[:3]
        for c, w in enumerate((1, 2, 3)):
            assert abs(sent[c] - w * sum(sent) / 6) <= spec.quanta[c] + WIRE, sent
        if p.flow.line_class == 0 and last == 2:  # a new round began with this frame: the one before ended it
            rounds += 1
            before = list(sent)
            before[0] -= WIRE
            for c, w in enumerate((1, 2, 3)):
                dev.append(abs(before[c] - w * sum(before) / 6))
        last = p.flow.line_class
    assert max(dev) <= WIRE, dev
    assert rounds >= 50 and p.flow.tx_frames[:3] == [s // WIRE for s in p.flow.tx_bytes[:3]]
