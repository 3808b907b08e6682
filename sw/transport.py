"""Transports: how the driver reaches the register block.

The driver (cxlkv.sw.driver) is written against :class:`Transport`, an async
32-bit register interface; each transport maps it onto one way of reaching a
device, so the same host code runs against the golden model, a simulation,
a PCIe BAR or an FPGA board (the Glasgow pattern).

* :class:`ModelTransport`: the register-file golden model (cxlkv.models.regs).
* :class:`MmioTransport`: mmap of ``/sys/bus/pci/devices/<bdf>/resourceN`` or
  ``/dev/uioN`` (or any file standing in for one, which is how it is tested).
* ``AxiLiteTransport`` (tb/regs): cocotbext-axi's AXI4-Lite master in a cocotb bench.
* :class:`SimTransport`: the Verilated controller top (hdl/controller.py) in a C++
  harness, started and stopped by the transport.
* ``serial``: :class:`cxlkv.sw.serial_transport.SerialTransport`, the FPGA board's UART bridge.
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
    """The golden model of the controller top (cxlkv.models.controller); same parameters as SimTransport."""
    name = "model"

    def __init__(self, **params):
        from cxlkv.models.controller import ControllerModel
        self.model = ControllerModel(**params)
        self.regs = self.model.regs

    async def read32(self, addr):
        value, resp = self.model.read32(addr)
        if resp:
            raise BusError("read", addr, resp)
        return value

    async def write32(self, addr, value):
        resp = self.model.write32(addr, value)
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


class SimTransport(Transport):
    """The Verilated controller in a C++ harness (cxlkv.tb.vharness), started and stopped here.

    ``params`` are the Controller's constructor arguments. The first use of a
    configuration builds it (about half a minute); later uses reuse the build.
    """
    name = "sim"

    def __init__(self, timeout_s: float = 30.0, **params):
        import socket
        import subprocess
        import tempfile

        from cxlkv.hdl.controller import Controller
        from cxlkv.tb.vharness import build_harness
        try:
            exe = build_harness(Controller(**params), "controller")
        except RuntimeError as exc:
            raise TransportError(f"cannot build the simulation harness: {exc}") from None
        self._dir = tempfile.TemporaryDirectory(prefix="cxlkv-sim-")
        path = f"{self._dir.name}/sock"
        self.proc = subprocess.Popen([str(exe), path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            err = self.proc.stderr.read()
            self.proc.wait()
            self._dir.cleanup()
            raise TransportError(f"simulation harness did not start: {line.strip()} {err.strip()}")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        self.sock.connect(path)
        self.cycles = 0

    def _call(self, op: int, a: int = 0, b: int = 0) -> tuple[int, int]:
        import socket
        try:
            self.sock.sendall(struct.pack("<BII", op, a & 0xFFFFFFFF, b & 0xFFFFFFFF))
            buf = b""
            while len(buf) < 13:
                chunk = self.sock.recv(13 - len(buf))
                if not chunk:
                    raise TransportError("simulation harness closed the connection")
                buf += chunk
        except socket.timeout:
            raise TransportError("simulation harness did not answer in time") from None
        status, value, self.cycles = struct.unpack("<BIQ", buf)
        if status == 0xFF:
            raise TransportError(f"the simulated bus did not answer (op {op} at {a:#x})")
        return status, value

    async def read32(self, addr):
        status, value = self._call(1, addr)
        if status:
            raise BusError("read", addr, status)
        return value

    async def write32(self, addr, value):
        status, _ = self._call(2, addr, value)
        if status:
            raise BusError("write", addr, status)

    def step(self, cycles: int) -> int:
        """Run the clock; returns the cycle count."""
        while cycles > 0:
            n = min(cycles, 0xFFFFFFFF)
            self._call(3, 0, n)
            cycles -= n
        return self.cycles

    async def close(self):
        if self.proc.poll() is None:
            try:
                self._call(5)
            except TransportError:
                pass
            try:
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.sock.close()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()
        self._dir.cleanup()
