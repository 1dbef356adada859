#!/usr/bin/env python3
"""Regenerate emu/wireshark/hpc_emu.lua from the scapy declarations in emu/wire/.

Run it after changing or adding a header; tests/test_wireshark.py fails while the committed file
differs from what this writes.
"""

import pathlib

from emu.dissector import GENERATED_PATH, generate

if __name__ == "__main__":
    path = pathlib.Path(__file__).resolve().parent.parent / "emu" / GENERATED_PATH
    path.write_text(generate())
    print(f"wrote {path}")
