"""The messages between a rank process and the emulator that runs its host (both sides use this).

A message is a head and a payload: ``!IH`` (payload bytes, head bytes), the head, then the payload
as raw bytes. The head is an object of numbers, strings, lists and None, in one of two forms:

- UTF-8 JSON (its first byte ``{``): any head;
- binary, for the heads of the common calls and answers (``REQUESTS``, ``ANSWERS``): a code byte
  (< 0x20, so never JSON), then the fields' values in the order the table declares them, little
  endian (``q`` int64, ``?`` bool, ``d`` double, ``n`` a string of ``NAMES`` by its index, ``L`` a
  list of int64 and ``S`` a status row -- id, source, tag, bytes (int64) and cancelled (bool) --
  or ``R`` a list of them, the lists as a count and the items after the fixed fields). A head has
  the binary form when its keys are exactly a table row's, in that order, and its values fit;
  otherwise it goes as JSON. The decoder gives back the same object either way.

Nothing is unpickled: a pickled object a rank sends (mpi4py's lowercase calls) is payload, opaque
to the emulator, and only the rank it is for unpickles it -- as between the processes of a real
MPI job.

The channel is a ``socket.socketpair`` the emulator makes for each rank before starting it and hands
on by file descriptor (``pass_fds``): it has no address, so nobody but the two processes holding its
ends can write to it. That is the authentication; no port is opened, on loopback or elsewhere.
"""

from __future__ import annotations

import json
import select
import signal
import socket
import struct

FLUSH_SIGNAL = getattr(signal, "SIGRTMIN", 34) + 5
"""The signal the emulator sends a rank it finds waiting outside MPI (``emu.front.mpiwatch``): the rank
writes the calls it holds (``Channel.held``), which would otherwise wait for its next call."""
PREFIX = struct.Struct("!IH")
MAX_HEAD = 1 << 16
MAX_PAYLOAD = 1 << 32
CPU_FLAG = 0x80
"""Set in the code byte of a request whose head ends with ``cpu`` (a double after the fields)."""

NAMES = (None, "std", "sync", "all", "any", "some", "barrier", "bcast", "reduce", "gather", "scatter",
         "alltoall", "scan", "reduce_scatter",
         "Send", "Recv", "Isend", "Irecv", "Ssend", "Issend", "Bsend", "Ibsend", "Rsend", "Irsend", "Sendrecv",
         "send", "recv", "isend", "irecv", "ssend", "issend", "bsend", "ibsend", "sendrecv",
         "Wait", "Waitall", "Waitany", "Waitsome", "Test", "Testall", "Testany", "Testsome",
         "Barrier", "Bcast", "Reduce", "Allreduce", "Scan", "Exscan", "Gather", "Allgather", "Scatter",
         "Alltoall", "Reduce_scatter_block", "Reduce_scatter",
         "sum", "prod", "max", "min", "land", "lor", "lxor", "band", "bor", "bxor", "maxloc", "minloc",
         "<f8", "<f4", "<i8", "<i4", "<i2", "|i1", "<u8", "<u4", "<u2", "|u1", "<c16", "<c8", "|b1",
         "DOUBLE", "FLOAT", "LONG", "INT", "SHORT", "SIGNED_CHAR", "UNSIGNED_LONG", "UNSIGNED", "UNSIGNED_SHORT",
         "UNSIGNED_CHAR", "BYTE", "CHAR", "C_DOUBLE_COMPLEX", "C_FLOAT_COMPLEX", "C_BOOL", "INT64_T", "INT32_T",
         "LONG_LONG", "UNSIGNED_LONG_LONG")
"""The strings a binary head carries by index (call names, modes, collective kinds, operators,
element types); a head with any other string goes as JSON."""
NAME_ID = {n: i for i, n in enumerate(NAMES)}

