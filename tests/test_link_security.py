"""The link layer against a stranger on the machine: forged records change nothing."""

import socket

import numpy as np
import trio

import emu
from emu.wire import MAGIC, OUTER, VERSION, LinkKind, PacketType, add_fcs, build_frame
from emu.nodes.collectives.run import check_results, run_collective

SPEC = "fattree:k=2,n=3"
KW = dict(count=4096, dtype="int32", op="sum", algo="ring", seed=5)


async def _forge(net, sock: socket.socket, sent: list[int]) -> None:
    """Play an attacker who sniffs loopback: for every link that ends in this process, a DATA record
    with the right cluster id, link id, the very next sequence number and a valid FCS (stamped in
    the future, and in the past); for every link that starts here, a NACK asking for everything."""
    forged = add_fcs(build_frame(0, 1, PacketType.MSG, b"\0" * 16 + b"forged payload"))
    while True:
        for el in net._local.elements:
            for inp in el.in_ports:
                for ts in (el.safe_time + 10**6, 0):
                    rec = OUTER.pack(MAGIC, VERSION, LinkKind.DATA, net.cluster_id, inp.link_id, inp.link.expected,
                                     ts, len(forged), 0) + forged
                    sock.sendto(rec, el.addr)
                    sent[0] += 1
            for outp in el.out_ports:
                sock.sendto(OUTER.pack(MAGIC, VERSION, LinkKind.NACK, net.cluster_id, outp.link_id, 0, 0, 0, 0),
                            el.addr)
                sent[0] += 1
        await trio.sleep(0)


async def _run(attack: bool):
    async with emu.Cluster(SPEC, processes=2) as net:
        sent = [0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            async with trio.open_nursery() as nursery:
                if attack:
                    nursery.start_soon(_forge, net, sock, sent)
                res = await run_collective(net, "allreduce", **KW)
                nursery.cancel_scope.cancel()
        stats = await net.stats()
    return res, sent[0], sum(s["element"]["wrong_sender"] for s in stats), stats


async def test_forged_records_from_a_foreign_socket_change_no_figure_and_are_counted():
    clean, _, clean_wrong, _ = await _run(attack=False)
    hit, sent, wrong, stats = await _run(attack=True)
    assert sent > 100 and clean_wrong == 0
    # every forged record that was read was dropped as coming from the wrong socket; records still
    # in a socket buffer when the cluster closed were never read
    assert 0 < wrong <= sent
    assert sum(s["element"]["retransmitted"] for s in stats) == 0   # forged NACKs triggered nothing
    assert sum(s["element"]["duplicates"] + s["element"]["gaps"] for s in stats) == 0
    check_results(hit, KW["count"], KW["dtype"], KW["op"], 0, KW["seed"])
    assert hit.figures() == clean.figures()
    assert hit.metrics == clean.metrics
    for h in clean.ranks:
        assert np.array_equal(hit.results[h], clean.results[h])
