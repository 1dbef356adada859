"""The Lua dissector: generated from the scapy declarations, and tshark decodes what the emulator sent."""

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

import pytest

import emu
from emu.dissector import GENERATED_PATH, field_names, generate
from emu.topologies import build
from emu.wire import DESC, FABRIC, FCS_LEN, HDR_LEN, MACK, MSG, OUTER, PING, PacketType, add_fcs
from emu.nodes.collectives.run import run_collective

LUA = pathlib.Path(emu.__file__).resolve().parent / GENERATED_PATH
TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (.ci/run installs it with apt)")
SUB = {PacketType.MSG: ("msg", MSG), PacketType.PING: ("ping", PING), PacketType.PONG: ("ping", PING),
       PacketType.COLL: ("coll", DESC), PacketType.MACK: ("mack", MACK)}


def test_committed_dissector_is_generated_from_the_declarations():
    assert LUA.read_text() == generate(), "run python scripts/gen_dissector.py and commit the result"


def tshark_fields(pcap, fields, extra=()):
    cmd = [TSHARK, "-X", f"lua_script:{LUA}", "-r", str(pcap), "-T", "fields", "-E", "separator=\t",
           "-E", "occurrence=a", "-E", "aggregator=,", *extra]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "Lua: Error" not in out.stderr and "error" not in out.stderr.lower().replace("running as user", ""), out.stderr
    return [line.split("\t") for line in out.stdout.splitlines()]


def expected_inner(frame: bytes) -> dict[str, int]:
    vals = dict(zip((f"hpcemu.fabric.{n}" for n in FABRIC.names), FABRIC.unpack(frame, 14)))
    prefix, codec = SUB[vals["hpcemu.fabric.ptype"]]
    vals.update(zip((f"hpcemu.{prefix}.{n}" for n in codec.names), codec.unpack(frame, HDR_LEN)))
    return vals


def _int(text: str) -> int:
    return int(text, 0)


@needs_tshark
async def test_tshark_decodes_every_header_of_a_run_frame_by_frame(tmp_path):
    cap = tmp_path / "all.pcapng"
    topo = build("star:n=4", settings={"host": {"transport": "reliable"}})                 # and MACK
    async with emu.Cluster(topo, capture=cap) as net:
        await net["h0"].ping("h3")                                                          # PING, PONG
        await run_collective(net, "allreduce", count=300, dtype="float32")                  # MSG
        await run_collective(net, "allreduce", count=9, dtype="int64", op="minloc", offload="nic", branch=2)  # COLL
        records = await net.capture_records()
    names = field_names()
    fields = [f for prefix in ("fabric", "msg", "mack", "ping", "coll") for f in names[prefix]]
    rows = tshark_fields(cap, ["frame.number", "_ws.malformed", "_ws.expert", "hpcemu.data"] + fields)
    assert len(rows) == len(records) > 100
    seen = set()
    for (ts, iface, direction, frame), row in zip(records, rows):
        assert row[1] == "" and row[2] == "", f"frame {row[0]} is malformed or has an expert note"
        want = expected_inner(frame)
        got = {f: _int(v) for f, v in zip(fields, row[4:]) if v != ""}
        assert got == want, f"frame {row[0]}"
        body = HDR_LEN + SUB[want["hpcemu.fabric.ptype"]][1].size
        assert bytes.fromhex(row[3].replace(":", "")) == frame[body:-FCS_LEN]  # the FCS is Ethernet's
        seen.add(SUB[want["hpcemu.fabric.ptype"]][0] + str(want["hpcemu.fabric.ptype"]))
    assert seen == {"ping2", "ping3", "msg1", "coll4", "mack12"}


