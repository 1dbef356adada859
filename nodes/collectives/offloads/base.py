"""Where a collective runs, as one object per place (``--offload``): the base class and the registry.

Each offload (``none``: host software, ``nic``, ``hw``, ``switch``) is one module with one
:class:`Offload` subclass and one registration line (``@register_offload``). It says which
operations it runs, validates their options, sets up what it needs (the communicator on the NICs,
the manager's tree, the multicast group), estimates a run's frames and runs each operation. The
command line (``emu run``, sweeps, ``emu mpirun``), the size estimate, ``Comm`` and the demo ask it
by name (:func:`offload_named`) instead of testing names. A new offload is one new file; an outside
package names its module as an entry point of the group ``emu.offloads`` (``emu.plugins``).

A new offload, say an allreduce that some other engine carries out, is one class::

    from emu.nodes.collectives.offloads import Offload, offload_named, register_offload

    @register_offload
    class Mirror(Offload):
        name, summary, title = "mirror", "host software under another name", "mirror"
        operations = ("allreduce",)                      # what it runs; the rest is refused by name

        async def allreduce(self, comm, x, op, root, algo, branch):   # one method per operation
            y = await offload_named("none").run(comm, "allreduce", x, op, root, algo, branch)
            comm.last_algo = f"mirror({comm.last_algo})"
            return y

after which ``emu run --offload mirror``, a sweep over it and ``comm.allreduce(x, offload="mirror")``
run it (``tests/test_offload_registry.py``).

An offload's modules never import ``Comm`` or the runner: what runs on every rank before the
measured call is returned as a :data:`Setup`, a module-level coroutine ``fn(comm, *args)`` that the
runner calls on a communicator it makes.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from emu.config import ConfigError

Setup = tuple[Callable[..., Any], tuple]
"""What every rank runs before the measured call: ``(fn, args)``, ``await fn(comm, *args)``."""


class Offload:
    """One place a collective runs. Subclasses set the class attributes and override what applies."""

    name: str = ""
    """The ``--offload`` value."""
    summary: str = ""
    """One line, as ``emu run --help`` shows it."""
    title: str = ""
    """Its column in the demo's side-by-side table."""
    operations: tuple[str, ...] = ()
    """The collectives (``Comm`` methods and ``emu run`` tests) it runs."""
    nonblocking: tuple[str, ...] = ()
    """Those it also runs non-blocking (``Comm.iallreduce``, ``Comm.ireduce``)."""
    sparse: bool = False
    """Runs a sparse allreduce (``Comm.allreduce_sparse``, ``--density``)."""
    own_algos: bool = False
    """``--algo`` names this offload's own algorithms (it checks them); otherwise host software's."""
    needs_manager: bool = False
    """The run needs the network manager (``emu run`` and ``emu mpirun`` attach one)."""
    qsnet_packets: bool = False
    """Its collectives send QsNet packets (``elan.packet_bytes``: the switch buffers must hold one)."""
    any_comm: bool = True
    """``emu mpirun``: runs on any communicator (False: on COMM_WORLD only)."""
    hosted: bool = False
    """Runs in host software (``none``): ``--algo`` of a sparse allreduce applies."""

    # -- what it supports -------------------------------------------------------------------------
    def supports(self, operation: str) -> bool:
        return operation in self.operations

    def refusal(self, operation: str) -> str:
        """What to say when asked for an operation it does not run."""
        return f"{operation} cannot be offloaded to {self.name}; {', '.join(self.operations) or 'nothing'} can"

    def check_supports(self, operation: str) -> None:
        if not self.supports(operation):
            raise ConfigError(self.refusal(operation))

    def validate(self, operation: str, dtype: np.dtype, op: str, branch: int | None = None, count: int | None = None,
                 queue_capacity: int | None = None, algo: str | None = None, elan=None) -> None:
        """Refuse, before anything runs, a request it cannot carry out."""
        self.check_supports(operation)

    def options(self, operation: str, dtype: np.dtype, op: str, count: int, ranks: int, algo: str | None,
                branch: int | None, queue_capacity: int, elan=None) -> tuple[str | None, int | None]:
        """The front door's options checked (``emu run``): (algo, branch) as the run takes them.
        ``--algo`` of host software is checked by the caller unless :attr:`own_algos`."""
        self.validate(operation, dtype, op, branch, count, queue_capacity, algo, elan)
        return algo, branch

    # -- what it needs -------------------------------------------------------------------------------
    def add_groups(self, topo, ranks: list[str], avoid=()) -> None:
        """Define on ``topo`` the multicast groups its collectives over ``ranks`` use (before the
        cluster starts; ``avoid``: switches and links down from the start)."""

    async def prepare(self, net, operation: str, members: list[str], dtype: str, op: str, count: int, root: int,
                      branch: int | None, algo: str | None) -> tuple[int | None, Setup | None]:
        """Before the measured call of ``Comm``-level runs (``run_collective``): validate on this
        network and say what every rank sets up first. Returns (branch, setup or None)."""
        self.validate(operation, np.dtype(dtype), op, branch, count, algo=algo)
        return branch, None

    def sparse_setup(self, dtype: str, span: int) -> Setup | None:
        """What every rank sets up before a measured sparse allreduce (None: nothing)."""
        return None

    async def rank_setup(self, host) -> None:
        """``emu mpirun``: what a rank's host sets up for COMM_WORLD before the program starts."""

    def accepts(self, operation: str, ranks: int, world: bool, dtype: np.dtype, op: str | None, count: int,
                spec) -> bool:
        """``emu mpirun``: does this call (on COMM_WORLD when ``world``) go to the offload? Else the
        emulator's host algorithms carry it out."""
        if ranks < 2 or not self.supports(operation) or not (world or self.any_comm):
            return False
        try:
            self.validate(operation, dtype, op or "sum", 1, count, spec.nic.queue_capacity, elan=spec.elan)
        except ConfigError:
            return False
        return True

    # -- what it costs -------------------------------------------------------------------------------
    def estimate(self, operation: str, o, ranks: int, spec) -> tuple[int, str, bool] | None:
        """(frames the hosts inject, what the count rests on, whether it is a lower bound) of
        ``operation`` with the checked options ``o`` (``CollectiveOptions``) on ``ranks`` ranks of
        hosts of ``spec``; None: counted as host software is."""
        return None

    def figures(self, topology, res, o) -> dict[str, Any]:
        """Figures of a model beside the measurement (``emu run``'s results)."""
        return {}

    # -- how it runs -------------------------------------------------------------------------------
    async def run(self, comm, operation: str, x: np.ndarray | None = None, op: str = "sum", root: int = 0,
                  algo: str | None = None, branch: int | None = None):
        """``operation`` on this rank (``Comm.allreduce``, ``reduce``, ``bcast``, ``barrier``)."""
        self.check_supports(operation)
        return await getattr(self, operation)(comm, x, op, root, algo, branch)

    async def start(self, comm, operation: str, x: np.ndarray, op: str = "sum", root: int = 0,
                    algo: str | None = None, branch: int | None = None):
        """``operation`` non-blocking: a request whose ``await req.wait()`` gives the result."""
        if operation not in self.nonblocking:
            raise ConfigError(f"i{operation} cannot be offloaded to {self.name}; offloads that run it non-blocking: "
                              f"{', '.join(n for n, o in OFFLOADS.items() if operation in o.nonblocking)}")
        return await getattr(self, "i" + operation)(comm, x, op, root, algo, branch)

    async def run_sparse(self, comm, index: np.ndarray, values: np.ndarray, length: int, op: str,
                         span: int | None, algo: str | None):
        raise ConfigError(f"a sparse allreduce cannot be offloaded to {self.name}; it runs in "
                          f"{' or '.join(n for n, o in OFFLOADS.items() if o.sparse)}")


