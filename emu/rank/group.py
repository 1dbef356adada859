"""``MPI.Group`` of the emulated ``mpi4py.MPI``: world ranks in the group's order (rank side)."""

from __future__ import annotations

from .channel import CHANNEL
from .consts import CONSTANTS
from .errors import Exception, _unsupported
from .handle import Handle, Impl

PROC_NULL, UNDEFINED = CONSTANTS["PROC_NULL"], CONSTANTS["UNDEFINED"]
IDENT, SIMILAR, UNEQUAL = CONSTANTS["IDENT"], CONSTANTS["SIMILAR"], CONSTANTS["UNEQUAL"]


class Group(Handle, family=True):
    @classmethod
    def _make(cls, ranks) -> "Group":
        return cls._of(Impl(ranks=list(ranks)))

    @property
    def ranks(self) -> list[int]:
        """World ranks, in the group's order."""
        if self._h is None:
            raise Exception(8, "MPI_ERR_GROUP: invalid group (GROUP_NULL)")
        return self._h.ranks

    def Get_size(self) -> int:
        return len(self.ranks)

    def Get_rank(self) -> int:
        return self.ranks.index(CHANNEL.rank) if CHANNEL.rank in self.ranks else UNDEFINED

    size = property(Get_size)
    rank = property(Get_rank)

    def Dup(self) -> "Group":
        return Group._make(self.ranks)

    def _check(self, ranks) -> list[int]:
        ranks = [int(r) for r in ranks]
        n = len(self.ranks)
        if any(not 0 <= r < n for r in ranks) or len(set(ranks)) != len(ranks):
            raise Exception(6, f"MPI_ERR_RANK: invalid ranks {ranks} for a group of {n}")
        return ranks

    def Incl(self, ranks) -> "Group":
        return Group._make([self.ranks[r] for r in self._check(ranks)])

    def Excl(self, ranks) -> "Group":
        drop = set(self._check(ranks))
        return Group._make([w for i, w in enumerate(self.ranks) if i not in drop])

    @staticmethod
    def _ranges(ranks) -> list[int]:
        out = []
        for first, last, stride in ranks:
            if stride == 0:
                raise Exception(12, "MPI_ERR_ARG: a range with stride 0")
            out += list(range(first, last + (1 if stride > 0 else -1), stride))
        return out

    def Range_incl(self, ranks) -> "Group":
        return self.Incl(self._ranges(ranks))

    def Range_excl(self, ranks) -> "Group":
        return self.Excl(self._ranges(ranks))

    def Translate_ranks(self, ranks=None, group: "Group | None" = None) -> list[int]:
        ranks = range(len(self.ranks)) if ranks is None else ranks
        other = group.ranks if group is not None else None
        out = []
        for r in ranks:
            if r == PROC_NULL:
                out.append(PROC_NULL)
            elif not 0 <= r < len(self.ranks):
                raise Exception(6, f"MPI_ERR_RANK: invalid rank {r} for a group of {len(self.ranks)}")
            elif other is None:
                out.append(r)
            else:
                out.append(other.index(self.ranks[r]) if self.ranks[r] in other else UNDEFINED)
        return out

    def Compare(self, group: "Group") -> int:
        a, b = self.ranks, group.ranks
        if a == b:
            return IDENT
        return SIMILAR if sorted(a) == sorted(b) else UNEQUAL

    def Union(self, group: "Group") -> "Group":
        return Group._make(self.ranks + [w for w in group.ranks if w not in self.ranks])

    def Intersection(self, group: "Group") -> "Group":
        return Group._make([w for w in self.ranks if w in group.ranks])

    Intersect = Intersection

    def Difference(self, group: "Group") -> "Group":
        return Group._make([w for w in self.ranks if w not in group.ranks])

    def Free(self) -> None:
        if self._h is None:
            raise Exception(8, "MPI_ERR_GROUP: invalid group (GROUP_NULL)")
        self._h = None

    def __getattr__(self, name):
        _unsupported("Group.", name)
