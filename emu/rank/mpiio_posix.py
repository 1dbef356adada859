"""The local file system side of the emulated MPI-IO (``emu.rank.mpiio``): the ranks are processes
of one machine, so a rank's accesses are its own ``os.pread``/``os.pwrite`` at the bytes its view
gives; errors become MPI's error classes; the shared file pointer lives in a small side file every
rank of the file's group opens, read and moved under an ``fcntl`` lock; atomic mode locks the byte
range an access covers."""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import tempfile

from .consts import CONSTANTS
from .errors import Exception

C = CONSTANTS
ERRNO_CLASS = {errno.ENOENT: "ERR_NO_SUCH_FILE", errno.EEXIST: "ERR_FILE_EXISTS", errno.EACCES: "ERR_ACCESS",
               errno.EPERM: "ERR_ACCESS", errno.EROFS: "ERR_READ_ONLY", errno.ENOSPC: "ERR_NO_SPACE",
               errno.EDQUOT: "ERR_QUOTA", errno.ENAMETOOLONG: "ERR_BAD_FILE", errno.ENOTDIR: "ERR_BAD_FILE",
               errno.EISDIR: "ERR_BAD_FILE", errno.EBUSY: "ERR_FILE_IN_USE", errno.ETXTBSY: "ERR_FILE_IN_USE"}


def error_of(e: OSError, call: str, path=None) -> Exception:
    """The MPI error a failed system call is (``ERR_IO`` for what has no class of its own)."""
    name = ERRNO_CLASS.get(e.errno, "ERR_IO")
    where = f" {os.fsdecode(path)!r}" if path is not None else ""
    return Exception(C[name], f"MPI_{name}: {call}{where}: {e.strerror or e}")


def fs_path(filename):
    """The local path of an MPI file name: a str, bytes or path object; ROMIO's ``ufs:``/``nfs:``
    prefixes are taken off (one file system here)."""
    path = os.fspath(filename)
    for prefix in ("ufs:", "nfs:") if isinstance(path, str) else (b"ufs:", b"nfs:"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def open_flags(amode: int, creator: bool) -> int:
    """``os.open`` flags of an access mode; ``MODE_APPEND`` is not ``O_APPEND`` (that would move
    every ``pwrite`` to the end): it only sets the initial file pointers."""
    if amode & C["MODE_RDONLY"]:
        flags = os.O_RDONLY
    elif amode & C["MODE_WRONLY"]:
        flags = os.O_WRONLY
    else:
        flags = os.O_RDWR
    if creator and amode & C["MODE_CREATE"]:
        flags |= os.O_CREAT
        if amode & C["MODE_EXCL"]:
            flags |= os.O_EXCL
    return flags | getattr(os, "O_CLOEXEC", 0)


def check_amode(amode: int) -> None:
    """MPI's rules on access modes (MPI 4.0 §14.2.1), as MPICH checks them."""
    modes = [m for m in ("MODE_RDONLY", "MODE_WRONLY", "MODE_RDWR") if amode & C[m]]
    why = None
    if len(modes) != 1:
        why = "exactly one of MODE_RDONLY, MODE_WRONLY, MODE_RDWR"
    elif modes == ["MODE_RDONLY"] and amode & (C["MODE_CREATE"] | C["MODE_EXCL"]):
        why = "MODE_CREATE or MODE_EXCL with MODE_RDONLY"
    elif modes == ["MODE_RDWR"] and amode & C["MODE_SEQUENTIAL"]:
        why = "MODE_SEQUENTIAL with MODE_RDWR"
    if why:
        raise Exception(C["ERR_AMODE"], f"MPI_ERR_AMODE: invalid amode {amode} in MPI_File_open ({why})")


def write_runs(fd: int, runs, data, atomic: bool) -> None:
    """``data`` to the file's byte ``runs`` in order (under an exclusive lock of their span in
    atomic mode)."""
    mv = memoryview(data)
    with _Lock(fd, runs, fcntl.LOCK_EX if atomic else None):
        at = 0
        for off, n in runs:
            chunk = mv[at:at + n]
            while chunk:
                k = os.pwrite(fd, chunk, off)
                chunk, off = chunk[k:], off + k
            at += n


def read_runs(fd: int, runs, atomic: bool) -> bytes:
    """The bytes of the file's byte ``runs`` in order, up to the end of the file."""
    if not runs:
        return b""
    with _Lock(fd, runs, fcntl.LOCK_SH if atomic else None):
        start = runs[0][0]
        span = runs[-1][0] + runs[-1][1] - start
        total = sum(n for _, n in runs)
        if len(runs) > 1 and span <= 4 * total + 65536:  # one read of the span, the runs cut from it
            got = _pread(fd, span, start)
            parts = []
            for off, n in runs:
                piece = got[off - start:off - start + n]
                parts.append(piece)
                if len(piece) < n:
                    break
            return b"".join(parts)
        parts = []
        for off, n in runs:
            piece = _pread(fd, n, off)
            parts.append(piece)
            if len(piece) < n:
                break
        return b"".join(parts)


def _pread(fd: int, n: int, off: int) -> bytes:
    out = []
    while n > 0:
        b = os.pread(fd, n, off)
        if not b:
            break
        out.append(b)
        n -= len(b)
        off += len(b)
    return b"".join(out)


class _Lock:
    """An ``fcntl`` record lock of the span of ``runs`` (nothing when ``kind`` is None)."""

    def __init__(self, fd: int, runs, kind):
        self.fd, self.kind = fd, kind
        if runs:
            self.start = runs[0][0]
            self.length = runs[-1][0] + runs[-1][1] - self.start

    def __enter__(self):
        if self.kind is not None and self.length > 0:
            fcntl.lockf(self.fd, self.kind, self.length, self.start)
        return self

    def __exit__(self, *exc):
        if self.kind is not None and self.length > 0:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, self.length, self.start)


class SharedPointer:
    """The shared file pointer (etype units): in this process for a file of one rank, else eight
    bytes of a side file (made by the group's first rank, named to the others through the
    communicator) that every access reads and moves under an exclusive ``fcntl`` lock."""

    def __init__(self, path=None):
        self.value, self.fd, self.path = 0, None, path
        if path is not None:
            self.fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))

    @staticmethod
    def make_side_file(of, start: int) -> str:
        """A new side file among the system's temporary files, holding pointer ``start``."""
        base = os.path.basename(os.fsdecode(of)) or "file"
        fd, path = tempfile.mkstemp(prefix=f".emu-mpiio-shfp-{base[:40]}-")
        os.write(fd, struct.pack("<q", start))
        os.close(fd)
        return path

    def fetch_add(self, n: int) -> int:
        """The pointer, moved ``n`` on at once."""
        if self.fd is None:
            old, self.value = self.value, self.value + n
            return old
        fcntl.lockf(self.fd, fcntl.LOCK_EX, 8, 0)
        try:
            old = struct.unpack("<q", os.pread(self.fd, 8, 0))[0]
            if n:
                os.pwrite(self.fd, struct.pack("<q", old + n), 0)
            return old
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 8, 0)

    def get(self) -> int:
        return self.fetch_add(0)

    def set(self, value: int) -> None:
        if self.fd is None:
            self.value = value
            return
        fcntl.lockf(self.fd, fcntl.LOCK_EX, 8, 0)
        try:
            os.pwrite(self.fd, struct.pack("<q", value), 0)
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 8, 0)

    def close(self, unlink: bool) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            if unlink:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
