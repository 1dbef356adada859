"""A mesh's or torus's routing tables, made a chunk of routers at a time (``_dor_tables``), against the
scalar dimension-order rule (``_dor``) pair by pair, whatever the chunk."""

import numpy as np
import pytest

import emu.topologies.direct as direct
from emu.topologies.registry import build


@pytest.mark.parametrize("spec", ["mesh:k=4,n=2", "torus:k=5,n=2", "torus:k=4,n=3", "mesh:k=3,n=3", "torus:k=7,n=1"])
@pytest.mark.parametrize("chunk", [1 << 18, 7, 1])
def test_dor_tables_are_the_rule(spec, chunk, monkeypatch):
    monkeypatch.setattr(direct, "DOR_CHUNK", chunk)
    topo = build(spec)
    k, n, wrap = topo.grid
    size = k ** n
    coords = [direct.coords(i, k, n) for i in range(size)]
    for i in range(size):
        table = topo.routes[f"s{i}"]
        assert table == [direct._dor(coords[i], coords[j], k, wrap) for j in range(size)]
        assert all(type(p) is int for p in table)
    assert len(list(direct._dor_tables(np.array(coords, dtype=np.int64).reshape(size, n), k, wrap))) == size
