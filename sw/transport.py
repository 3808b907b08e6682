"""Transports: how the driver reaches the register block.

The driver (cxlkv.sw.driver) is written against :class:`Transport`, an async
32-bit register interface; each transport maps it onto one way of reaching a
device, so the same host code runs against the golden model, a simulation,
a PCIe BAR or an FPGA board (the Glasgow pattern).

* :class:`ModelTransport`: the register-file golden model (cxlkv.models.regs).
* :class:`MmioTransport`: mmap of ``/sys/bus/pci/devices/<bdf>/resourceN`` or
  ``/dev/uioN`` (or any file standing in for one, which is how it is tested).
* ``AxiLiteTransport`` (tb/regs): cocotbext-axi's AXI4-Lite master in a cocotb bench.
* ``sim`` and ``serial``: with the integrated controller and the FPGA board (planned).
"""
from __future__ import annotations

import abc
import mmap
import os
import struct

from cxlkv.errors import CxlkvError


class TransportError(CxlkvError):
    """The device could not be reached, or answered with a bus error."""


class BusError(TransportError):
    """The device answered SLVERR/DECERR: unknown address or a refused write."""

    def __init__(self, op, addr, resp):
        self.op, self.addr, self.resp = op, addr, resp
        super().__init__(f"{op} at {addr:#05x} answered {'SLVERR' if resp == 2 else 'DECERR' if resp == 3 else resp}")


class Transport(abc.ABC):
    name = "abstract"

    @abc.abstractmethod
    async def read32(self, addr: int) -> int:
        """Read one 32-bit word; raise BusError on an error response."""

    @abc.abstractmethod
    async def write32(self, addr: int, value: int) -> None:
        """Write one 32-bit word; raise BusError on an error response."""

    async def close(self) -> None:
        pass


class ModelTransport(Transport):
    """The golden model: a RegisterFile with a format table and the geometry filled in."""
    name = "model"

    def __init__(self, n_layers=4, n_kv_heads=2, entries_log2=10, bitags=16, coldlist_depth=64):
        from cxlkv.models.regs import FormatTable, RegisterFile
        self.regs = RegisterFile()
        self.formats = FormatTable(n_layers * n_kv_heads, self.regs)
        self.regs.external = self.formats
        for field, v in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads)):
            self.regs.set_hw("GEOMETRY", field, v)
        for field, v in (("entries_log2", entries_log2), ("bitags", bitags), ("coldlist_depth", coldlist_depth)):
            self.regs.set_hw("GEOMETRY2", field, v)
        self.regs.set_hw("CAPS", "scoring", 1)

    async def read32(self, addr):
        value, resp = self.regs.read(addr)
        if resp:
            raise BusError("read", addr, resp)
        return value

    async def write32(self, addr, value):
        resp = self.regs.write(addr, value)
        if resp:
            raise BusError("write", addr, resp)


class MmioTransport(Transport):
    """Memory-mapped registers: a PCIe BAR resource file, a UIO device, or a plain file.

    A bus error on real hardware reads as all ones; the driver's identity check
    catches a device that is absent or not ours. Writes are checked by reading
    STATUS.cfg_reject in the driver, not here.
    """
    name = "mmio"

    def __init__(self, path: str, offset: int = 0, size: int = 4096):
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_SYNC)
        except FileNotFoundError:
            raise TransportError(f"{path}: no such device (is the card present, the BAR enabled?)") from None
        except PermissionError:
            raise TransportError(f"{path}: permission denied (root, or a udev rule for the device)") from None
        try:
            self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
        except (OSError, ValueError) as exc:
            os.close(self.fd)
            raise TransportError(f"{path}: cannot map {size} bytes at {offset:#x}: {exc}") from None
        self.size = size

    def _check(self, addr):
        if addr % 4 or not 0 <= addr <= self.size - 4:
            raise TransportError(f"address {addr:#x} outside the {self.size}-byte window or unaligned")

    async def read32(self, addr):
        self._check(addr)
        return struct.unpack_from("<I", self.map, addr)[0]

    async def write32(self, addr, value):
        self._check(addr)
        struct.pack_into("<I", self.map, addr, value & 0xFFFFFFFF)

    async def close(self):
        self.map.close()
        os.close(self.fd)
