"""GOAL schedules written as text: a few known ones (the dissemination barrier of LogGOPSim's
example) and seeded random ones that cannot deadlock (for tests and for comparing with LogGOPSim)."""

from __future__ import annotations

import random


def dissemination_barrier(p: int, size: int = 1) -> str:
    """The dissemination barrier: in round k rank r sends to r + 2^k and receives from r - 2^k;
    round k + 1 starts when round k's message came."""
    out = [f"num_ranks {p}"]
    for r in range(p):
        out.append(f"rank {r} {{")
        k = 0
        while (1 << k) < p:
            d = 1 << k
            out.append(f"s{k}: send {size}b to {(r + d) % p} tag {k}")
            out.append(f"r{k}: recv {size}b from {(r - d) % p} tag {k}")
            if k:
                out.append(f"s{k} requires r{k - 1}")
                out.append(f"r{k} requires r{k - 1}")
            k += 1
        out.append("}")
    return "\n".join(out) + "\n"


def random_schedule(seed: int, ranks: int = 6, rounds: int = 5, max_size: int = 40000, wildcards: bool = True,
                    calc: bool = True) -> str:
    """Rounds of messages between random pairs (each rank at most one send and one receive a round),
    calcs between them; a rank's round k + 1 starts once its round k receive completed (its send,
    when it has no receive). Receives sometimes use -1 (any source with the round's tag, or any tag
    from the source) where only one message can match. Never deadlocks: every receive of a round has its send in the same round."""
    rng = random.Random(seed)
    ops: list[list[str]] = [[] for _ in range(ranks)]
    last: list[str | None] = [None] * ranks
    n = [0] * ranks

    def label(r: int) -> str:
        n[r] += 1
        return f"o{n[r]}"

    for k in range(rounds):
        perm = list(range(ranks))
        rng.shuffle(perm)
        for r in range(ranks):
            if calc and rng.random() < 0.5:
                c = label(r)
                ops[r].append(f"{c}: calc {rng.randrange(0, 5000)}")
                if last[r]:
                    ops[r].append(f"{c} requires {last[r]}")
                last[r] = c
        sends = [(r, perm[r]) for r in range(ranks) if perm[r] != r and rng.random() < 0.8]
        got = {}
        for src, dst in sends:
            size = rng.choice([1, 8, 100, 1024, 4000, rng.randrange(1, max_size)])
            tag = 4 * k + rng.randrange(0, 4)  # (a tag of its round: a wildcard source matches no later message)
            s = label(src)
            ops[src].append(f"{s}: send {size}b to {dst} tag {tag}")
            if last[src]:
                ops[src].append(f"{s} requires {last[src]}")
            got[src] = s
            rv = label(dst)
            src_w = -1 if wildcards and rng.random() < 0.3 else src
            tag_w = -1 if wildcards and src_w != -1 and rng.random() < 0.3 else tag
            ops[dst].append(f"{rv}: recv {size}b from {src_w} tag {tag_w}")
            if last[dst]:
                ops[dst].append(f"{rv} requires {last[dst]}")
            got.setdefault(("r", dst), rv)
        for r in range(ranks):
            rv = got.get(("r", r))
            if rv is not None:
                last[r] = rv
            elif r in got:
                last[r] = got[r]
    out = [f"num_ranks {ranks}"]
    for r in range(ranks):
        out.append(f"rank {r} {{")
        out.extend(ops[r])
        out.append("}")
    return "\n".join(out) + "\n"
