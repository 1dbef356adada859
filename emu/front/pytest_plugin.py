"""pytest fixtures for Mininet-style tests (installed as a pytest plugin with the package).

    async def test_ping(cluster):
        net = await cluster("fattree:k=2,n=2")
        assert await net["h0"].ping("h3") > 0

    @pytest.mark.topology("mesh:k=3,n=2", processes=2)
    async def test_on_a_mesh(net):
        ...

Async tests need pytest-trio (``trio_mode = true`` in the pytest configuration, or
``@pytest.mark.trio``). Every cluster a test makes is torn down when the test ends, also on failure.
"""

from __future__ import annotations

import pytest


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "topology(spec, **cluster_options): the cluster the `net` fixture builds")


@pytest.fixture
async def cluster():
    """A factory: ``await cluster(spec_or_topology, **options)`` returns a running ``emu.Cluster``.

    Each cluster lives in a task of the fixture's own nursery (a nursery must close in the task
    that opened it), and is torn down when the test ends."""
    import trio

    from .cluster import Cluster

    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def hold(topology, options, task_status=trio.TASK_STATUS_IGNORED):
            async with Cluster(topology, **options) as net:
                task_status.started(net)
                await done.wait()

        async def make(topology="star:n=4", **options):
            return await nursery.start(hold, topology, options)

        yield make
        done.set()


@pytest.fixture
async def net(request, cluster):
    """The cluster named by the test's ``@pytest.mark.topology(...)`` (default ``star:n=4``)."""
    marker = request.node.get_closest_marker("topology")
    spec = marker.args[0] if marker and marker.args else "star:n=4"
    options = dict(marker.kwargs) if marker else {}
    yield await cluster(spec, **options)


@pytest.fixture
def mpirun(tmp_path):
    """``mpirun(program, n=4, topo="star:n=4", args=(), stdin=None, offload=None, ...)`` runs an mpi4py
    program (a path, or its source) with ``emu mpirun --compute zero`` and returns its ``MpiResult``:
    ``returncode``, ``stdout``, ``stderr``, ``figures`` (virtual time, frames, bytes, per rank and MPI
    call kind), ``lines(rank)``, ``calls(rank)``. See ``emu.front.mpirun.run_program``."""
    from .mpirun import run_program

    def run(program, n=4, topo="star:n=4", args=(), **options):
        return run_program(str(program), n, topo, args, workdir=str(tmp_path), **options)

    return run

