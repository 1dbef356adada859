"""The link layer without sockets: numbering, batching, gaps, duplicates, go-back-N, wrap-around."""

from emu.link import ACCEPT, DUPLICATE, GAP, MAX_DATAGRAM, LinkReceiver, LinkSender
from emu.wire import OUTER, OUTER_LEN, LinkKind

CID = 0xC0FFEE


def records(dgram: bytes):
    off, out = 0, []
    while off < len(dgram):
        magic, ver, kind, cid, link, seq, ts, n, win = OUTER.unpack(dgram, off)
        out.append((kind, cid, link, seq, ts, dgram[off + OUTER_LEN:off + OUTER_LEN + n], win))
        off += OUTER_LEN + n
    return out


def test_records_are_numbered_in_order_and_batched():
    tx = LinkSender(CID, 7)
    frames = [(100 + i, bytes([i]) * 20_000, i == 3) for i in range(7)]
    dgrams = tx.datagrams(frames, window=3)
    # two 20 kB records fit in a datagram of at most 60,000 bytes, a third does not
    assert all(len(d) <= MAX_DATAGRAM for d in dgrams) and len(dgrams) == 4
    recs = [r for d in dgrams for r in records(d)]
    assert [r[3] for r in recs] == list(range(7)) and [r[4] for r in recs] == [f[0] for f in frames]
    assert [r[0] for r in recs] == [LinkKind.DATA_POOL if i == 3 else LinkKind.DATA for i in range(7)]
    assert {(r[1], r[2], r[6]) for r in recs} == {(CID, 7, 3)}
    assert [r[5] for r in recs] == [f[1] for f in frames]
    assert tx.seq == 7 and len(tx.retained) == len(dgrams)


def test_receiver_accepts_in_sequence_and_tells_gaps_from_duplicates():
    rx = LinkReceiver(CID, 7)
    assert [rx.classify(s) for s in (0, 1, 3, 2, 2, 1)] == [ACCEPT, ACCEPT, GAP, ACCEPT, DUPLICATE, DUPLICATE]
    assert rx.expected == 3


def test_a_lost_datagram_is_recovered_by_one_nack_and_go_back():
    tx, rx = LinkSender(CID, 7), LinkReceiver(CID, 7)
    dgrams = [tx.datagrams([(t, b"x" * 40_000, False)], window=t) for t in range(1, 5)]
    delivered = []
    for i, [d] in enumerate(dgrams):
        if i == 1:
            continue  # lost by the OS
        for r in records(d):
            v = rx.classify(r[3])
            if v == ACCEPT:
                delivered.append(r[3])
            elif v == GAP and not rx.gap_reported:
                nack = rx.nack()
    _, _, kind, cid, link, seq, *_ = OUTER.unpack(nack)
    assert (kind, cid, link, seq) == (LinkKind.NACK, CID, 7, 1) and rx.gap_reported
    for d in tx.go_back(seq):   # records 1, 2, 3 again; 0 is not resent
        for r in records(d):
            if rx.classify(r[3]) == ACCEPT:
                delivered.append(r[3])
    assert delivered == [0, 1, 2, 3] and len(tx.go_back(seq)) == 3
    tx.forget(2)
    assert [w for w, *_ in tx.retained] == [3, 4]


def test_sequence_numbers_wrap_around():
    tx, rx = LinkSender(CID, 1), LinkReceiver(CID, 1)
    tx.seq = rx.expected = 0xFFFFFFFE
    [d] = tx.datagrams([(1, b"a", False), (2, b"b", False), (3, b"c", False)], window=1)
    assert [r[3] for r in records(d)] == [0xFFFFFFFE, 0xFFFFFFFF, 0]
    assert [rx.classify(r[3]) for r in records(d)] == [ACCEPT] * 3 and rx.expected == 1
    assert rx.classify(0xFFFFFFFF) == DUPLICATE and rx.classify(5) == GAP
    assert len(tx.go_back(0xFFFFFFFF)) == 1


def test_a_full_datagram_with_its_tag_fits_in_udp():
    """A batch is cut at MAX_DATAGRAM without its tag (emu.batch), which off loopback follows the
    records: the two together must fit in one IPv4 UDP datagram (65,507 bytes), else a full tagged
    datagram is refused by the kernel (EMSGSIZE)."""
    from emu.wire.outer import TAG_LEN

    assert MAX_DATAGRAM + TAG_LEN <= 65_507