REQUESTS = (  # code, op, fields: the rank's calls, the fields in the order the rank's API gives them
    (1, "send", "ctx:q dest:q tag:q mode:n nb:? call:n"),
    (2, "recv", "ctx:q source:q tag:q call:n"),
    (3, "recv", "ctx:q source:q tag:q nb:? call:n"),
    (4, "wait", "ids:L mode:n test:? call:n"),
    (5, "coll", "ctx:q kind:n call:n"),
    (6, "coll", "ctx:q kind:n call:n root:q n:q"),
    (7, "coll", "ctx:q kind:n call:n rop:n root:q all:? dtype:n tname:n"),
    (8, "sendrecv", "ctx:q dest:q sendtag:q source:q recvtag:q call:n"),
    (9, "send", "ctx:q dest:q tag:q mode:n nb:? call:n quiet:?"),
    (10, "now", ""),
    (11, "send", "ctx:q dest:q tag:q mode:n nb:? call:n quiet:? rid:q"),
    (12, "recv", "ctx:q source:q tag:q nb:? call:n quiet:? rid:q"),
    (13, "wait", "ids:L mode:n test:? call:n keep:?"),
)
ANSWERS = (  # code, fields: the emulator's answers (``now`` last: the rank's host clock)
    (16, "now:q"),
    (17, "req:q now:q"),
    (18, "st:S now:q"),
    (19, "st:R now:q"),
    (20, "lens:L now:q"),
)
_FMT = {"q": "q", "?": "?", "d": "d", "n": "H", "L": "I", "S": "qqqq?", "R": "I"}
_ROW = struct.Struct("<qqqq?")


class ChannelClosed(EOFError):
    """The other end of the channel closed (the process ended)."""


class _Form:
    """One binary head form of the tables above."""

    def __init__(self, code: int, op: str | None, fields: str):
        self.code, self.op = code, op
        self.fields = tuple(tuple(f.split(":")) for f in fields.split())
        self.names = tuple(n for n, _ in self.fields)
        self.fixed = struct.Struct("<B" + "".join(_FMT[k] for _, k in self.fields))
        self.simple = all(k in "q?" for _, k in self.fields)  # no table lookups, no lists
        self.plain = all(k in "q?dn" for _, k in self.fields)  # no lists: one value per field
        self.isname = tuple(k == "n" for _, k in self.fields)
        self.named = tuple(n for n, k in self.fields if k == "n")
        self.name_at = tuple(j for j, (_, k) in enumerate(self.fields) if k == "n")
        self.row_now = op is None and tuple(k for _, k in self.fields) == ("S", "q")  # (a status, the clock)
        if self.plain:  # its decoder written out: one unpack, one dict display (``decode``'s plain case)
            self.decode = self._plain_decoder()

    def _plain_decoder(self):
        """``decode`` of a plain form as one function of its own: the same dict, keys in the same
        order (the fields, then ``op``, then ``cpu``), the same errors (``struct.error``, ``IndexError``)."""
        items = [f"{n!r}: " + (f"NAMES[v[{j}]]" if k == "n" else f"v[{j}]") for j, (n, k) in enumerate(self.fields, 1)]
        body = [f"def decode(b, unpack=unpack, NAMES=NAMES, cpu=cpu):", "    v = unpack(b)"]
        if self.op is None:
            body.append("    return {" + ", ".join(items) + "}")
        else:
            items.append(f"'op': {self.op!r}")
            body += ["    head = {" + ", ".join(items) + "}",
                     f"    if b[0] & {CPU_FLAG}:", f"        head['cpu'] = cpu(b, {self.fixed.size})[0]",
                     "    return head"]
        scope = {"unpack": self.fixed.unpack_from, "NAMES": NAMES, "cpu": _CPU.unpack_from}
        exec("\n".join(body), scope)  # (the tables above are the only source: no outside text)
        return scope["decode"]

    def encode(self, head: dict, cpu: bool) -> bytes:
        code = self.code | CPU_FLAG if cpu else self.code
        if self.simple:
            vals = list(head.values())
            if self.op is not None:
                del vals[len(self.fields):]
            out = self.fixed.pack(code, *vals)
        elif self.row_now:
            st, now = head.values()
            if len(st) != 5:
                raise ValueError("a status row has 5 fields")
            out = self.fixed.pack(code, *st, now)
        elif self.plain:  # (the head's keys are the fields in order, then op and cpu: not values)
            vals = list(head.values())
            del vals[len(self.fields):]
            for j in self.name_at:
                vals[j] = NAME_ID[vals[j]]
            out = self.fixed.pack(code, *vals)
        else:
            vals, tail = [], []
            for name, kind in self.fields:
                v = head[name]
                if kind == "n":
                    vals.append(NAME_ID[v])
                elif kind == "L":
                    vals.append(len(v))
                    tail.append(struct.pack(f"<{len(v)}q", *v))
                elif kind == "S":
                    if len(v) != 5:
                        raise ValueError("a status row has 5 fields")
                    vals.extend(v)
                elif kind == "R":
                    vals.append(len(v))
                    tail.extend(_ROW.pack(*row) for row in v)
                else:
                    vals.append(v)
            out = self.fixed.pack(code, *vals) + b"".join(tail)
        return out + _CPU.pack(head["cpu"]) if cpu else out

    def decode(self, b) -> dict:
        vals = self.fixed.unpack_from(b)
        at = self.fixed.size
        if self.plain:
            head = dict(zip(self.names, vals[1:]))
            for name in self.named:
                head[name] = NAMES[head[name]]
            if self.op is not None:
                head["op"] = self.op
                if b[0] & CPU_FLAG:
                    head["cpu"] = _CPU.unpack_from(b, at)[0]
            return head
        if self.row_now:
            return {self.names[0]: list(vals[1:6]), self.names[1]: vals[6]}
        head, i = {}, 1
        for name, kind in self.fields:
            if kind == "n":
                head[name] = NAMES[vals[i]]
            elif kind == "L":
                n = vals[i]
                head[name] = list(struct.unpack_from(f"<{n}q", b, at))
                at += 8 * n
            elif kind == "S":
                head[name] = list(vals[i:i + 5])
                i += 4
            elif kind == "R":
                rows = []
                for _ in range(vals[i]):
                    rows.append(list(_ROW.unpack_from(b, at)))
                    at += _ROW.size
                head[name] = rows
            else:
                head[name] = vals[i]
            i += 1
        if self.op is not None:
            head["op"] = self.op
            if b[0] & CPU_FLAG:
                head["cpu"] = _CPU.unpack_from(b, at)[0]
        return head


