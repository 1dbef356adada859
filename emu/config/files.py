"""Reading a file someone else wrote: a regular file, of bounded size, parsed without tracebacks.

Every loader of a file a user may have received from someone else (a ``--config`` TOML, a results
file to ``--replay`` or ``emu report``, a trace, a topology file) reads it through :func:`read` and
parses it with :func:`parse_json` / :func:`parse_toml`, so that

* a FIFO, a device (``/dev/zero``), a directory or a socket is refused in one line before anything is
  read (the file is opened non-blocking, so a FIFO without a writer cannot hang the open; a symlink
  is followed and what it points to is checked);
* at most :data:`LIMITS` ``[kind]`` bytes are read, and a longer file is refused naming the limit;
* what parsing can raise (bad syntax, bad UTF-8, nesting deeper than the interpreter's stack, a
  number of more digits than Python converts, nesting deeper than :data:`MAX_DEPTH`) becomes a
  :class:`ConfigError` naming the file and the problem.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from .base import ConfigError

MiB = 1 << 20
LIMITS = {"config": 16 * MiB, "results": 256 * MiB, "trace": 1024 * MiB, "topology": 512 * MiB,
          "mapping": 64 * MiB}
"""Bytes read at most, by kind of file: ``config`` (``--config`` TOML), ``results`` (``emu run --json``
/ ``emu mpirun --json``, read by ``--replay`` and ``emu report``), ``trace`` (``--trace`` JSON),
``topology`` (a ``.json``/``.graphml`` topology file: 512 MiB holds a few million links),
``mapping`` (small lists a run is given, such as a placement or rank map)."""

MAX_DEPTH = 64
"""Deepest nesting of arrays/objects (tables) accepted in a JSON or TOML file; the files this tool
writes nest at most 6 deep."""


def _refuse(what: str, text: str, tail: str = "", reason: str | None = None) -> ConfigError:
    """The one-line refusal ``"{what}: {text}{tail}"``; ``.reason`` keeps the reason alone (``text``
    unless given)."""
    e = ConfigError(f"{what}: {text}{tail}")
    e.reason = reason or text  # type: ignore[attr-defined]
    return e


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, by its ``st_mode``: ``directory``, ``FIFO (named
    pipe)``, ``character device``, ``block device``, ``socket``, else ``special file``."""
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO (named pipe)"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def read(path: str, what: str, kind: str, hint: str = "") -> bytes:
    """The bytes of the regular file ``path``; ``what`` starts each refusal (``"--config x.toml"``),
    ``hint`` ends the one for a missing file."""
    limit = LIMITS[kind]
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ConfigError(f"{what}: no such file" + (f"; {hint}" if hint else "")) from None
    except IsADirectoryError:
        raise ConfigError(f"{what}: is a directory; give a file") from None
    except OSError as e:
        raise ConfigError(f"{what}: cannot be opened ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{what}: is a {kind_of(st.st_mode)}, not a regular file; give a file "
                              "(copy what it holds into one)")
        if st.st_size > limit:
            raise ConfigError(f"{what}: {st.st_size:,} bytes, more than the {limit // MiB} MiB a {kind} file "
                              f"may hold (emu.config.files.LIMITS)")
        chunks, got = [], 0
        while got <= limit:
            try:
                b = os.read(fd, min(1 << 20, limit + 1 - got))
            except BlockingIOError:  # a regular file does not block; a file swapped under us might
                raise ConfigError(f"{what}: reading would block; give a regular file") from None
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if got > limit:  # grew while being read
            raise ConfigError(f"{what}: more than the {limit // MiB} MiB a {kind} file may hold "
                              "(emu.config.files.LIMITS)")
        return b"".join(chunks)
    except OSError as e:
        raise ConfigError(f"{what}: cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def depth(obj: Any) -> int:
    """How deeply lists and dicts nest in ``obj`` (0 for a scalar), without recursion: level by level,
    stopping past :data:`MAX_DEPTH` (linear in the containers, a comprehension per level)."""
    level = [obj] if isinstance(obj, (dict, list)) else []
    d = 0
    while level and d <= MAX_DEPTH:
        d += 1
        nxt = []
        for o in level:
            nxt.extend([x for x in (o.values() if isinstance(o, dict) else o) if isinstance(x, (dict, list))])
        level = nxt
    return d


def bracket_bound(raw: bytes) -> int:
    """An upper bound on how deeply a JSON text nests: the deepest run of its ``[``/``{`` over
    ``]``/``}``, counted on the bytes with numpy in 16 MiB pieces (brackets inside strings count
    too, so it may only overstate)."""
    import numpy as np

    b = np.frombuffer(raw, dtype=np.uint8)
    step = np.zeros(256, dtype=np.int8)
    step[[ord("["), ord("{")]] = 1
    step[[ord("]"), ord("}")]] = -1
    level, deepest = 0, 0
    for i in range(0, len(b), 16 << 20):
        s = step[b[i:i + (16 << 20)]]
        run = np.cumsum(s[s != 0], dtype=np.int64) + level  # the brackets alone
        if len(run):
            deepest = max(deepest, int(run.max()))
            level = int(run[-1])
    return deepest


def _check_depth(what: str, obj: Any, raw: bytes | None = None) -> Any:
    if (raw is None or bracket_bound(raw) > MAX_DEPTH) and depth(obj) > MAX_DEPTH:
        raise _refuse(what, f"nests deeper than {MAX_DEPTH} levels", "; this is not a file this tool writes")
    return obj


def _digits(e: ValueError) -> str:
    """A parser's error, with Python's advice for huge integers (a call a user cannot make) replaced."""
    import sys

    text = str(e)
    if "integer string conversion" in text:
        return f"a number of more than {sys.get_int_max_str_digits()} digits"
    return text


def parse_json(raw: bytes, what: str, expect: str = "") -> Any:
    """The JSON in ``raw``; ConfigError naming ``what`` and the problem (``expect`` ends it)."""
    import json

    tail = f"; {expect}" if expect else ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _refuse(what, f"not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})", tail) from None
    try:
        obj = json.loads(text)
    except RecursionError:
        raise _refuse(what, f"nests deeper than {MAX_DEPTH} levels", tail) from None
    except ValueError as e:  # JSONDecodeError, and a number of more digits than int() converts
        reason = _digits(e)
        raise _refuse(what, f"not JSON ({reason})", tail, reason=reason) from None
    return _check_depth(what, obj, raw)


def parse_toml(raw: bytes, what: str) -> dict[str, Any]:
    """The TOML in ``raw``; ConfigError naming ``what`` and the problem."""
    import tomllib

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                          "TOML files are UTF-8: save it as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise ConfigError(f"{what}: nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # TOMLDecodeError, and an integer of more digits than int() converts
        raise ConfigError(f"{what}: cannot be read as TOML ({_digits(e)})") from None
    return _check_depth(what, data)


def read_json(path: str, what: str, kind: str, hint: str = "", expect: str = "") -> Any:
    """:func:`read` then :func:`parse_json`."""
    return parse_json(read(path, what, kind, hint), what, expect)


def read_toml(path: str, what: str, kind: str = "config") -> dict[str, Any]:
    """:func:`read` then :func:`parse_toml`."""
    return parse_toml(read(path, what, kind), what)
