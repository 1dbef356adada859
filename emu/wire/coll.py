"""The 128-byte collective descriptor of spec 01 (NIC-offloaded reduction, triggered descriptors).

Sixteen 64-bit words. Word 0 is the spec's layout exactly (bit 63 first):

    Head(4) Type(1) S/M(1) Lint(1) Rint(1) Inst(1) Err(1) Fen(1) SwpMP(1) CollRegion(10) CpCnt(6)
    SwpFlag(3) NoCnct(1) SrcVP(6) DestVP(6) DestID/SrcID(20)

The figure has no CP bit: Type (bit 59) is it -- a message whose Type bit is set increments the
destination VP's CP_Counter on arrival. CpCnt keeps its 6 bits: a reduce descriptor carries its child
count there (the source driver's ``coll_counter``), so a tree with a branch degree above 63 (a flat
tree on 256 nodes) is refused before it runs (``emu.nodes.collectives.offload.MAX_CPCNT``) -- unless
``nic.counter_bits`` asks for the wider counter of the source's flat test tree: then the count is
BranchDegree's (8 bits) and CpCnt is 0 where it cannot hold it (a departure, docs/nic-offload.md).

Word 1 (widths chosen here):

    ReduceDataNum(8)  operands carried (<= 6 of 64 bits or <= 12 of 32 bits: 48 bytes at most)
    ErrVec(8)         error bits: 0x01 Rtype/Branch mismatch, 0x02 queue overflow, 0x04 unknown VP
    BranchDegree(8)   in a posted reduce descriptor: the child messages this node waits for;
                      in a reduce message: the receiving node's degree (copied from PBranch)
    PBranch(8)        the parent's branch degree (what the send unit writes into BranchDegree)
    Rop(4)            operation (RopCode)
    Rdtype(4)         operand type (RdType); with Rbit it selects the ALU path
    Rbit(1)           operand width: 0 = 32 bits, 1 = 64 bits
    Rflag(1)          this is a reduce descriptor (its local data is combined)
    Bflag(1)          this is a broadcast descriptor (its data is swapped in on trigger)
    Seg(8)            index of this descriptor's part of a longer message
    NSeg(8)           parts of the message
    Rsvd(5)

Words 2-15: seven pairs ``ReduceData_i``, ``Location_i``. 64-bit operands take one data word each;
32-bit operands two (the first in the high half); locations (the rank that holds a MAXLOC/MINLOC
value) are laid out the same way. A descriptor carries at most 48 bytes of operands, so the
seventh pair is never filled (it is kept for the layout).
"""

from __future__ import annotations

import enum

from .codec import StructCodec, declarations
from .fabric import PacketType

DESC_LEN = 128
MAX_DATA_BYTES = 48
PAIRS = 7


class Head(enum.IntEnum):
    """Descriptor kinds (word 0 bits 63-60)."""

    REDUCE = 1
    BCAST = 2
    ERROR = 15


class RopCode(enum.IntEnum):
    SUM = 0
    MAX = 1
    MIN = 2
    MAXLOC = 3
    MINLOC = 4
    LAND = 5
    LOR = 6
    LXOR = 7
    BAND = 8
    BOR = 9
    BXOR = 10


class RdType(enum.IntEnum):
    FLOAT = 0     # IEEE binary32 / binary64 by Rbit
    INT = 1       # two's complement
    UINT = 2


class ErrBit(enum.IntFlag):
    MISMATCH = 0x01
    OVERFLOW = 0x02
    UNKNOWN_VP = 0x04
    TIMEOUT = 0x08


def _names(e):
    return {m.value: m.name for m in e}


def _declare() -> dict:
    """scapy's declaration (the specification; ``DESC`` is its layout)."""
    from scapy.fields import BitEnumField, BitField, XLongField
    from scapy.packet import Packet, bind_layers

    from .fabric import Fabric

    class CollDesc(Packet):
        name = "CollDesc"
        fields_desc = [
            # word 0
            BitEnumField("head", Head.REDUCE, 4, _names(Head)),
            BitField("type", 1, 1),
            BitField("sm", 0, 1),
            BitField("lint", 0, 1),
            BitField("rint", 0, 1),
            BitField("inst", 0, 1),
            BitField("err", 0, 1),
            BitField("fen", 0, 1),
            BitField("swpmp", 0, 1),
            BitField("coll_region", 0, 10),
            BitField("cpcnt", 0, 6),
            BitField("swpflag", 0, 3),
            BitField("nocnct", 0, 1),
            BitField("src_vp", 0, 6),
            BitField("dest_vp", 0, 6),
            BitField("node_id", 0, 20),
            # word 1
            BitField("data_num", 0, 8),
            BitField("err_vec", 0, 8),
            BitField("branch", 0, 8),
            BitField("pbranch", 0, 8),
            BitEnumField("rop", RopCode.SUM, 4, _names(RopCode)),
            BitEnumField("rdtype", RdType.FLOAT, 4, _names(RdType)),
            BitField("rbit", 1, 1),
            BitField("rflag", 0, 1),
            BitField("bflag", 0, 1),
            BitField("seg", 0, 8),
            BitField("nseg", 1, 8),
            BitField("rsvd", 0, 5),
        ] + [f for i in range(PAIRS) for f in (XLongField(f"data{i}", 0), XLongField(f"loc{i}", 0))]

    bind_layers(Fabric, CollDesc, ptype=PacketType.COLL)
    return {"CollDesc": CollDesc}


__getattr__ = declarations(globals(), _declare, ("CollDesc",))

DESC = StructCodec.of("CollDesc", "head/4 type/1 sm/1 lint/1 rint/1 inst/1 err/1 fen/1 swpmp/1 coll_region/10 "
                      "cpcnt/6 swpflag/3 nocnct/1 src_vp/6 dest_vp/6 node_id/20 data_num/8 err_vec/8 branch/8 "
                      "pbranch/8 rop/4 rdtype/4 rbit/1 rflag/1 bflag/1 seg/8 nseg/8 rsvd/5 "
                      + " ".join(f"data{i}:Q loc{i}:Q" for i in range(PAIRS)))
assert DESC.size == DESC_LEN