OFFLOADS: dict[str, Offload] = {}
"""The offloads by name, in the order they registered (``--offload``'s choices)."""


def register_offload(cls: type[Offload]) -> type[Offload]:
    """Class decorator: make ``cls`` (an :class:`Offload` subclass with a ``name``) the offload of that name."""
    inst = cls()
    if not inst.name or not inst.name.isidentifier():
        raise ConfigError(f"an offload needs a name (an identifier), got {inst.name!r}")
    OFFLOADS[inst.name] = inst
    return cls


def unregister_offload(name: str) -> None:
    OFFLOADS.pop(name, None)


def offload_named(name: str | None) -> Offload:
    """The offload ``name`` (None: host software, ``none``); ConfigError in one line naming the known ones."""
    key = "none" if name is None else name
    off = OFFLOADS.get(key)
    if off is None and isinstance(key, str) and key.isidentifier():
        from emu.plugins import OFFLOADS as GROUP, load

        if load(GROUP, key):
            off = OFFLOADS.get(key)
    if off is None:
        from emu.plugins import OFFLOADS as GROUP, others

        raise ConfigError(f"--offload {name}: not a place a collective runs; give one of {', '.join(OFFLOADS)}"
                          + others(GROUP, OFFLOADS))
    return off


def canonical_offload(name: str | None) -> str | None:
    """The name as runs record it: None for host software, else the name (refused if unknown)."""
    off = offload_named(name)
    return None if off is OFFLOADS.get("none") else off.name


def names() -> tuple[str, ...]:
    """The offloads registered, then those installed packages declare (entry points of ``emu.offloads``)."""
    from emu.plugins import OFFLOADS as GROUP, provided

    return tuple(OFFLOADS) + tuple(n for n in provided(GROUP) if n not in OFFLOADS)
