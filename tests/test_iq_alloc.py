"""The input-queued router's allocators keep their rotation per priority class: high-priority grants
(QsNet's ACK tokens) never reset the turn among priority-0 requesters, so none of them starves.

The engine is the real one (``make_iq`` on a star); each test calls one allocator round after round
with the requests a loaded router sees: priority-0 copies that stay (their VCs hold more packets) and
a high-priority token every other round."""

from emu.config import LinkSpec, SwitchSpec
from emu.switch.iq import Copy, Packet, make_iq
from emu.topologies.base import Topology


def router(vcs: int = 8, hosts: int = 4):
    t = Topology("star")
    for i in range(hosts):
        t.add_host(f"h{i}")
    t.add_switch("s0", SwitchSpec(model="input_queued", vcs=vcs))
    t.add_switch("s1", SwitchSpec(model="input_queued", vcs=vcs))  # a router downstream: credits, VCs
    for i in range(hosts):
        t.add_link(f"h{i}", "s0", LinkSpec(), a_port=0, b_port=i)
    t.add_link("s0", "s1", LinkSpec(), a_port=hosts, b_port=0)
    t.routes = {"s0": list(range(hosts)), "s1": [0] * hosts}
    return make_iq(t.nodes["s0"], t, {})


def copy(port: int, vc: int, out: int, prio: int = 0) -> Copy:
    pkt = Packet(port, vc, 0, 0, 256)
    c = Copy(pkt, out, b"", 0, 256, prio)
    pkt.copies.append(c)
    return c


def test_the_switch_allocator_turns_between_an_input_s_vcs_whatever_high_priority_grants_come_between():
    eng = router()
    data = [(v, copy(0, v, 4)) for v in range(4)]  # input 0: four VCs of priority-0 packets to output 4
    served = []
    for r in range(16):
        req = {0: list(data) + ([(5, copy(0, 5, 4, prio=1))] if r % 2 == 0 else [])}  # a token every other round
        (c,) = eng._separable(req)
        if not c.prio:
            served.append(c.pkt.vc)
    assert served == [0, 1, 2, 3] * 2  # (one shared pointer: [0] * 8, VCs 1-3 starved)


def test_the_switch_allocator_turns_between_inputs_whatever_high_priority_grants_come_between():
    eng = router()
    served = []
    for r in range(12):
        req = {0: [(0, copy(0, 0, 4))], 1: [(0, copy(1, 0, 4))]}  # inputs 0 and 1: priority-0 packets to output 4
        if r % 2 == 0:
            req[0].append((5, copy(0, 5, 4, prio=1)))  # input 0 also forwards a token every other round
        (c,) = eng._separable(req)
        if not c.prio:
            served.append(c.pkt.port)
    assert served == [0, 1] * 3  # (one shared pointer: [1] * 6, input 0's data starved)


def test_the_vc_allocator_turns_between_requesters_whatever_high_priority_grants_come_between():
    """Output 4 frees one VC a round; inputs 0..2 each want one for a priority-0 packet, and every
    other round a token of input 3 asks too and takes it (served first)."""
    eng = router(vcs=2)
    served = []
    waiting = {p: copy(p, 0, 4) for p in range(3)}
    for r in range(12):
        hold = eng.vc_hold[4]
        hold[0], hold[1] = None, object()  # one VC free this round
        heads = [(p, 0, c.pkt) for p, c in waiting.items()]
        tok = copy(3, 1, 4, prio=1) if r % 2 == 0 else None
        if tok is not None:
            heads.append((3, 1, tok.pkt))
        for _p, _v, pkt in heads:
            pkt.rc_at = 0
        eng._allocate_vcs(heads, now=r)
        eng.wait_vc.clear()
        got = [p for p, c in waiting.items() if c.ovc >= 0]
        if tok is not None:
            assert tok.ovc == 0 and not got  # the token first
            continue
        assert len(got) == 1
        served.append(got[0])
        waiting[got[0]] = copy(got[0], 0, 4)  # its next packet
    assert served == [0, 1, 2] * 2  # (one shared pointer: [0] * 6, inputs 1 and 2 starved)