_CPU = struct.Struct("<d")
_BY_CODE: dict[int, _Form] = {}
_BY_KEYS: dict[tuple, list[tuple[_Form, bool]]] = {}
for _code, _op, _fields in REQUESTS:
    _f = _BY_CODE[_code] = _Form(_code, _op, _fields)
    _BY_KEYS.setdefault((_op, _f.names + ("op",)), []).append((_f, False))
    _BY_KEYS.setdefault((_op, _f.names + ("op", "cpu")), []).append((_f, True))
for _code, _fields in ANSWERS:
    _f = _BY_CODE[_code] = _Form(_code, None, _fields)
    _BY_KEYS.setdefault((None, _f.names), []).append((_f, False))


def encode_head(head: dict) -> bytes:
    """The head's bytes: its binary form if it has one, else JSON."""
    for form, cpu in _BY_KEYS.get((head.get("op"), tuple(head)), ()):
        try:
            return form.encode(head, cpu)
        except (struct.error, KeyError, TypeError, ValueError, OverflowError):
            pass  # a value this form cannot carry (a float for an int, an unknown name): the next, or JSON
    return json.dumps(head, separators=(",", ":")).encode()


def decode_head(b) -> dict:
    """The head of these bytes (either form). A head that is neither is refused (``ValueError``)."""
    if not b:
        return {}
    if b[0] == 0x7B:  # "{"
        head = json.loads(bytes(b).decode())
        if not isinstance(head, dict):
            raise ValueError("malformed message head (not a JSON object)")
        return head
    form = _BY_CODE.get(b[0] & ~CPU_FLAG)
    if form is None:
        raise ValueError(f"malformed message head (code {b[0]})")
    try:
        return form.decode(b)
    except (struct.error, IndexError) as e:
        raise ValueError(f"malformed message head ({e})") from None


def frame(head: dict, payload=b"") -> bytes:
    """One message's bytes, whole (a payload of at most 64 KiB): what ``send`` sends."""
    h = encode_head(head)
    if len(h) >= MAX_HEAD:
        raise ValueError(f"message head of {len(h)} bytes; at most {MAX_HEAD - 1}")
    return b"".join((PREFIX.pack(len(payload), len(h)), h, payload))


def send(sock: socket.socket, head: dict, payload=b"", before: bytes = b"") -> None:
    """One message: the head and the payload (bytes-like; a large one sent without a copy), after
    ``before`` (messages already framed, ``frame``), all in one system call where they fit."""
    h = encode_head(head)
    if len(h) >= MAX_HEAD:
        raise ValueError(f"message head of {len(h)} bytes; at most {MAX_HEAD - 1}")
    n = len(payload) if type(payload) is bytes else memoryview(payload).nbytes
    if n >= MAX_PAYLOAD:
        raise ValueError(f"message of {n} bytes; at most {MAX_PAYLOAD - 1} per call")
    if n <= 65536:
        sock.sendall(b"".join((before, PREFIX.pack(n, len(h)), h, payload)))
    else:
        sock.sendall(before + PREFIX.pack(n, len(h)) + h)
        sock.sendall(payload)


