"""A node's memory as the adapter sees it: sparse, byte-addressed by 64-bit virtual addresses."""

from __future__ import annotations

PAGE = 4096
MAX_ADDR = 1 << 64


class Memory:
    """Pages of 4 KiB made on first write; unwritten bytes read as zero."""

    __slots__ = ("pages",)

    def __init__(self) -> None:
        self.pages: dict[int, bytearray] = {}

    @staticmethod
    def check(addr: int, n: int) -> None:
        if not isinstance(addr, int) or not 0 <= addr or addr + n > MAX_ADDR or n < 0:
            raise ValueError(f"address range [{addr:#x}, +{n}) is not within the 64-bit address space")

    def write(self, addr: int, data: bytes) -> None:
        self.check(addr, len(data))
        mv = memoryview(data)
        pos = 0
        while pos < len(mv):
            page, off = divmod(addr + pos, PAGE)
            n = min(PAGE - off, len(mv) - pos)
            buf = self.pages.get(page)
            if buf is None:
                buf = self.pages[page] = bytearray(PAGE)
            buf[off:off + n] = mv[pos:pos + n]
            pos += n

    def read(self, addr: int, n: int) -> bytes:
        self.check(addr, n)
        out = bytearray(n)
        pos = 0
        while pos < n:
            page, off = divmod(addr + pos, PAGE)
            k = min(PAGE - off, n - pos)
            buf = self.pages.get(page)
            if buf is not None:
                out[pos:pos + k] = buf[off:off + k]
            pos += k
        return bytes(out)

    def read_u64(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 8), "little")

    def write_u64(self, addr: int, value: int) -> None:
        self.write(addr, (value & (MAX_ADDR - 1)).to_bytes(8, "little"))
