"""The core's count of a domain's frames by window (emu/csrc/domain.h: window_add, for
Domain.frames_arrived's ``_by_window[window] = _by_window.get(window, 0) + n``) is Python's: its
int kept per dict version and written in place only when nobody else holds it -- a count set,
deleted or held from Python between two adds is read again, never written under the holder."""

import pytest

import emu
import emu.native as native

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here")


@needs_core
async def test_a_domains_count_by_window_is_pythons():
    async with emu.Cluster("star:n=2") as net:
        dom = net._local
        el = dom.elements[0]
        t = max(dom._at) + 10**9  # (later than its heap entry: the heap left as it is)
        bw = dom._by_window
        bw.clear()

        def add(n, w=7):
            received = dom.received
            assert CORE.arrived({el: [n, t, w]}) == n
            assert dom.received == received + n

        add(3)
        add(4)
        assert bw == {7: 7}
        for _ in range(300):  # (past the small ints: an int of its own, written in place)
            add(1)
        assert bw == {7: 307}
        held = bw[7]
        add(2)
        assert held == 307 and bw == {7: 309}  # (a held int is not written)
        del held
        add(1)
        held = bw.pop(7)  # (the count's int now held here alone: never written again)
        bw[7] = int("1000")  # (set from Python: read again)
        add(5)
        assert held == 310 and bw == {7: 1005}
        del held
        del bw[7]
        add(2)
        add(3, 8)
        add(1)
        assert bw == {7: 3, 8: 3}
        bw[7] = 50
        bw[9] = 1
        add(1, 9)
        add(1)
        assert bw == {7: 51, 8: 3, 9: 2}


@needs_core
async def test_frames_arrived_reads_an_elements_time_of_three_digits_as_python():
    """frames_due (emu/csrc/domain.h) reads the element's ``_at`` time in place when it is an int of three
    30-bit digits (INF, 1 << 62, when the element is not due; common.h get_ll3): the heap entry pushed,
    or not, and ``_at`` as Domain.frames_arrived's -- times of one, two and three digits on either side."""
    INF = 1 << 62
    async with emu.Cluster("star:n=2") as net:
        dom = net._local
        el = dom.elements[0]
        i = dom._idx[el]
        at0 = dom._at[i]
        cases = [(INF, 5), (INF, INF - 1), (INF, INF), ((1 << 60) + 7, (1 << 60) + 6),
                 ((1 << 60) + 7, (1 << 60) + 8), ((1 << 61) + (1 << 31), (1 << 61) + 3), ((1 << 61) + 3, (1 << 61) + (1 << 31)),
                 (1 << 40, 1 << 41), (1 << 41, 1 << 40), (2**63 - 1, 1 << 62), (2**63 - 1, 2**63 - 2), (900, 899)]
        for cur, t in cases:
            got = []
            for compiled in (True, False):
                heap0 = list(dom._heap)
                dom._at[i] = int(str(cur))  # (an int of its own, not a cached one)
                if compiled:
                    CORE.arrived({el: [1, t, 3]})
                else:
                    dom.frames_arrived(el, 1, t, 3)
                got.append((dom._at[i], dom._heap[len(heap0):] if len(dom._heap) > len(heap0) else None,
                            sorted(dom._heap)))
                dom._heap[:] = heap0
            assert got[0] == got[1], (cur, t)
        dom._at[i] = at0
