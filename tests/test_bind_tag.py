"""Across machines (``--bind`` off loopback): a wildcard address is refused, and every datagram carries
a keyed tag that is checked before anything in it is read, so a host on the network that forges a
link's source address and port (a raw socket) changes nothing. Loopback runs are untouched."""

import os
import socket
import struct

import numpy as np
import pytest
import trio

import emu
from emu.config import ConfigError, RunConfig, bind_address, is_loopback
from emu.domain import Domain
from emu.element import Element
from emu.front.cli import main
from emu.wire import MAGIC, OUTER, VERSION, LinkKind, PacketType, add_fcs, build_frame
from emu.wire.outer import TAG_LEN, datagram_tag, tag_key
from emu.nodes.collectives.run import check_results, run_collective

import test_element as te


def _off_loopback() -> str | None:
    """An IPv4 address of this machine that is not loopback (only ever sent to from here)."""
    for _, name in socket.if_nameindex():
        try:
            addr = bind_address(name)
        except ConfigError:
            continue
        if not is_loopback(addr):
            return addr
    return None


ADDR = _off_loopback()
needs_addr = pytest.mark.skipif(ADDR is None, reason="no IPv4 address other than loopback on this machine")


# -- wildcard addresses ---------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["0.0.0.0", "::"])
def test_a_wildcard_bind_is_refused_on_one_line_with_exit_2(spec, capsys):
    with pytest.raises(ConfigError, match="wildcard address"):
        RunConfig(bind=spec)
    with pytest.raises(ConfigError, match="wildcard address"):
        bind_address(spec)
    assert main(["run", "--topo", "star:n=2", "--test", "pingall", "--bind", spec]) == 2
    out = " ".join(capsys.readouterr().out.split())  # (the console wraps at 120 columns)
    assert out.startswith(f"refused: --bind {spec} is a wildcard address") and "--bind eth0" in out


def test_mpiexec_refuses_a_wildcard_bind_on_one_line(tmp_path):
    from test_mpi import EMU, MPIEXEC, _run

    if MPIEXEC is None:
        pytest.skip("mpiexec not found")
    p = _run([MPIEXEC, "-n", "2"] + EMU + ["run", "--topo", "star:n=2", "--test", "pingall", "--bind", "0.0.0.0"],
             tmp_path, timeout=60)
    assert p.returncode == 2 and "is a wildcard address" in p.stdout, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr


# -- the tag on one element -----------------------------------------------------------------------
KEY = tag_key(bytes(32), te.CID)


@pytest.fixture
def tagged():
    e, peer = te.make()
    dom = Domain(0, 2, RunConfig())
    tag = Element("s1", e.engine, cluster_id=te.CID, domain=dom, outs=e.outs, ins=e.ins, capture=False,
                  seed=1, lookahead_ns=150, tag_key=KEY)  # te.make's element, with a tag key
    dom.add(tag)
    yield tag, peer
    for s in (e.sock, tag.sock, peer):
        s.close()


def test_a_datagram_without_the_right_tag_is_dropped_before_it_is_read(tagged):
    el, _ = tagged
    rec = te.record(11, 0, 500, te.FRAME)
    assert te.feed(el, rec) == 0  # no tag
    assert te.feed(el, rec + bytes(TAG_LEN)) == 0  # a wrong tag
    assert te.feed(el, rec + datagram_tag(tag_key(bytes(31) + b"x", te.CID), rec)) == 0  # another key
    assert te.feed(el, rec + datagram_tag(tag_key(bytes(32), te.CID ^ 1), rec)) == 0  # another run
    assert te.feed(el, b"") == 0 and te.feed(el, b"short") == 0
    nack = OUTER.pack(MAGIC, VERSION, LinkKind.NACK, te.CID, 10, 0, 0, 0, 0)
    assert te.feed(el, nack + bytes(TAG_LEN), el.outs[0].peer_addr) == 0
    assert el.stats["bad_tag"] == 7 and el.stats["datagrams_received"] == 7
    assert el.in_by_link[11].link.expected == 0 and not el.heap and el.stats["retransmitted"] == 0
    for k in ("bad_magic", "foreign_cluster", "bad_link", "truncated", "wrong_sender", "duplicates", "gaps"):
        assert el.stats[k] == 0, k  # nothing of them was decoded
    rec2 = te.record(11, 1, 600, te.FRAME)
    assert te.feed(el, rec + rec2 + datagram_tag(KEY, rec + rec2)) == 2  # the genuine sender's
    assert el.in_by_link[11].link.expected == 2 and len(el.heap) == 2 and el.stats["bad_tag"] == 7


def test_what_a_tagged_element_sends_carries_the_tag(tagged):
    el, peer = tagged
    el.send_nack(el.in_by_link[11])
    data = peer.recv(65536)
    body, tag = data[:-TAG_LEN], data[-TAG_LEN:]
    assert tag == datagram_tag(KEY, body) and OUTER.struct.unpack_from(body)[2] == LinkKind.NACK
    assert len(body) == len(OUTER.pack(MAGIC, VERSION, LinkKind.NACK, te.CID, 11, 0, 0, 0, 0))


async def test_loopback_datagrams_carry_no_tag():
    async with emu.Cluster("fattree:k=2,n=2", run=RunConfig(direct=False)) as net:
        for el in net._local.elements:
            assert el._tag_key is None and el.on_datagram.__func__ is Element.on_datagram
            assert el._sendto.__func__ is Element._sendto


