"""The compiled core's ``window`` (``emu/csrc/window.h``): Domain._window's loop over its active
elements, the twin of the pure-Python loop (``emu.domain.Domain._window``) -- checked here on the
cases a whole run rarely meets."""

import pytest

import emu
from emu import native
from emu.element import INF, WAKE

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


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
