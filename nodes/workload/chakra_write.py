"""Writing Chakra execution traces (one ``.et`` file per rank), for tests and benchmarks.

``write_trace(prefix, ranks)``: ``ranks[r]`` is rank r's nodes, each a dict ``{"id", "type", "deps",
"name", "duration_us", "attrs"}`` (``type``: ``comp``, ``send``, ``recv``, ``coll``, or a NodeType
number; ``attrs``: name -> int, bool or str); writes ``prefix.r.et`` (Astra-sim's naming) as Chakra's
tools do: a varint-length-prefixed GlobalMetadata, then each node length-prefixed.
"""

from __future__ import annotations

from typing import Iterable

from .chakra import _pb, varint

TYPES = {"comp": 4, "send": 5, "recv": 6, "coll": 7, "metadata": 1}
COMM_TYPES = {"allreduce": 0, "reduce": 1, "allgather": 2, "gather": 3, "scatter": 4, "bcast": 5, "alltoall": 6,
              "reduce_scatter": 7, "barrier": 9}


def node_bytes(spec: dict) -> bytes:
    pb = _pb()
    n = pb.Node(id=spec["id"], name=spec.get("name", ""), type=TYPES.get(spec.get("type"), spec.get("type", 4)),
                duration_micros=spec.get("duration_us", 0))
    n.ctrl_deps.extend(spec.get("deps", ()))
    n.data_deps.extend(spec.get("data_deps", ()))
    for k, v in spec.get("attrs", {}).items():
        a = n.attr.add(name=k)
        if isinstance(v, bool):
            a.bool_val = v
        elif isinstance(v, int):
            a.int64_val = v
        else:
            a.string_val = v
    data = n.SerializeToString()
    return varint(len(data)) + data


def metadata_bytes(version: str = "0.0.4") -> bytes:
    data = _pb().GlobalMetadata(version=version).SerializeToString()
    return varint(len(data)) + data


def write_rank(path: str, nodes: Iterable[dict]) -> None:
    with open(path, "wb") as f:
        f.write(metadata_bytes())
        for spec in nodes:
            f.write(node_bytes(spec))


def write_trace(prefix: str, ranks: list[Iterable[dict]]) -> list[str]:
    paths = []
    for r, nodes in enumerate(ranks):
        paths.append(f"{prefix}.{r}.et")
        write_rank(paths[-1], nodes)
    return paths


def coll(nid: int, operation: str, size: int, deps=(), pg: str | None = None, **attrs) -> dict:
    a = {"comm_type": COMM_TYPES[operation], "comm_size": size, **attrs}
    if pg is not None:
        a["pg_name"] = pg
    return {"id": nid, "type": "coll", "name": operation, "deps": list(deps), "attrs": a}


def comp(nid: int, us: int, deps=()) -> dict:
    return {"id": nid, "type": "comp", "name": "comp", "duration_us": us, "deps": list(deps)}


def send(nid: int, dst: int, size: int, tag: int = 0, deps=()) -> dict:
    return {"id": nid, "type": "send", "deps": list(deps), "attrs": {"comm_dst": dst, "comm_size": size, "comm_tag": tag}}


def recv(nid: int, src: int, size: int, tag: int = 0, deps=()) -> dict:
    return {"id": nid, "type": "recv", "deps": list(deps), "attrs": {"comm_src": src, "comm_size": size, "comm_tag": tag}}