def _outer_pcap(path, records):
    """UDP datagrams on loopback carrying EmuLink records, as a live capture would see them."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    pkts = [Ether() / IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=40000, dport=40001) / payload
            for payload in records]
    wrpcap(str(path), pkts)


@needs_tshark
def test_tshark_decodes_the_outer_encapsulation_of_batched_datagrams(tmp_path):
    from emu.wire import MAGIC, VERSION, PacketType, build_frame

    f1 = add_fcs(build_frame(1, 2, PacketType.PING, PING.pack(7, 8, 9)))
    f2 = add_fcs(build_frame(2, 1, PacketType.MSG, MSG.pack(1, 2, 3, 0) + b"abc"))
    dgram = (OUTER.pack(MAGIC, VERSION, 0, 0xC0FFEE, 5, 41, 1000, len(f1), 0) + f1
             + OUTER.pack(MAGIC, VERSION, 0, 0xC0FFEE, 5, 42, 2000, len(f2), 0) + f2)
    nack = OUTER.pack(MAGIC, VERSION, 1, 0xC0FFEE, 6, 17, 0, 0, 0)
    _outer_pcap(tmp_path / "udp.pcap", [dgram, nack])
    link = field_names()["link"]
    rows = tshark_fields(tmp_path / "udp.pcap", ["_ws.malformed"] + link + ["hpcemu.fabric.ptype", "eth.fcs.status"],
                         extra=["-o", "eth.check_fcs:TRUE"])
    assert rows[0][0] == "" and rows[1][0] == ""
    assert rows[0][-1] == "1,1"  # both inner frames' FCS checked good
    got = [{f: v for f, v in zip(link + ["ptype"], r[1:])} for r in rows]
    assert got[0]["hpcemu.link.seq"] == "41,42" and got[0]["hpcemu.link.ts_ns"] == "1000,2000"
    assert got[0]["hpcemu.link.cluster"] == "0x00c0ffee,0x00c0ffee" and got[0]["ptype"] == "2,1"
    assert got[1]["hpcemu.link.kind"] == "1" and got[1]["hpcemu.link.seq"] == "17" and got[1]["ptype"] == ""


def _can_capture_on_lo() -> str | None:
    if TSHARK is None:
        return "tshark is not installed"
    out = subprocess.run([TSHARK, "-i", "lo", "-a", "duration:1", "-c", "1", "-w", os.devnull],
                         capture_output=True, text=True)
    if out.returncode != 0 and ("permission" in out.stderr.lower() or "couldn't run" in out.stderr.lower()
                                or "you don't have" in out.stderr.lower()):
        return f"no capture permission on lo: {out.stderr.strip()[:200]}"
    return None


NO_LIVE = _can_capture_on_lo()


def _until_capturing(pcap, deadline: float) -> None:
    """Until the capture has written a datagram of ours (a probe to the discard port, not the
    emulator's: filtered out below by its cluster id), or the deadline: the file's header alone does
    not say the capture sees packets yet (a busy machine once let a whole ping pass before it did)."""
    size = pcap.stat().st_size if pcap.exists() else 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        while time.time() < deadline:
            s.sendto(b"probe", ("127.0.0.1", 9))
            time.sleep(0.2)
            if pcap.exists() and pcap.stat().st_size > size:
                return


@pytest.mark.skipif(NO_LIVE is not None, reason=str(NO_LIVE))
def test_live_loopback_capture_decodes(tmp_path):
    pcap = tmp_path / "live.pcapng"
    # a 64 MiB kernel buffer: other emulator runs on the machine (a parallel test worker) may flood lo
    cap = subprocess.Popen([TSHARK, "-i", "lo", "-f", "udp", "-B", "64", "-w", str(pcap), "-q"],
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not (pcap.exists() and pcap.stat().st_size > 0):
            time.sleep(0.1)   # the capture file gets its header once capturing has started
        _until_capturing(pcap, deadline)
        script = ("import trio, emu\n"
                  "async def main():\n"
                  "    async with emu.Cluster('star:n=3', direct=False) as net:\n"
                  "        await net['h0'].ping('h2')\n"
                  "        print(hex(net.cluster_id))\n"
                  "trio.run(main)\n")
        cid = subprocess.run([sys.executable, "-c", script], check=True, timeout=60, capture_output=True,
                             text=True).stdout.strip()
        time.sleep(2.0)
    finally:
        cap.terminate()
        cap.wait(timeout=20)
    # this cluster's datagrams only (other emulator runs on the machine have other cluster ids)
    rows = tshark_fields(pcap, ["hpcemu.link.magic", "hpcemu.link.seq", "hpcemu.fabric.ptype"],
                         extra=["-Y", f"hpcemu.link.cluster == {cid}"])
    assert len(rows) == 4   # request and reply, each over two links
    assert {r[0] for r in rows} == {"0xfab1"} and sorted(r[2] for r in rows) == ["2", "2", "3", "3"]


def test_emu_wireshark_path_and_install(tmp_path, capsys):
    from emu.front.cli import main

    assert main(["wireshark", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(LUA)
    assert main(["wireshark", "install", "--dest", str(tmp_path / "plugins")]) == 0
    assert (tmp_path / "plugins" / "hpc_emu.lua").read_text() == LUA.read_text()


@needs_tshark
async def test_tshark_walks_the_segments_of_qsnet_packets(tmp_path):
    """Every QsNet packet of a put/get run: the first segment header, the transaction header, one
    continuation header per further segment and the trailer, as the codec made them."""
    from emu.wire.qsnet import ACK, CONT_LEN, SEG, TRAILER, TXN, decode_packet, segments

    cap = tmp_path / "qs.pcapng"

    async def app(host):
        host.mem_write(0, bytes(range(256)) * 12)
        await host.put(3, 0, 0x800, 3000)
        await host.get(3, 0x800, 0x4000, 600)
        return (await host.fadd(3, 0x40, 5)).value

    async with emu.Cluster("star:n=4", capture=cap) as net:
        await net.run({"h0": app})
        records = await net.capture_records()
    rows = tshark_fields(cap, ["frame.number", "_ws.malformed", "hpcemu.fabric.ptype", "hpcemu.qseg.dest",
                               "hpcemu.qseg.crc16", "hpcemu.qtxn.op", "hpcemu.qtxn.offset", "hpcemu.qcont.index",
                               "hpcemu.qtrailer.pkt_id", "hpcemu.qtrailer.crc32", "hpcemu.qack.pkt_id"])
    assert len(rows) == len(records)
    seen = {PacketType.QPKT: 0, PacketType.QACK: 0}
    for row, (_t, _i, _f, wire) in zip(rows, records):
        frame = wire[:-FCS_LEN]
        _n, malformed, pt, dest, crc16, op, offset, conts, pkt_id, crc32, ack_id = row
        assert malformed == ""
        assert int(pt) == FABRIC.unpack(frame, 14)[4]
        if int(pt) == PacketType.QPKT:
            seg = SEG.unpack(frame, HDR_LEN)
            _vc, _p, d, _ts, payload, pid = decode_packet(frame, HDR_LEN)
            txn = TXN.unpack(payload)
            assert (int(dest), _int(crc16), int(op), int(offset)) == (d, seg[-1], txn[0], txn[4])
            assert conts.split(",") == ([str(i) for i in range(1, segments(len(payload)))] if len(payload) > 248 else [""])
            assert (int(pkt_id), _int(crc32)) == (pid, TRAILER.unpack(frame, len(frame) - 8)[0])
            seen[PacketType.QPKT] += 1
        elif int(pt) == PacketType.QACK:
            assert int(ack_id) == ACK.unpack(frame, HDR_LEN)[4]
            seen[PacketType.QACK] += 1
    assert seen[PacketType.QPKT] >= 2 * 6 and seen[PacketType.QACK] >= 2 * 6  # both ends of each link
