"""Transports: how the driver reaches the register block.

The driver (cxlkv.sw.driver) is written against :class:`Transport`, an async
32-bit register interface; each transport maps it onto one way of reaching a
device, so the same host code runs against the golden model, a simulation,
a PCIe BAR or an FPGA board (the Glasgow pattern).

* :class:`ModelTransport`: the register-file golden model (cxlkv.models.regs).
* :class:`MmioTransport`: mmap of ``/sys/bus/pci/devices/<bdf>/resourceN`` or
  ``/dev/uioN`` (or any file standing in for one, which is how it is tested).
* ``AxiLiteTransport`` (tb/common.py, used by tb/regs and tb/controller): cocotbext-axi's AXI4-Lite master in a cocotb bench.
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


#: one access event for :meth:`Transport.events` (the harness's EVENT_RECORD, cxlkv.tb.vharness)
EVENT_DTYPE = [("layer", "<u2"), ("head", "<u2"), ("position", "<u4"), ("step", "<u4"), ("sample", "<u2"),
               ("write", "u1"), ("pad", "u1")]
#: one decision: victim position and flags (bit 0 hit, 1 inserted, 2 victim_valid, 3 no_victim, 4 error)
DECISION_DTYPE = [("victim", "<u4"), ("flags", "u1"), ("pad", "V3")]
FLAG_HIT, FLAG_INSERTED, FLAG_VICTIM, FLAG_NO_VICTIM, FLAG_ERROR = 1, 2, 4, 8, 16
#: events per harness message (the tracker's state carries across messages)
EVENTS_PER_MESSAGE = 1 << 16
#: one HDM item for :meth:`Transport.accesses` (the harness's ACCESS_RECORD): kind 0 a line access
#: (flag = write, addr), 1 a hint (flag = has_sample, step, layer, head, position, sample)
ACCESS_DTYPE = [("kind", "u1"), ("flag", "u1"), ("layer", "<u2"), ("head", "<u2"), ("sample", "<u2"),
                ("position", "<u4"), ("step", "<u4"), ("addr", "<u8")]
#: one route record per access: position, queue, flags (status[1:0], event 4, hinted 8, write 16), line
ROUTE_DTYPE = [("position", "<u4"), ("queue", "<u2"), ("flags", "u1"), ("line", "u1")]
ROUTE_EVENT, ROUTE_HINTED, ROUTE_WRITE = 4, 8, 16
#: lanes of one 64-byte host line (FP16)
LINE_LANES = 32
#: one response per access of :meth:`Transport.lines` (the harness's LINE_RSP_RECORD and its line):
#: tag, flags (RSP_WRITE, the route status in RSP_STATUS_MASK, RSP_RESIDENT, RSP_BAD), the FP16 line
#: (a read's; 0 for writes and errors)
LINE_RSP_DTYPE = [("tag", "<u2"), ("flags", "u1"), ("pad", "u1"), ("data", "<u2", (LINE_LANES,))]
RSP_WRITE, RSP_STATUS_SHIFT, RSP_STATUS_MASK, RSP_RESIDENT, RSP_BAD = 1, 1, 6, 8, 16


def event_records(trace):
    """A trace's events, in file order, as EVENT_DTYPE records (sample = policy.score_to_uq16 of the
    score: min(floor(x * 65536 + 0.5), 65535))."""
    import numpy as np
    rec = np.zeros(len(trace), EVENT_DTYPE)
    rec["layer"], rec["head"], rec["position"] = trace.layer, trace.head, trace.pos
    rec["step"] = trace.step.astype(np.int64)
    rec["sample"] = np.minimum(np.floor(trace.score.astype(np.float64) * 65536.0 + 0.5), 65535).astype(np.int64)
    rec["write"] = trace.op != 0
    return rec


def access_records(items):
    """models.hdm ("hint", Hint) / ("access", Access) items as ACCESS_DTYPE records."""
    import numpy as np
    rec = np.zeros(len(items), ACCESS_DTYPE)
    rows = []
    for kind, x in items:
        if kind == "hint":
            rows.append((1, x.has_sample, x.layer, x.head, x.sample, x.position, x.step, 0))
        else:
            rows.append((0, int(bool(x.write)), 0, 0, 0, 0, 0, x.addr))
    if rows:
        rec[:] = rows
    return rec


def records_to_items(rec):
    from cxlkv.models import hdm as MH
    out = []
    for i, r in enumerate(rec.tolist()):
        kind, flag, layer, head, sample, pos, step, addr = r
        out.append(("hint", MH.Hint(step, flag, layer, head, pos, sample)) if kind else
                   ("access", MH.Access(addr, flag, i & 0xFFFF)))
    return out


class EventPortError(TransportError):
    """The device did not take the events (no tracker, CONTROL.enable = 0, or a record that does not fit)."""


def line_data(records, data):
    """``data`` checked against ``records`` for :meth:`Transport.lines`: an (n, 32) array of FP16 bits
    (uint16), one row per record (rows of hints and reads are ignored); returned as a contiguous
    little-endian uint16 array. Anything else raises EventPortError."""
    import numpy as np
    arr = np.asarray(data)
    if arr.ndim != 2 or arr.shape != (len(records), LINE_LANES):
        raise EventPortError(f"line data must be an array of shape ({len(records)}, {LINE_LANES}) (one FP16 line "
                             f"per record), got shape {arr.shape}")
    if arr.dtype.kind not in "ui" or (arr.size and (int(arr.min()) < 0 or int(arr.max()) > 0xFFFF)):
        raise EventPortError(f"line data must be FP16 bit patterns (uint16), got {arr.dtype}"
                             + ("" if arr.dtype.kind not in "ui" else " with values outside 0 .. 65535"))
    return np.ascontiguousarray(arr, dtype="<u2")


def line_int(row) -> int:
    """One FP16 line (32 uint16 lanes) as the 512-bit integer of the ports: lane i at bits 16 i."""
    import numpy as np
    return int.from_bytes(np.ascontiguousarray(row, dtype="<u2").tobytes(), "little")


def int_line(value: int):
    """Inverse of :func:`line_int`."""
    import numpy as np
    return np.frombuffer(int(value).to_bytes(2 * LINE_LANES, "little"), "<u2")


class Transport(abc.ABC):
    name = "abstract"
    #: the top's elaboration parameters, where the transport knows them (sim, model)
    params: dict | None = None

    @abc.abstractmethod
    async def read32(self, addr: int) -> int:
        """Read one 32-bit word; raise BusError on an error response."""

    @abc.abstractmethod
    async def write32(self, addr: int, value: int) -> None:
        """Write one 32-bit word; raise BusError on an error response."""

    def can(self, stream: str) -> bool:
        """Whether this transport can drive ``stream`` (``events``, ``accesses`` or ``lines``): the
        driver asks before it changes anything on the device."""
        return getattr(type(self), stream) is not getattr(Transport, stream)

    def cannot(self, stream: str) -> TransportError:
        """The error for the ``events`` or ``accesses`` stream this transport cannot drive (``lines``
        has its own message)."""
        what = {"events": "access events", "accesses": "HDM accesses"}[stream]
        # who can: events reach the tracker's event port over sim, model and serial (the board's
        # bridge takes event batches); HDM accesses only over sim and model
        who = "sim, model or serial" if stream == "events" else "sim or model"
        return TransportError(f"the {self.name} transport cannot inject {what}: on hardware they come "
                              f"from CXL.mem traffic (use --transport {who})")

    async def events(self, records):
        """Stream access events (a numpy array of EVENT_DTYPE) into the device's event port;
        returns one DECISION_DTYPE record per event, in order."""
        raise self.cannot("events")

    async def accesses(self, records):
        """Stream HDM items (a numpy array of ACCESS_DTYPE) in order into the device's access and
        hint streams; returns (decisions, routes): one DECISION_DTYPE record per event the decode
        made, one ROUTE_DTYPE record per access. On a build with the host data path this is
        :meth:`lines` with zero lines (every write access takes one), its responses dropped."""
        raise self.cannot("accesses")

    async def lines(self, records, data):
        """The host data path: HDM items (ACCESS_DTYPE) in order, each with a row of ``data`` (an
        (n, 32) uint16 array of FP16 lines aligned with ``records``; a write's line, rows of hints and
        reads ignored); returns (decisions, routes, responses): as :meth:`accesses`, and one
        LINE_RSP_DTYPE record per access (a read's line, the route status, resident, bad)."""
        raise TransportError(f"host line data is not supported over the {self.name} transport: on hardware it "
                             "comes from CXL.mem traffic (use --transport sim or model)")

    async def close(self) -> None:
        pass


def _decision_records(decisions):
    import numpy as np
    dec = np.zeros(len(decisions), DECISION_DTYPE)
    for i, (hit, ins, vv, nv, err, victim) in enumerate(decisions):
        dec[i]["victim"] = victim
        dec[i]["flags"] = hit | ins << 1 | vv << 2 | nv << 3 | err << 4
    return dec


def _route_records(routes):
    import numpy as np
    rt = np.zeros(len(routes), ROUTE_DTYPE)
    for i, r in enumerate(routes):
        rt[i] = (r.position, r.queue, r.status | r.event << 2 | r.hinted << 3 | r.write << 4, r.line)
    return rt


class ModelTransport(Transport):
    """The golden model of the controller top (cxlkv.models.controller); same parameters as SimTransport."""
    name = "model"

    def __init__(self, **params):
        from cxlkv.models.controller import ControllerModel
        self.model = ControllerModel(**params)
        self.regs = self.model.regs
        self.params = dict(params)

    async def events(self, records):
        import numpy as np
        m = self.model
        out = np.zeros(len(records), DECISION_DTYPE)
        if len(records) == 0:
            return out
        pb = m.entries_log2
        lb, hb = (max(1, (n - 1).bit_length()) for n in (m.n_layers, m.n_kv_heads))
        bad = ((records["layer"] >> lb) != 0) | ((records["head"] >> hb) != 0) | \
            ((records["position"] >> pb) != 0) | (records["write"] > 1)
        if bad.any():
            raise EventPortError(f"event record {int(np.flatnonzero(bad)[0])} does not fit the device's event port")
        recs = zip(*(records[k].tolist() for k in ("layer", "head", "position", "write", "sample", "step")))
        decisions = m.events(list(recs))
        if decisions is None:
            raise EventPortError(f"the device's event port stalled after 0 of {len(records)} events "
                                 "(no tracker in this build, CONTROL.enable = 0, or STATUS.ring_error)")
        for i, (hit, ins, vv, nv, err, victim) in enumerate(decisions):
            out[i]["victim"] = victim
            out[i]["flags"] = hit | ins << 1 | vv << 2 | nv << 3 | err << 4
        return out

    def _check_access_records(self, records):
        import numpy as np
        m = self.model
        if m.hdm is None:
            raise EventPortError("this build of the controller has no tracker (no HDM decode)")
        g = m.hdm_geom
        hint = records["kind"] == 1
        bad = (records["kind"] > 1) | (records["flag"] > 1) | (~hint & ((records["addr"] >> g.addr_width) != 0)) | \
            (hint & (((records["layer"] >> g.lb) != 0) | ((records["head"] >> g.hb) != 0) |
                     ((records["position"] >> g.pb) != 0)))
        if bad.any():
            raise EventPortError(f"access record {int(np.flatnonzero(bad)[0])} does not fit the device's HDM ports")

    async def accesses(self, records):
        import numpy as np
        if getattr(self.model, "host_data", False):      # the data path serves every access: writes of zero lines
            dec, routes, _ = await self.lines(records, np.zeros((len(records), LINE_LANES), np.uint16))
            return dec, routes
        self._check_access_records(records)
        res = self.model.accesses(records_to_items(records))
        if res is None:
            raise EventPortError("the device's HDM decode stalled (no tracker in this build, CONTROL.enable = 0, "
                                 "or STATUS.ring_error)")
        routes, decisions = res
        return _decision_records(decisions), _route_records(routes)

    async def lines(self, records, data):
        import numpy as np
        m = self.model
        if m.hdm is None or not getattr(m, "host_data", False):
            raise EventPortError("this build of the controller has no host data path (build it with host_data=True)")
        data = line_data(records, data)
        self._check_access_records(records)
        items = []
        for (kind, x), row in zip(records_to_items(records), data):
            items.append((kind, x) if kind == "hint" else (kind, x, line_int(row) if x.write else None))
        res = m.lines(items)
        if res is None:
            raise EventPortError(f"the device's host data path stalled after 0 of {len(records)} items "
                                 "(CONTROL.enable = 0, or STATUS.ring_error)")
        routes, decisions, responses = res
        rsp = np.zeros(len(responses), LINE_RSP_DTYPE)
        for i, r in enumerate(responses):
            rsp[i]["tag"] = r["tag"]
            rsp[i]["flags"] = r["write"] | r["status"] << RSP_STATUS_SHIFT | r["resident"] << 3 | r["bad"] << 4
            rsp[i]["data"] = int_line(r["data"] or 0)
        return _decision_records(decisions), _route_records(routes), rsp

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
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or offset % 4:
            raise TransportError(f"{path}: offset {offset!r} must be a non-negative multiple of 4")
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_SYNC)
        except FileNotFoundError:
            raise TransportError(f"{path}: no such device (is the card present, the BAR enabled?)") from None
        except PermissionError:
            raise TransportError(f"{path}: permission denied (root, or a udev rule for the device)") from None
        except OSError as exc:
            raise TransportError(f"{path}: cannot be opened for mapping ({exc.strerror})") from None
        # mmap takes page-aligned offsets: map from the page holding the block, address from within it
        self.base = offset % mmap.ALLOCATIONGRANULARITY
        try:
            self.map = mmap.mmap(self.fd, self.base + size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE,
                                 offset=offset - self.base)
        except (OSError, ValueError, OverflowError) as exc:   # OverflowError: an offset beyond C long
            os.close(self.fd)
            raise TransportError(f"{path}: cannot map {size} bytes at {offset:#x} (is the file or BAR that "
                                 f"large?): {exc}") from None
        self.size = size

    def _check(self, addr):
        if addr % 4 or not 0 <= addr <= self.size - 4:
            raise TransportError(f"address {addr:#x} outside the {self.size}-byte window or unaligned")

    async def read32(self, addr):
        self._check(addr)
        return struct.unpack_from("<I", self.map, self.base + addr)[0]

    async def write32(self, addr, value):
        self._check(addr)
        struct.pack_into("<I", self.map, self.base + addr, value & 0xFFFFFFFF)

    async def close(self):
        self.map.close()
        os.close(self.fd)


