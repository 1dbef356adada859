"""The ``emu run`` command's start-up with the cyclic collector off (issue 45).

A command's start-up -- the imports (~60,000 objects), then the topology, the plan and the elements
(~65,000 more for ``fattree:k=4,n=4``) -- makes objects that nearly all live as long as the process,
and the collector's ~250 young collections meanwhile traversed them again and again for ~2,000
objects of garbage (the import machinery's cycles; ~100 after the imports, whatever the topology's
size), which now stay, once. ``emu.__main__`` turns it off before the imports, freezes the modules
(``emu.sync.freeze_until_run``) and leaves it off (``hold_until_run``); it comes back (``back``) when the first run
starts, after ``emu.sync.freeze_startup`` has frozen what the start-up made, else when the command
ends, and at once under ``mpiexec`` (the other ranks serve domains for the whole command). A worker
forked meanwhile gets it on (``on_for_fork``). Library use (``Cluster``, ``cli.main(argv)``) is not
touched. Nothing in the model depends on it."""

from __future__ import annotations

import contextlib
import gc

_off = False
"""True while the collector is held off by ``hold_until_run``."""


def hold_until_run(was_on: bool) -> bool:
    """The collector, turned off by the caller, stays off until ``back`` if it ``was_on`` (a program
    that turned it off itself keeps it so); whether it is held so."""
    global _off
    gc.disable()
    _off = _off or was_on
    return _off


def back(freeze: bool = False) -> None:
    """The collector on again if ``hold_until_run`` held it off; ``freeze``: what exists now frozen
    first (``emu.sync.freeze_startup``: a run starts), so that no collection traverses it."""
    global _off
    if not _off:
        return
    _off = False
    if freeze:
        from ..sync import freeze_startup

        freeze_startup()
    gc.enable()


@contextlib.contextmanager
def on_for_fork():
    """The collector on while processes are forked, so that each child has it on; off again after in
    this process (if ``hold_until_run`` holds it off)."""
    if not _off:
        yield
        return
    gc.enable()
    try:
        yield
    finally:
        gc.disable()
