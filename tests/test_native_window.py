"""The compiled core's ``window`` (``emu/csrc/window.h``): Domain._window's loop over its active
elements, the twin of the pure-Python loop (``emu.domain.Domain._window``) -- checked here on the
cases a whole run rarely meets."""

import pytest

import emu
from emu import native
from emu.batch import Batch, _parts
from emu.element import INF, WAKE

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")
_BATCH_SEND = Batch._send


@needs_core
async def test_a_next_time_the_core_cannot_read_is_elements_own():
    """An element's next event whose time the core does not read in place (here a port event
    stamped with a float; any value that is not a plain int): the domain's heap gets what
    Element.next_time says, as Domain.schedule would put it -- not an unset C variable."""
    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
        dom = net._local
        for el in dom.elements:  # (the hosts: run_window called; the switch: its window run whole)
            i = dom._idx[el]
            el.pevents.append((2.0 ** 60, 0, WAKE, None))  # far after the window: never processed in it
            want = el.next_time()
            assert want == 2.0 ** 60
            dom._at[i] = INF
            k, fa = CORE.window(dom, [el], 0, 1000, 0, 1, [])
            assert (k, fa) == (1, INF)
            assert dom._at[i] == want, el.name
            assert (want, i) in dom._heap
            el.pevents.clear()


async def _datagrams(pure: bool, monkeypatch, settings: list[str], direct: bool = False,
                     topo: str = "fattree:k=2,n=2") -> tuple:
    """A run on the process's one socket (every port's peer behind it), every UDP datagram the
    batch sends recorded in order (cluster id blanked: a new one per cluster), with its figures."""
    from emu.config import parse_settings
    from emu.topologies import build
    from emu.wire.outer import OUTER_LEN

    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    sent = []
    send = _BATCH_SEND

    def record(self, data, addr, size=-1):
        b = bytearray(b"".join(_parts(data)) if isinstance(data, list) else data)
        off = 0
        while off + OUTER_LEN <= len(b):
            b[off + 4:off + 8] = bytes(4)
            off += OUTER_LEN + int.from_bytes(b[off + 24:off + 26], "big")
        sent.append(bytes(b))
        return send(self, data, addr, size)

    monkeypatch.setattr(Batch, "_send", record)
    t = build(topo, settings=parse_settings(["host.send_overhead_ns=0", "host.recv_overhead_ns=0",
                                                           *settings]))

    async def alltoall(host, hosts):
        me = hosts.index(host.name)
        for s in range(1, len(hosts)):
            await host.send(hosts[(me + s) % len(hosts)], bytes([s]) * (5000 * s), tag=1)
        for s in range(1, len(hosts)):
            msg = await host.recv(hosts[(me - s) % len(hosts)], 1)
            assert msg.data == bytes([s]) * (5000 * s)

    async with emu.Cluster(t, run=emu.RunConfig(seed=5, direct=direct)) as net:
        await net.run({h: (alltoall, net.hosts) for h in net.hosts})
        m = net.metrics
        return sent, (m.hop_count, m.frames, m.end_ns - m.start_ns), await net.stats(), await net.process_stats(), \
            _state(net._local)


def _state(dom) -> tuple:
    """What a window leaves in a domain and its elements that no figure shows (yet)."""
    els = [(el.safe_time, el.now, el.active_ns, el.lost_until, sorted(el.heap), len(el.busy),
            [(len(p.link.retained), p.sent_done, p.free_at) for p in el.out_ports]) for el in dom.elements]
    return (dom.max_time, dom.received, dom.sent_to, dom._by_window, dom._at, sorted(dom._heap),
            [(w, [el.name for el in sent]) for w, sent in dom._history], els)


@needs_core
@pytest.mark.parametrize("settings", [["link.latency_ns=5000"],
                                      ["link.latency_ns=5000", "switch.vc_buffer_bytes=4400", "switch.credit_delay_ns=20"]],
                         ids=["lossless", "credit"])
