"""scapy's declarations stay the specification of the wire: every fast codec of ``emu.wire`` is made
from a layout written beside its declaration (so that a run never imports scapy), and here every
layout is proved to be the one read off the declaration, field by field -- names, order, widths,
signedness and bit groups -- and the declarations, made on first use, are whole."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import emu.wire
from emu.wire.codec import DECLARED, StructCodec, layout_of

MODULES = sorted(m.name for m in pkgutil.iter_modules(emu.wire.__path__))


def _codecs():
    for name in MODULES:
        mod = importlib.import_module(f"emu.wire.{name}")
        for attr, value in sorted(vars(mod).items()):
            if isinstance(value, StructCodec) and value.name in DECLARED.get(mod.__name__, ()):  # (not imported)
                yield f"{name}.{attr}", mod, value


CODECS = list(_codecs())


def test_the_wire_has_its_codecs():
    assert len(CODECS) == 28 and {c.name for _, _, c in CODECS} >= {"Fabric", "EmuLink", "MsgSegment", "QsSegment",
                                                                      "CollDesc", "IncData", "MpiEnvelope", "Cnp"}


@pytest.mark.parametrize("where,mod,codec", CODECS, ids=[w for w, _, _ in CODECS])
def test_each_codecs_layout_is_its_declarations(where, mod, codec):
    cls = getattr(mod, codec.name)  # (the declaration: made now, scapy imported)
    assert cls.__module__ == mod.__name__ and cls.__qualname__ == codec.name
    derived = StructCodec(cls)
    assert layout_of(cls) == codec.layout
    assert (derived.names, derived.struct.format, derived._bitgroups, derived.size, derived._flat) == \
           (codec.names, codec.struct.format, codec._bitgroups, codec.size, codec._flat)


def test_every_declaration_has_its_codec():
    """Each wire module's declarations are the headers its codecs lay out, and nothing else of it is
    a scapy declaration (but ``EthernetFCS``, made with scapy's Ethernet layer)."""
    from scapy.packet import Packet

    for name in MODULES:
        mod = importlib.import_module(f"emu.wire.{name}")
        laid = {c.name for where, m, c in CODECS if m is mod}
        assert set(DECLARED.get(mod.__name__, ())) == laid, name
        packets = {n for n, v in vars(mod).items() if isinstance(v, type) and issubclass(v, Packet)
                   and v.__module__ == mod.__name__ and n != "EthernetFCS"}
        assert packets == laid, name


@pytest.mark.parametrize("layout, error", [("a/4 b:B", "do not fill whole bytes"), ("a/4 b/3", "trailing bit"),
                                           ("a:d", "not a fixed struct format")])
def test_a_layout_the_codec_cannot_pack_is_refused(layout, error):
    with pytest.raises(TypeError, match=error):
        StructCodec.of("Bad", layout)


def test_the_wire_imports_no_scapy_until_a_declaration_is_asked_for():
    """... and then every module's, so that scapy's view of a frame is whole (a QsNet ACK under
    the fabric header although only ``Fabric`` was asked for), with those of a module imported later
    made as it is imported."""
    code = ("import sys, emu.wire, emu.wire.inc, emu.wire.cc, emu.wire.mpi, emu.wire.coding;"
            "assert not [m for m in sys.modules if m.startswith('scapy')], 'scapy imported';"
            "assert 'emu.wire.qsnet' not in sys.modules;"
            "from emu.wire.fabric import Fabric;"
            "from emu.wire import MSG, build_frame, PacketType;"
            "print(Fabric(build_frame(1, 2, PacketType.MSG, MSG.pack(1, 2, 3, 0))[14:]).summary());"
            "import emu.wire.qsnet as q;"  # (imported after the declarations were made: its own made at once)
            "print(Fabric(build_frame(1, 2, PacketType.QACK, q.ACK.pack(1, 0, 0, 0, 7, 9))[14:]).summary());"
            "assert 'scapy.layers.l2' not in sys.modules;"
            "from scapy.layers.l2 import Ether;"
            "print(Ether(build_frame(1, 2, PacketType.MSG, bytes(16))).summary())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["Fabric / MsgSegment", "Fabric / QsAck",
                                       "02:00:00:00:00:01 > 02:00:00:00:00:02 (0x88b5) / Fabric / MsgSegment"]
