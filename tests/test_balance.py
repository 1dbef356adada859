"""Load balancing over the equal-cost next hops (issue 47, item 2): ``ecmp`` per flow, ``spray`` per packet."""

import struct
import zlib

import pytest

import apps
import emu
from emu.config import merge_settings, parse_settings
from emu.switch.forward import make_switch
from emu.switch.routing.ecmp import ecmp_hash, flow_key, salt
from emu.topologies.registry import IDEAL_ROUTER
from emu.topologies.registry import build as _build
from emu.wire import MSG, PacketType, build_frame
from emu.wire.fabric import FLAG_SRCRT, RSVD_OFF


def build(spec, settings=None):
    return _build(spec, settings=merge_settings(IDEAL_ROUTER, settings))


def _switch(name, policy, seed=0):
    t = build("fattree:k=4,n=3", settings=parse_settings([f"switch.routing={policy}"]))
    t.compute_candidates()
    return make_switch(t.nodes[name], t, {"seed": seed})


def _frame(src, dst, entropy=0, flags=0, ptype=PacketType.MSG):
    f = bytearray(build_frame(src, dst, ptype, MSG.pack(1, 0, 4, 0) + b"abcd", flags=flags))
    f[RSVD_OFF] = entropy
    return bytes(f)


def test_the_hash_is_crc32_of_the_salt_and_the_flow_key():
    f = _frame(3, 63, entropy=9)
    assert flow_key(f) == struct.pack(">IIBB", 3, 63, PacketType.MSG, 9)
    assert flow_key(_frame(3, 63, entropy=9, flags=FLAG_SRCRT)) == struct.pack(">IIBB", 3, 63, PacketType.MSG, 0)
    s = salt(5, 17)
    assert s == 5 * 1_000_003 + 17
    assert ecmp_hash(f, s) == zlib.crc32(struct.pack(">I", s) + flow_key(f))


def test_ecmp_takes_the_hashed_candidate_for_every_frame_of_a_flow():
    sw = _switch("s0", "ecmp", seed=4)
    ports = sw.candidates[63]
    assert ports == (4, 5, 6, 7)
    for src, e in ((0, 0), (1, 0), (2, 7), (3, 200)):
        want = ports[ecmp_hash(_frame(src, 63, e), salt(4, sw.node_id)) % 4]
        assert {sw.receive(_frame(src, 63, e), 0, i)[0][0] for i in range(50)} == {want}
    # the entropy byte alone moves a flow between paths: 256 values reach every candidate
    assert {sw.receive(_frame(0, 63, e), 0, 0)[0][0] for e in range(256)} == set(ports)


def test_spray_goes_round_the_candidates_per_destination():
    sw = _switch("s0", "spray")
    got = [sw.receive(_frame(0, 63), 0, i)[0][0] for i in range(8)]
    assert got == [4, 5, 6, 7, 4, 5, 6, 7]
    assert sw.receive(_frame(0, 62), 0, 0)[0][0] == 4       # another destination: its own turn
    assert sw.receive(_frame(0, 63), 0, 0)[0][0] == 4


async def _one_flow(policy, frames=8, seed=0):
    """h0 -> h4 on fattree:k=2,n=3: 8 one-frame messages; the frames each up port of s0 sent."""
    t = build("fattree:k=2,n=3", settings=parse_settings([f"switch.routing={policy}"]))
    async with emu.Cluster(t, seed=seed) as net:
        r = await net.run({"h0": (apps.send_to, "h4", 1024, 0, frames), "h4": (apps.recv_count, frames)})
        assert r["h4"][0] == frames * 1024
        return {p: n for p, n in sorted(net.metrics.link_frames.items()) if p.startswith("s")}


async def test_a_flow_takes_one_path_under_ecmp_and_spreads_under_spray():
    e = await _one_flow("ecmp")
    assert sorted((e.get("s0-p2", 0), e.get("s0-p3", 0))) == [0, 8]        # every frame the same way up
    used = [p for p, n in e.items() if n]
    assert all(e[p] == 8 for p in used)                      # and the same way all along: one path
    s = await _one_flow("spray")
    assert s["s0-p2"] == s["s0-p3"] == 4                     # round the two up ports
    assert sum(n for p, n in s.items() if p.startswith("s0-")) == 8
    assert await _one_flow("ecmp") == e                      # deterministic


def test_on_a_permutation_spray_comes_near_the_ideal_and_ecmp_collides(tmp_path):
    """fattree:k=4,n=2, 16 hosts each sending 64 KB to one other: spraying spreads every flow over the
    4 up links and each finishes near its time alone; ECMP puts whole flows on one path, and where two
    or three hash onto one link they share it; the static tables (destination mod k) collide too."""
    import json

    from emu.front.cli import main

    got = {}
    for policy in ("static", "ecmp", "spray"):
        out = tmp_path / f"{policy}.json"
        assert main(["run", "--topo", "fattree:k=4,n=2", "--test", "permutation", "--size", "64KB", "--set",
                     f"switch.routing={policy}", "--json", str(out)]) == 0
        got[policy] = json.loads(out.read_text())["results"][0]
    assert got["spray"]["slowdown_max"] < 1.1
    assert got["ecmp"]["slowdown_max"] > 2 and got["static"]["slowdown_max"] > 1.5
    assert got["spray"]["goodput_gbps"] > 1.5 * max(got["ecmp"]["goodput_gbps"], got["static"]["goodput_gbps"])
