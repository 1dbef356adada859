"""Generate the Wireshark Lua dissector from the scapy declarations (one declaration per header).

``python scripts/gen_dissector.py`` writes ``emu/wireshark/hpc_emu.lua``; a test regenerates it and
fails if the committed file differs, so a header changed in ``emu/wire`` cannot silently disagree
with what Wireshark shows. Each header becomes a protocol with one field per scapy field
(``hpcemu.<header>.<field>``), enum fields show their names, bit fields are cut out of their
64-bit word, repeated fields (the descriptor's data/location pairs) form a list, and what follows
the headers shows as bytes (``hpcemu.data``).

Layers: UDP payloads that start with the EmuLink magic (a heuristic, so live loopback captures
decode) hold records of EmuLink + an Ethernet frame; EtherType 0x88B5 is the Fabric header; its
``ptype`` selects the mechanism header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scapy.fields import MACField, _BitField, _EnumField

from .wire import CollDesc, EmuLink, Fabric, LinkCredit, MsgAck, MsgSegment, PacketType, Ping, StructCodec
from .wire.credit import ETHERTYPE_CREDIT
from .wire.fabric import ETHERTYPE_FABRIC, FLAG_NAMES
from .wire.outer import MAGIC, VERSION
from .wire.cc import Cnp, Nack, Pull
from .wire.coding import NcHeader
from .wire.inc import IncCtl, IncData
from .wire.qsnet import QsAck, QsCont, QsMgmt, QsSegment, QsTrailer, QsTrap, QsTxn

GENERATED_PATH = "wireshark/hpc_emu.lua"

# header class, short name (field prefix), how the Fabric ptype selects it (None: not under Fabric)
HEADERS: list[tuple[type, str, list[int] | None]] = [
    (EmuLink, "link", None),
    (Fabric, "fabric", None),
    (MsgSegment, "msg", [PacketType.MSG]),
    (MsgAck, "mack", [PacketType.MACK]),    # host.transport=reliable
    (Ping, "ping", [PacketType.PING, PacketType.PONG]),
    (CollDesc, "coll", [PacketType.COLL]),
    (LinkCredit, "credit", None),   # its own EtherType: link-control frames (credit flow control)
    (QsSegment, "qseg", [PacketType.QPKT]),  # a QsNet packet's first segment header; the rest below
    (QsCont, "qcont", None),
    (QsTxn, "qtxn", None),
    (QsTrailer, "qtrailer", None),
    (QsAck, "qack", [PacketType.QACK]),
    (QsTrap, "qtrap", [PacketType.TRAP]),
    (QsMgmt, "qmgmt", [PacketType.MGMT]),
    (IncData, "inc", [PacketType.INC]),      # spec 04: then the elements (or index/value pairs)
    (IncCtl, "incctl", [PacketType.INCCTL]),  # then the operation's body
    (NcHeader, "nc", [PacketType.NC]),       # spec 02: then the (coded) payload
    (Cnp, "cnp", [PacketType.CNP]),          # issue 47: congestion signals (emu.wire.cc)
    (Pull, "pull", [PacketType.PULL]),
    (Nack, "nack", [PacketType.NACK]),
]


@dataclass
class FieldInfo:
    name: str
    offset: int         # byte offset of the field, or of its 64/32/16/8-bit word for bit fields
    nbytes: int         # bytes read (the whole word for bit fields)
    shift: int | None   # bit fields: right shift within the word
    bits: int
    hexa: bool
    enum: dict[int, str] | None
    flags: list[str] | None


def fields_of(cls: type) -> list[FieldInfo]:
    """Byte/bit placement of every field, from the scapy declaration (via its struct codec)."""
    codec = StructCodec(cls)
    out: list[FieldInfo] = []
    off = 0
    groups = {start: sizes for start, sizes in codec._bitgroups}
    i = 0
    fds = cls.fields_desc
    while i < len(fds):
        f = fds[i]
        if i in groups:
            sizes = groups[i]
            total = sum(sizes)
            shift = total
            for j, bits in enumerate(sizes):
                g = fds[i + j]
                shift -= bits
                enum = dict(g.i2s) if isinstance(g, _EnumField) else None
                flags = list(g.names) if hasattr(g, "names") and isinstance(getattr(g, "names"), list) else None
                out.append(FieldInfo(g.name, off, total // 8, shift, bits, g.name.startswith("x"), enum, flags))
            off += total // 8
            i += len(sizes)
            continue
        if isinstance(f, MACField):
            out.append(FieldInfo(f.name, off, 6, None, 48, True, None, None))
            off += 6
        else:
            n = int(f.sz)
            enum = dict(f.i2s) if isinstance(f, _EnumField) else None
            hexa = type(f).__name__.startswith("X")
            out.append(FieldInfo(f.name, off, n, None, 8 * n, hexa, enum, None))
            off += n
        i += 1
    assert off == codec.size, (cls, off, codec.size)
    return out


def _lua_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _protofield(prefix: str, f: FieldInfo) -> str:
    abbr = f"hpcemu.{prefix}.{f.name}"
    kind = "uint64" if f.bits > 32 else ("uint32" if f.bits > 16 else ("uint16" if f.bits > 8 else "uint8"))
    base = "base.HEX" if f.hexa or f.name in ("magic", "cluster") or re.fullmatch(r"(data|loc)\d", f.name) else "base.DEC"
    vs = f"vs_{prefix}_{f.name}" if f.enum else "nil"
    return f'  {f.name} = ProtoField.{kind}({_lua_str(abbr)}, {_lua_str(f.name)}, {base}, {vs}),'


def generate() -> str:
    lines = [
        "-- hpc-emu Wireshark dissector. GENERATED by scripts/gen_dissector.py from the scapy",
        "-- declarations in emu/wire/ -- do not edit; change the declaration and regenerate.",
        "-- Install: emu wireshark install (or copy into Wireshark's personal Lua plugins folder).",
        "",
        "local data_field = ProtoField.bytes(\"hpcemu.data\", \"data\")",
        "local function u64(tvb, off, n)",
        "  if n == 8 then return tvb:range(off, 8):uint64() end",
        "  return UInt64.new(tvb:range(off, n):uint(), 0)",
        "end",
        "local function bits(word, shift, nbits)",
        "  return word:rshift(shift):band(UInt64.new(0xFFFFFFFF, 0xFFFFFFFF):rshift(64 - nbits))",
        "end",
    ]
    layouts = []
    for cls, prefix, _sel in HEADERS:
        fis = fields_of(cls)
        for f in fis:
            if f.enum:
                items = ", ".join(f"[{k}] = {_lua_str(v)}" for k, v in sorted(f.enum.items()))
                lines.append(f"local vs_{prefix}_{f.name} = {{{items}}}")
        lines.append(f"local p_{prefix} = Proto({_lua_str('hpcemu_' + prefix)}, {_lua_str('hpc-emu ' + cls.__name__)})")
        lines.append(f"local f_{prefix} = {{")
        lines.extend(_protofield(prefix, f) for f in fis)
        lines.append("}")
        lines.append(f"do local t = {{}} for _, v in pairs(f_{prefix}) do t[#t + 1] = v end")
        if prefix == "fabric":
            lines.append("  t[#t + 1] = data_field")
        lines.append(f"  p_{prefix}.fields = t end")
        rows = []
        for f in fis:
            shift = "nil" if f.shift is None else str(f.shift)
            rows.append(f"  {{{_lua_str(f.name)}, {f.offset}, {f.nbytes}, {shift}, {f.bits}}},")
        size = StructCodec(cls).size
        layouts.append((prefix, size, rows, cls))
        lines.append(f"local L_{prefix} = {{")
        lines.extend(rows)
        lines.append("}")
    lines += [
        "",
        "-- add every field of a header to `tree`, in declaration order; returns the values by name",
        "local function add_fields(tree, tvb, off, layout, fields, list_groups)",
        "  local values = {}",
        "  local lists = {}",
        "  for _, e in ipairs(layout) do",
        "    local name, foff, nbytes, shift, nbits = e[1], e[2], e[3], e[4], e[5]",
        "    local range = tvb:range(off + foff, nbytes)",
        "    local parent = tree",
        "    local idx = list_groups and string.match(name, '^%a+(%d+)$')",
        "    if idx then",
        "      if not lists[idx] then lists[idx] = tree:add(tvb:range(off + foff, 16), 'pair ' .. idx) end",
        "      parent = lists[idx]",
        "    end",
        "    if shift then",
        "      local v = bits(u64(tvb, off + foff, nbytes), shift, nbits)",
        "      if nbits > 32 then parent:add(fields[name], range, v) else parent:add(fields[name], range, v:tonumber()) end",
        "      values[name] = v:tonumber()",
        "    else",
        "      parent:add(fields[name], range)",
        "      if nbytes <= 4 then values[name] = range:uint() end",
        "    end",
        "  end",
        "  return values",
        "end",
        "",
    ]
    sub = {sel_val: prefix for _c, prefix, sel in HEADERS if sel for sel_val in sel}
    sizes = {prefix: StructCodec(cls).size for cls, prefix, _ in HEADERS}
    lines += [
        "-- a QsNet packet (spec 03): after the first segment header, its payload (starting with the",
        "-- transaction header), a continuation header before every further segment, the trailer",
        "local function qsnet_segments(tvb, tree, off, info, seg)",
        "  local n = tvb:len()",
        f"  local tlen = {sizes['qtrailer']}",
        "  local first = seg.length or 0",
        "  if n - off < first + tlen then return off, info .. ' [truncated]' end",
        f"  if first >= {sizes['qtxn']} then",
        f"    local tt = tree:add(p_qtxn, tvb:range(off, {sizes['qtxn']}))",
        "    local tv = add_fields(tt, tvb, off, L_qtxn, f_qtxn, false)",
        "    info = info .. string.format(' %s xfer=%d offset=%d/%d', vs_qtxn_op[tv.op] or tv.op, tv.xfer, tv.offset, tv.total)",
        "  end",
        "  if first > 0 then tree:add(data_field, tvb:range(off, first)) end",
        "  off = off + first",
        "  local segs = 1",
        f"  while n - off - tlen >= {sizes['qcont']} do",
        f"    local ct = tree:add(p_qcont, tvb:range(off, {sizes['qcont']}))",
        "    local cv = add_fields(ct, tvb, off, L_qcont, f_qcont, false)",
        f"    off = off + {sizes['qcont']}",
        "    local len = math.min(cv.length, n - off - tlen)",
        "    if len > 0 then tree:add(data_field, tvb:range(off, len)) end",
        "    off = off + len",
        "    segs = segs + 1",
        "  end",
        "  if n - off >= tlen then",
        "    local rt = tree:add(p_qtrailer, tvb:range(off, tlen))",
        "    local rv = add_fields(rt, tvb, off, L_qtrailer, f_qtrailer, false)",
        "    info = info .. string.format(' pkt=%d segments=%d', rv.pkt_id, segs)",
        "    off = off + tlen",
        "  end",
        "  return off, info",
        "end",
        "",
    ]
    lines.append("local by_ptype = {" + ", ".join(f"[{int(k)}] = {{p_{v}, f_{v}, L_{v}, {sizes[v]}, {str(v == 'coll').lower()}}}"
                                                 for k, v in sorted(sub.items())) + "}")
    lines += [
        "",
        "function p_fabric.dissector(tvb, pinfo, tree)",
        f"  if tvb:len() < {sizes['fabric']} then return 0 end",
        "  pinfo.cols.protocol = 'hpc-emu'",
        f"  local t = tree:add(p_fabric, tvb:range(0, {sizes['fabric']}))",
        "  local v = add_fields(t, tvb, 0, L_fabric, f_fabric, false)",
        "  local flags = {}",
    ]
    for bit, name in enumerate(FLAG_NAMES):
        if not name.startswith("R"):
            lines.append(f"  if bit.band(v.flags, {1 << bit}) ~= 0 then flags[#flags + 1] = {_lua_str(name)} end")
    lines += [
        "  if #flags > 0 then t:append_text(' [' .. table.concat(flags, ',') .. ']') end",
        f"  local off = {sizes['fabric']}",
        "  local s = by_ptype[v.ptype]",
        "  local info = string.format('%d -> %d %s', v.src, v.dst, vs_fabric_ptype[v.ptype] or ('ptype ' .. v.ptype))",
        "  local sv = nil",
        "  if s and tvb:len() >= off + s[4] then",
        "    local st = tree:add(s[1], tvb:range(off, s[4]))",
        "    sv = add_fields(st, tvb, off, s[3], s[2], s[5])",
        "    off = off + s[4]",
        "    if sv.seq then info = info .. ' seq=' .. sv.seq end",
        "    if sv.offset then info = info .. string.format(' offset=%d/%d', sv.offset, sv.total) end",
        "    if sv.coll_region then info = info .. string.format(' %s region=%d seg=%d/%d err=%d', vs_coll_head[sv.head] or sv.head, sv.coll_region, sv.seg, sv.nseg, sv.err) end",
        "  end",
        f"  if v.ptype == {int(PacketType.QPKT)} and sv then off, info = qsnet_segments(tvb, tree, off, info, sv) end",
        "  if tvb:len() > off then tree:add(data_field, tvb:range(off)) end",
        "  pinfo.cols.info = info",
        "  return tvb:len()",
        "end",
        f"DissectorTable.get('ethertype'):add(0x{ETHERTYPE_FABRIC:04X}, p_fabric)",
        "",
        "function p_credit.dissector(tvb, pinfo, tree)",
        f"  if tvb:len() < {sizes['credit']} then return 0 end",
        "  pinfo.cols.protocol = 'hpc-emu'",
        f"  local t = tree:add(p_credit, tvb:range(0, {sizes['credit']}))",
        "  local v = add_fields(t, tvb, 0, L_credit, f_credit, false)",
        "  pinfo.cols.info = string.format('credit vc=%d%s %d bytes', v.vc, v.pool == 1 and ' pool' or '', v.bytes)",
        f"  return {sizes['credit']}",
        "end",
        f"DissectorTable.get('ethertype'):add(0x{ETHERTYPE_CREDIT:04X}, p_credit)",
        "",
        "local eth = Dissector.get('eth_withfcs')  -- inner frames end with their FCS",
        "function p_link.dissector(tvb, pinfo, tree)",
        "  local off, n = 0, 0",
        f"  while tvb:len() - off >= {sizes['link']} do",
        f"    local t = tree:add(p_link, tvb:range(off, {sizes['link']}), 'hpc-emu link record ' .. n)",
        "    local v = add_fields(t, tvb, off, L_link, f_link, false)",
        f"    off = off + {sizes['link']}",
        "    if v.length > 0 and tvb:len() - off >= v.length then",
        "      eth:call(tvb:range(off, v.length):tvb(), pinfo, tree)",
        "      off = off + v.length",
        "    end",
        "    n = n + 1",
        "  end",
        "  return off",
        "end",
        "local function heur(tvb, pinfo, tree)",
        f"  if tvb:len() < {sizes['link']} then return false end",
        f"  if tvb:range(0, 2):uint() ~= 0x{MAGIC:04X} or tvb:range(2, 1):uint() ~= {VERSION} then return false end",
        "  p_link.dissector(tvb, pinfo, tree)",
        "  return true",
        "end",
        "p_link:register_heuristic('udp', heur)",
        "",
    ]
    return "\n".join(lines)


def field_names() -> dict[str, list[str]]:
    """Wireshark field abbreviations per header prefix (for tests and documentation)."""
    return {prefix: [f"hpcemu.{prefix}.{f.name}" for f in fields_of(cls)] for cls, prefix, _ in HEADERS}