# -- a whole run, with a forger on the network ----------------------------------------------------
SPEC = "fattree:k=2,n=3"
KW = dict(count=4096, dtype="int32", op="sum", algo="ring", seed=5)


def _raw_socket():
    try:
        return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    except PermissionError:
        pytest.skip("forging a source address takes a raw socket (root or CAP_NET_RAW)")


def _spoof(raw, src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> None:
    """A UDP datagram from ``src`` (forged) to ``dst``: the kernel cannot tell it from the real one."""
    udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    try:
        raw.sendto(ip + udp, (dst[0], 0))
    except BlockingIOError:
        pass


async def _forge(net, raw, sent: list[int]) -> None:
    """For every link ending in this process: a DATA record from the socket at its other end (forged
    source address and port), with the right cluster id, link id, next sequence number and FCS,
    with no tag and with a wrong one; for every link starting here, a NACK asking for everything."""
    forged = add_fcs(build_frame(0, 1, PacketType.MSG, b"\0" * 16 + b"forged payload"))
    while True:
        for el in net._local.elements:
            for inp in el.in_ports:
                rec = OUTER.pack(MAGIC, VERSION, LinkKind.DATA, net.cluster_id, inp.link_id, inp.link.expected,
                                 el.safe_time + 10**6, len(forged), 0) + forged
                for dgram in (rec, rec + os.urandom(TAG_LEN)):
                    _spoof(raw, inp.peer_addr, el.addr, dgram)
                    sent[0] += 1
            for outp in el.out_ports:
                nack = OUTER.pack(MAGIC, VERSION, LinkKind.NACK, net.cluster_id, outp.link_id, 0, 0, 0, 0)
                _spoof(raw, outp.peer_addr, el.addr, nack + os.urandom(TAG_LEN))
                sent[0] += 1
        await trio.sleep(0)


async def _run(attack: bool):
    async with emu.Cluster(SPEC, run=RunConfig(processes=2, bind=ADDR, direct=False)) as net:
        assert all(el._tag_key is not None for el in net._local.elements)
        sent = [0]
        with _raw_socket() as raw:
            raw.setblocking(False)
            async with trio.open_nursery() as nursery:
                if attack:
                    nursery.start_soon(_forge, net, raw, sent)
                res = await run_collective(net, "allreduce", **KW)
                nursery.cancel_scope.cancel()
        stats = await net.stats()
        procs = await net.process_stats()  # (each process's one socket counts what belongs to no element)
    return res, sent[0], stats, procs


@needs_addr
async def test_forged_source_addresses_off_loopback_are_dropped_by_the_tag_and_change_no_figure():
    clean, _, clean_stats, clean_procs = await _run(attack=False)
    hit, sent, stats, procs = await _run(attack=True)
    total = {k: sum(s["element"][k] for s in stats) + sum(p.get(k, 0) for p in procs) for k in stats[0]["element"]}
    assert sent > 100 and sum(p["bad_tag"] for p in clean_procs) == 0
    assert all(p["udp_received"] > 0 for p in clean_procs)  # the genuine ones were tagged
    # every forged datagram that was read failed its tag; none got as far as its records
    assert 0 < total["bad_tag"] <= sent
    for k in ("wrong_sender", "retransmitted", "duplicates", "gaps", "bad_link", "foreign_cluster", "bad_magic"):
        assert total[k] == 0, k
    check_results(hit, KW["count"], KW["dtype"], KW["op"], 0, KW["seed"])
    assert hit.figures() == clean.figures()
    assert hit.metrics == clean.metrics
    for h in clean.ranks:
        assert np.array_equal(hit.results[h], clean.results[h])


@needs_addr
def test_off_loopback_figures_are_those_of_loopback(tmp_path, capsys):
    """The tag is plumbing: the figures and the capture of a run off loopback are those on loopback."""
    import hashlib
    import json

    out = {}
    for bind in ("127.0.0.1", ADDR):
        js, cap = tmp_path / f"{bind}.json", tmp_path / f"{bind}.pcapng"
        assert main(["run", "--topo", "fattree:k=4,n=2", "--test", "allreduce+alltoall", "--size", "2KiB",
                     "--processes", "2", "--wire", "--bind", bind, "--json", str(js), "--pcap", str(cap)]) == 0
        rows = json.loads(js.read_text())["results"]
        for r in rows:
            r.pop("wall_s")
        out[bind] = rows, hashlib.sha256(cap.read_bytes()).hexdigest()
    assert out[ADDR] == out["127.0.0.1"]


@needs_addr
def test_mpiexec_off_loopback_tags_with_the_job_key_and_gives_the_figures_of_loopback(tmp_path):
    import json

    from test_mpi import EMU, MPIEXEC, _run

    if MPIEXEC is None:
        pytest.skip("mpiexec not found")
    out = {}
    for bind in ("127.0.0.1", ADDR):
        js = tmp_path / f"{bind}.json"
        p = _run([MPIEXEC, "-n", "2"] + EMU + ["run", "--topo", "fattree:k=4,n=2", "--test", "allreduce+alltoall",
                                              "--size", "2KiB", "--bind", bind, "--json", str(js)], tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        rows = json.loads(js.read_text())["results"]
        for r in rows:
            r.pop("wall_s")
        out[bind] = rows
    assert out[ADDR] == out["127.0.0.1"]