@pytest.mark.parametrize("direct", [False, True], ids=["sockets", "direct"])
async def test_the_batch_sends_the_same_datagrams_with_and_without_the_core(settings, direct, monkeypatch):
    """transmit_local and window hand the process's socket the same record groups in the same order
    as Element._transmit_ports (also where a port with link control -- credits -- is Python's, and
    the core must leave every later port to Python too): the same UDP datagrams byte for byte, cut
    at the same places, the same figures, and the domain and its elements left in the same state
    (heaps, times, the history of who sent in which window, what the links retain)."""
    before = CORE.counts()
    pure = await _datagrams(True, monkeypatch, settings, direct)
    compiled = await _datagrams(False, monkeypatch, settings, direct)
    did = {k: v - before[k] for k, v in CORE.counts().items()}
    assert len(compiled[0]) == len(pure[0]) and compiled[0] == pure[0]
    assert compiled[1:] == pure[1:]
    # (the core's paths were taken; a switch's whole window where no credit flows)
    assert did["handed_over" if direct else "batched"] > 0
    assert did["windows"] > 0 if len(settings) == 1 else did["windows"] == 0
    if not direct:  # (windows of several links' groups to one socket)
        assert max(len(d) for d in pure[0]) > 30_000


@needs_core
@pytest.mark.parametrize("direct", [False, True], ids=["sockets", "direct"])
async def test_an_input_queued_mesh_is_the_same_with_and_without_the_core(direct, monkeypatch):
    """Input-queued routers with flit framing and per-flit credits (BookSim's settings): the router's
    compiled receive, its grants onto ports with head flits, the credits it sends and receives in the
    core's window and their hand-over leave the same datagrams, figures, per-port counters (frames and
    bytes each way) and domain and element state as pure Python."""
    settings = ["switch.model=input_queued", "switch.vcs=2", "switch.flit_bytes=64", "switch.vc_buffer_bytes=512",
                "switch.credit_release=per_flit", "host.inject_vc=free", "switch.eject_vcs=true",
                "link.latency_ns=10", "host.mtu_bytes=232"]
    before = CORE.counts()
    pure = await _datagrams(True, monkeypatch, settings, direct, "mesh:k=2,n=2")
    compiled = await _datagrams(False, monkeypatch, settings, direct, "mesh:k=2,n=2")
    did = {k: v - before[k] for k, v in CORE.counts().items()}
    assert compiled[0] == pure[0]
    assert compiled[1:] == pure[1:]
    assert did["iq_received"] > 0 and did["credits_out"] > 0 and did["credits_in"] > 0 and did["enqueued"] > 0


@needs_core
async def test_records_takes_a_link_s_records_and_tells_the_domain_and_leaves_the_rest_to_python():
    """records() takes the in-sequence records of a link from its peer's socket: into the element's
    heap, onto its input port's counters, told to the domain (frames arrived in that window); it
    stops, for Python, at a record from another socket, a duplicate, or a link not in its list."""
    from collections import deque

    from emu.link import LinkSender

    async with emu.Cluster("star:n=2") as net:
        b = net._local.batch
        dom = net._local
        link_id, (el, inp) = next(iter(b.in_owner.items()))
        s = LinkSender(net.cluster_id, link_id)
        s.seq = inp.link.expected
        data = s.take(deque([(0, 10**6 + k, bytes(80 + k), False) for k in range(3)]), 10**7, 7)[0][0]
        received, frames, heap = dom.received, inp.rx_frames, len(el.heap)
        assert CORE.records(data, 0, len(data), net.cluster_id, b.in_list, ("127.0.0.1", 1)) == (0, 0)
        assert CORE.records(data, 0, len(data), net.cluster_id, [], inp.peer_addr) == (0, 0)
        assert dom.received == received and inp.rx_frames == frames
        assert CORE.records(data, 0, len(data), net.cluster_id, b.in_list, inp.peer_addr) == (len(data), 3)
        assert dom.received == received + 3 and dom._by_window[7] >= 3
        assert inp.rx_frames == frames + 3 and inp.rx_bytes >= 3 * 80 and len(el.heap) == heap + 3
        assert CORE.records(data, 0, len(data), net.cluster_id, b.in_list, inp.peer_addr) == (0, 0)  # duplicates
        with pytest.raises(TypeError):
            CORE.records(data, 0, len(data) + 1, net.cluster_id, b.in_list, inp.peer_addr)
        el.heap.clear()