class Reader:
    """The messages arriving on one socket, read with as few system calls as they allow: one
    ``recv`` usually brings a whole small message (its prefix, head and payload), or several."""

    SIZE = 1 << 17  # more than a prefix and the largest head

    def __init__(self, sock: socket.socket, idle=None, idle_s: float = 2.0):
        self.sock = sock
        self.idle = idle
        """Called after ``idle_s`` seconds of waiting without a byte (it may raise); the wait then goes on."""
        self.poller = None
        if idle is not None:  # the kernel ends a wait of idle_s (one system call per read, waiting or not)
            sec = max(idle_s, 0.001)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                struct.pack("@ll", int(sec), int((sec - int(sec)) * 1e6)))
            except (OSError, struct.error):  # no receive timeout here: look before each read instead
                self.poller = select.poll()
                self.poller.register(sock, select.POLLIN)
                self.idle_ms = max(1, int(idle_s * 1000))
        self.buf = bytearray(self.SIZE)
        self.view = memoryview(self.buf)
        self.start = self.end = 0

    def _fill(self, need: int) -> None:
        """At least ``need`` bytes in the buffer from ``start`` on (need <= SIZE)."""
        if self.start + need > self.SIZE:  # move what is left to the front
            left = self.end - self.start
            self.buf[:left] = self.buf[self.start:self.end]
            self.start, self.end = 0, left
        while self.end - self.start < need:
            k = self._recv_into(self.view[self.end:], 0)
            if k == 0:
                raise ChannelClosed("the other end closed the channel")
            self.end += k

    def _recv_into(self, view, n: int) -> int:
        if self.poller is None:
            while True:
                try:
                    return self.sock.recv_into(view, n)
                except BlockingIOError:  # (SO_RCVTIMEO) idle_s without a byte
                    if self.idle is None:
                        raise
                    self.idle()
        while True:  # what is there at once (one system call); else wait for it, looking every idle_s
            try:
                return self.sock.recv_into(view, n, socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
            if not self.poller.poll(self.idle_ms):
                self.idle()

    def pending(self) -> bool:
        """A whole or partial message already read from the socket and not yet taken."""
        return self.end > self.start

    def recv(self) -> tuple[dict, bytearray]:
        """The next message: (head, payload). A malformed head is refused (``ValueError``)."""
        start = self.start
        if start == self.end:  # nothing read ahead: one read (usually the whole message, or several)
            start = self.start = self.end = 0
            k = self._recv_into(self.view, 0)
            if k == 0:
                raise ChannelClosed("the other end closed the channel")
            self.end = k
        end = self.end
        if end - start >= 6:  # the whole message here already: taken without ``_fill``
            n, hn = PREFIX.unpack_from(self.buf, start)
            stop = start + 6 + hn + n
            if stop <= end:
                at = start + 6
                head = decode_head(self.view[at:at + hn]) if hn else {}
                payload = self.buf[at + hn:stop] if n else bytearray()
                if stop == end:
                    self.start = self.end = 0
                else:
                    self.start = stop
                return head, payload
        return self._recv()

    def _recv(self) -> tuple[dict, bytearray]:
        if self.end - self.start < 6:
            self._fill(6)
        n, hn = PREFIX.unpack_from(self.buf, self.start)
        small = n + hn + 6 <= self.SIZE
        self._fill(6 + hn + (n if small else 0))
        at = self.start + 6
        head = decode_head(self.view[at:at + hn]) if hn else {}
        at += hn
        if small:
            payload = self.buf[at:at + n] if n else bytearray()
            self.start = at + n
        else:  # larger than the buffer: what is here, then the rest straight into its own buffer
            payload = bytearray(n)
            have = self.end - at
            payload[:have] = self.view[at:self.end]
            self.start = self.end = 0
            view, got = memoryview(payload), have
            while got < n:
                k = self._recv_into(view[got:], n - got)
                if k == 0:
                    raise ChannelClosed("the other end closed the channel")
                got += k
        if self.start == self.end:
            self.start = self.end = 0
        return head, payload


def recv(sock: socket.socket) -> tuple[dict, bytearray]:
    """The next message of a socket read without a ``Reader`` (nothing read ahead)."""
    prefix = _exactly(sock, PREFIX.size)
    n, hn = PREFIX.unpack(prefix)
    head = decode_head(_exactly(sock, hn)) if hn else {}
    return head, _exactly(sock, n) if n else bytearray()


def _exactly(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ChannelClosed("the other end closed the channel")
        got += k
    return buf