#: harness executables built in this process, by Controller parameters
_HARNESSES: dict = {}


class SimTransport(Transport):
    """The Verilated controller in a C++ harness (cxlkv.tb.vharness), started and stopped here.

    ``params`` are the Controller's constructor arguments (``host_data=True`` builds the host data
    path, for :meth:`lines`). The first use of a configuration builds it (about half a minute; minutes
    with the host data path); later uses reuse the build. ``top``: another component to run instead
    of ``Controller(**params)`` (named ``top_name``), for the harness's own tests.
    """
    name = "sim"

    def __init__(self, timeout_s: float = 30.0, *, top=None, top_name: str = "controller", **params):
        import socket
        import subprocess
        import tempfile

        key = tuple(sorted(params.items()))
        given = top is not None                  # a stand-in top: built (cached on disk), not remembered here
        if given or key not in _HARNESSES:       # generating the Verilog to find the cached build takes seconds
            from cxlkv.tb.vharness import build_harness, event_ports, hdm_ports, host_ports
            if not given:
                from cxlkv.hdl.controller import Controller
                top = Controller(**params)
            else:
                from amaranth.lib import wiring
                if not isinstance(top, wiring.Component):
                    raise TypeError(f"top must be an Amaranth component, got {top!r}")
            try:
                built = (build_harness(top, top_name), event_ports(top) is not None, hdm_ports(top) is not None,
                         host_ports(top) is not None)
            except RuntimeError as exc:
                raise TransportError(f"cannot build the simulation harness: {exc}") from None
            if not given:
                _HARNESSES[key] = built
        else:
            built = _HARNESSES[key]
        exe, self._has_events, self._has_hdm, self._has_lines = built
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
        self.params = dict(params)
        #: the harness throttles batches: gaps before events, decision backpressure (a test of the top)
        self.throttle = False
        self._bus_throttle = False

    @property
    def bus_throttle(self) -> bool:
        """The harness throttles the register bus: random gaps before AW, W and AR and random
        BREADY/RREADY on every access (a test of the register slave; the driver sees the same
        answers, later). The slave's handshakes are checked in either mode (TransportError)."""
        return self._bus_throttle

    @bus_throttle.setter
    def bus_throttle(self, on: bool) -> None:
        from cxlkv.tb.vharness import OP_BUS_THROTTLE
        status, _ = self._call(OP_BUS_THROTTLE, 0, int(bool(on)))
        if status:                              # a harness built without the op: the bus would run plain
            raise TransportError(f"simulation harness answered status {status:#x} to BUS_THROTTLE")
        self._bus_throttle = bool(on)

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise TransportError("simulation harness closed the connection")
            buf += chunk
        return bytes(buf)

    def _call(self, op: int, a: int = 0, b: int = 0, payload: bytes = b"", answer: int = 0):
        import socket
        try:
            self.sock.sendall(struct.pack("<BII", op, a & 0xFFFFFFFF, b & 0xFFFFFFFF) + payload)
            buf = self._recv(13)
            extra = self._recv(answer) if answer else b""
        except socket.timeout:
            raise TransportError("simulation harness did not answer in time") from None
        status, value, self.cycles = struct.unpack("<BIQ", buf)
        if answer:
            return status, value, extra
        if status == 0xFF:
            raise TransportError(f"the simulated bus did not answer (op {op} at {a:#x})")
        if status == 0xFB:
            from cxlkv.tb.vharness import PROTO_VIOLATIONS
            what = PROTO_VIOLATIONS.get(value, f"violation {value}")
            raise TransportError(f"the simulated register slave broke the AXI4-Lite handshake "
                                 f"({'write' if op == 2 else 'read'} at {a:#x}): {what}")
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

    @staticmethod
    def _batch_status(status, value, lo, total, record, stalled, batch):
        """A batch's harness status as the driver's error: ``record`` (what, into which port) does not fit
        (0xFC); ``stalled`` (0xFD: the part of the device that stopped, what it counts, why it may have);
        anything else."""
        from cxlkv.tb.vharness import STATUS_BAD_RECORD, STATUS_STALLED
        if status == STATUS_BAD_RECORD:
            raise EventPortError(f"{record[0]} {lo + value} does not fit the device's {record[1]}")
        if status == STATUS_STALLED:
            raise EventPortError(f"{stalled[0]} stalled after {lo + value} of {total} {stalled[1]} ({stalled[2]})")
        if status:
            raise TransportError(f"simulation harness answered status {status:#x} to a batch of {batch}")

    async def events(self, records):
        import numpy as np
        from cxlkv.tb.vharness import OP_EVENTS
        records = np.ascontiguousarray(records, dtype=EVENT_DTYPE)
        if not self._has_events:
            raise EventPortError("this build of the controller has no tracker (no event port)")
        parts = []
        for lo in range(0, len(records), EVENTS_PER_MESSAGE):
            chunk = records[lo:lo + EVENTS_PER_MESSAGE]
            n = len(chunk)
            flags = 1 | (2 if self.throttle else 0)
            status, value, answer = self._call(OP_EVENTS, n, flags, chunk.tobytes(), answer=8 * n)
            self._batch_status(status, value, lo, len(records), ("event record", "event port"),
                               ("the device's event port", "events",
                                "no tracker in this build, CONTROL.enable = 0, or STATUS.ring_error"), "events")
            parts.append(np.frombuffer(answer, DECISION_DTYPE))
        return np.concatenate(parts) if parts else np.zeros(0, DECISION_DTYPE)

    async def accesses(self, records):
        import numpy as np
        from cxlkv.tb.vharness import OP_ACCESSES
        records = np.ascontiguousarray(records, dtype=ACCESS_DTYPE)
        if not self._has_hdm:
            raise EventPortError("this build of the controller has no tracker (no HDM decode)")
        if self._has_lines:             # the data path serves every access (a write takes a line): zero lines
            dec, rt, _ = await self.lines(records, np.zeros((len(records), LINE_LANES), np.uint16))
            return dec, rt
        decs, routes = [], []
        for lo in range(0, len(records), EVENTS_PER_MESSAGE):
            chunk = records[lo:lo + EVENTS_PER_MESSAGE]
            n_acc = int((chunk["kind"] == 0).sum())
            flags = 2 if self.throttle else 0
            status, value = self._call_raw(OP_ACCESSES, len(chunk), flags, chunk.tobytes())
            self._batch_status(status, value, lo, len(records), ("access record", "HDM ports"),
                               ("the device's HDM decode", "items",
                                "no tracker in this build, CONTROL.enable = 0, or STATUS.ring_error"), "accesses")
            decs.append(np.frombuffer(self._recv(8 * value), DECISION_DTYPE))
            routes.append(np.frombuffer(self._recv(8 * n_acc), ROUTE_DTYPE))
        if not decs:
            return np.zeros(0, DECISION_DTYPE), np.zeros(0, ROUTE_DTYPE)
        return np.concatenate(decs), np.concatenate(routes)

    async def lines(self, records, data):
        import numpy as np
        from cxlkv.tb.vharness import OP_LINES
        records = np.ascontiguousarray(records, dtype=ACCESS_DTYPE)
        if not self._has_hdm:
            raise EventPortError("this build of the controller has no tracker (no HDM decode)")
        if not self._has_lines:
            raise EventPortError("this build of the controller has no host data path (no host_wdata/host_rsp "
                                 "ports: build it with host_data=True)")
        data = line_data(records, data)
        rsp_dtype = np.dtype(LINE_RSP_DTYPE)           # the harness's LINE_RSP_RECORD + LINE_BYTES
        decs, routes, rsps = [], [], []
        for lo in range(0, len(records), EVENTS_PER_MESSAGE):
            chunk, rows = records[lo:lo + EVENTS_PER_MESSAGE], data[lo:lo + EVENTS_PER_MESSAGE]
            n_acc = int((chunk["kind"] == 0).sum())
            payload = np.concatenate([chunk.view(np.uint8).reshape(len(chunk), -1),
                                      rows.view(np.uint8).reshape(len(chunk), -1)], axis=1)
            flags = 2 if self.throttle else 0
            status, value = self._call_raw(OP_LINES, len(chunk), flags, payload.tobytes())
            self._batch_status(status, value, lo, len(records), ("access record", "HDM ports"),
                               ("the device's host data path", "items", "CONTROL.enable = 0, or STATUS.ring_error"),
                               "lines")
            decs.append(np.frombuffer(self._recv(8 * value), DECISION_DTYPE))
            routes.append(np.frombuffer(self._recv(8 * n_acc), ROUTE_DTYPE))
            rsps.append(np.frombuffer(self._recv(rsp_dtype.itemsize * n_acc), rsp_dtype))
        if not decs:
            return np.zeros(0, DECISION_DTYPE), np.zeros(0, ROUTE_DTYPE), np.zeros(0, LINE_RSP_DTYPE)
        return np.concatenate(decs), np.concatenate(routes), np.concatenate(rsps)

    def _call_raw(self, op, a, b, payload):
        """A request whose answer's length depends on its value: (status, value); the caller reads the rest."""
        import socket
        try:
            self.sock.sendall(struct.pack("<BII", op, a & 0xFFFFFFFF, b & 0xFFFFFFFF) + payload)
            status, value, self.cycles = struct.unpack("<BIQ", self._recv(13))
        except socket.timeout:
            raise TransportError("simulation harness did not answer in time") from None
        return status, value

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
