"""The driver's ``serial`` transport: the FPGA board's UART-to-AXI4-Lite bridge.

Frames are built and parsed by the bridge's golden model
(cxlkv.models.uartbridge), so host and gateware share one definition of the
protocol (docs/uartbridge.md). :class:`BridgeTransport` holds the protocol
logic over abstract byte I/O; :class:`SerialTransport` puts it on a serial
port with pyserial; the cocotb bench (tb/uartbridge) puts it on the RTL's
UART pins, so the same code runs against the simulation and the board.

Errors: an AXI error response raises :class:`~cxlkv.sw.transport.BusError`
(SLVERR/DECERR, as every transport does); a bridge error, a missing answer
or a garbled one raises :class:`~cxlkv.sw.transport.TransportError` naming
what happened. A request the bridge reports as not executed (checksum error,
frame timeout) is resent once after resynchronising; a request whose answer
was lost is not resent (a write may have happened), the link is resynchronised
and the error raised.

Events (:meth:`BridgeTransport.events`, what ``cxlkv ctl --transport serial replay``
uses): the records go to the controller's event port in event-batch frames of at
most ``event_batch`` records (the bridge's limit, 32 by default), one frame at a time,
and the decisions come back in the harness's record format. A record that does not
fit the event port, or a port that stalls, raises
:class:`~cxlkv.sw.transport.EventPortError` with the same message as the ``sim`` and
``model`` transports; the batches before it have executed (the sim transport checks
65,536 records per message, this one ``event_batch``).
"""
from __future__ import annotations

import abc
import time

from cxlkv.models import uartbridge as proto
from cxlkv.sw.argtypes import positive_int
from cxlkv.sw.transport import DECISION_DTYPE, EVENT_DTYPE, BusError, EventPortError, Transport, TransportError

#: Bridge errors after which the request was certainly not executed: a damaged frame, one cut
#: short, or a command byte the bridge does not know (the host sends only known ones, so the byte
#: was damaged on the line).
NOT_EXECUTED = (proto.ERR_CHECKSUM, proto.ERR_FRAME_TIMEOUT, proto.ERR_COMMAND)


class BridgeTransport(Transport):
    """Register access through the bridge protocol over some byte channel."""
    name = "serial"
    #: how many times a request the bridge did not execute is resent
    retries = 1

    @abc.abstractmethod
    async def _write(self, data: bytes) -> None:
        """Send bytes to the bridge."""

    @abc.abstractmethod
    async def _read(self, n: int) -> bytes:
        """Receive exactly ``n`` bytes; raise TransportError when they do not come in time."""

    @abc.abstractmethod
    async def _quiet(self) -> None:
        """Stay silent for longer than the bridge's frame timeout, then drop everything received."""

    async def resync(self) -> None:
        """Bring bridge and host to a frame boundary and check that a bridge answers."""
        await self._quiet()
        _, data = await self._request(proto.encode_ping(), proto.KIND_PING, retry=False)
        if data != proto.PING_MAGIC:
            raise TransportError(f"the bridge's ping answered {data:#010x}, not {proto.PING_MAGIC:#010x}")

    async def _request(self, frame: bytes, kind: int, retry: bool = True):
        for attempt in range(self.retries + 1 if retry else 1):
            await self._write(frame)
            try:
                first = await self._read(1)
                n = proto.response_length(first[0])
                if n is None:
                    raise proto.ProtocolError(f"byte {first[0]:#04x} where a response status was expected")
                got_kind, code, data = proto.decode_response(first + await self._read(n - 1))
            except (TransportError, proto.ProtocolError) as exc:
                await self._quiet()
                raise TransportError(f"{self.name}: no valid answer from the UART bridge ({exc})") from None
            if got_kind == proto.KIND_ERROR:
                # the bridge may still be reading the rest of the refused frame as noise, and a 0xA5
                # in it starts a frame of its own whose error answer would be taken as the next
                # request's: go quiet and drop it, whether the request is resent or not
                await self._quiet()
                if code in NOT_EXECUTED and attempt < (self.retries if retry else 0):
                    continue
                raise TransportError(f"{self.name}: the UART bridge reported {proto.ERROR_NAMES[code]}")
            if got_kind != kind:
                await self._quiet()
                raise TransportError(f"{self.name}: answer of kind {got_kind} to a request of kind {kind}")
            return code, data
        raise AssertionError("unreachable")

    async def read32(self, addr):
        resp, data = await self._request(proto.encode_read(addr), proto.KIND_READ)
        if resp:
            raise BusError("read", addr, resp)
        return data

    async def write32(self, addr, value):
        resp, _ = await self._request(proto.encode_write(addr, value), proto.KIND_WRITE)
        if resp:
            raise BusError("write", addr, resp)

    #: records per event-batch frame (at most the bridge's ``event_batch``)
    event_batch = proto.EVENT_BATCH_MAX

    async def events(self, records):
        import numpy as np
        records = np.ascontiguousarray(records, dtype=EVENT_DTYPE)
        out = np.zeros(len(records), DECISION_DTYPE)
        for lo in range(0, len(records), self.event_batch):
            chunk = records[lo:lo + self.event_batch]
            code, value, body = await self._events_request(proto.encode_events(chunk.tobytes()))
            if code == proto.EV_BAD_RECORD:
                raise EventPortError(f"event record {lo + value} does not fit the device's event port")
            if code == proto.EV_STALLED:
                raise EventPortError(f"the device's event port stalled after {lo + value} of {len(records)} events "
                                     "(no tracker in this build, or CONTROL.enable = 0)")
            if code == proto.EV_BATCH_SIZE:
                raise TransportError(f"{self.name}: the UART bridge takes at most {value} events per batch, "
                                     f"{len(chunk)} were sent (set event_batch = {value})")
            if value != len(chunk):
                await self._quiet()
                raise TransportError(f"{self.name}: {value} decisions answered to a batch of {len(chunk)} events")
            out[lo:lo + len(chunk)] = np.frombuffer(body, DECISION_DTYPE)
        return out

    async def _events_request(self, frame: bytes):
        """Send one event-batch frame; ``(code, value, decision bytes)`` of the answer."""
        for attempt in range(self.retries + 1):
            await self._write(frame)
            try:
                first = await self._read(1)
                if proto.response_length(first[0]) == 2:          # a bridge error: status, check byte
                    kind, code, _ = proto.decode_response(first + await self._read(1))
                    if kind != proto.KIND_ERROR:
                        raise proto.ProtocolError(f"a register answer (kind {kind}) to an event batch")
                else:
                    header = first + await self._read(2)
                    n = proto.events_response_length(header)
                    if n is None:
                        raise proto.ProtocolError(f"byte {first[0]:#04x} where an event-batch answer was expected")
                    return proto.decode_events_response(header + await self._read(n - 3))
            except (TransportError, proto.ProtocolError) as exc:
                await self._quiet()
                raise TransportError(f"{self.name}: no valid answer from the UART bridge ({exc})") from None
            # checksum or frame timeout: the whole frame was refused before any event ran: resend once
            await self._quiet()
            if code in NOT_EXECUTED and attempt < self.retries:
                continue
            hint = " (a bitstream from before event batches? rebuild it)" if code == proto.ERR_COMMAND else ""
            raise TransportError(f"{self.name}: the UART bridge reported {proto.ERROR_NAMES[code]} for an event batch{hint}")
        raise AssertionError("unreachable")


#: baud rates the host side takes: below 300 a resynchronisation's silence lasts tens of seconds
#: (it outlasts the longest answer), above 12 Mbaud no USB UART goes (the FT231X's limit is 3 Mbaud)
BAUD_RANGE = (300, 12_000_000)


def _check_baud(baud) -> None:
    lo, hi = BAUD_RANGE
    if isinstance(baud, bool) or not isinstance(baud, int) or not lo <= baud <= hi:
        raise TransportError(f"baud rate {baud!r}: an integer in {lo} .. {hi} is needed")


#: the longest answer the bridge sends: a full event batch's decisions (10 bit times a byte)
LONGEST_ANSWER_BITS = 10 * (4 + proto.DECISION_RECORD_BYTES * proto.EVENT_BATCH_MAX)


def quiet_seconds(baud: int) -> float:
    """Silence that certainly outlasts the bridge's frame timeout (640 bit times) at ``baud``, and
    the rest of the longest answer it may still be sending after a garbled header (260 bytes)."""
    return (max(2 * 640, LONGEST_ANSWER_BITS) + 640) / baud + 0.01


class SerialTransport(BridgeTransport):
    """The UART bridge on a serial port: ``SerialTransport("/dev/ttyUSB0", 115200)``.

    ``port`` is anything pyserial opens (a device path, a pseudo-terminal,
    ``socket://host:port``, ``rfc2217://...``); ``timeout_s`` bounds the wait
    for each answer. The first access resynchronises and pings the bridge, so a
    port with no bridge behind it fails there with a clear message.
    """
    name = "serial"

    def __init__(self, port: str, baud: int = 115200, timeout_s: float = 1.0):
        try:
            import serial
        except ImportError:
            raise TransportError("the serial transport needs pyserial (pip install pyserial)") from None
        _check_baud(baud)
        self.port, self.baud, self.timeout_s = port, baud, timeout_s
        try:
            self.ser = serial.serial_for_url(port, baudrate=baud, bytesize=8, parity="N", stopbits=1,
                                             timeout=timeout_s, write_timeout=timeout_s)
        except (serial.SerialException, ValueError, OSError) as exc:
            raise TransportError(f"cannot open serial port {port}: {exc}") from None
        self._checked = False

    async def _write(self, data):
        import serial
        try:
            self.ser.write(data)
            self.ser.flush()
        except serial.SerialException as exc:
            raise TransportError(f"{self.port}: write failed: {exc}") from None

    async def _read(self, n):
        import serial
        deadline = time.monotonic() + self.timeout_s
        buf = b""
        try:
            while len(buf) < n:
                if time.monotonic() > deadline:
                    break
                buf += self.ser.read(n - len(buf))
        except serial.SerialException as exc:
            raise TransportError(f"{self.port}: read failed: {exc}") from None
        if len(buf) < n:
            raise TransportError(f"timed out after {self.timeout_s} s waiting for {n} bytes, got {len(buf)}")
        return buf

    async def _quiet(self):
        import serial
        try:
            from termios import error as port_gone          # what pyserial's flush raises on POSIX
        except ImportError:
            port_gone = OSError
        time.sleep(quiet_seconds(self.baud))
        try:
            self.ser.reset_input_buffer()
        except (serial.SerialException, OSError, port_gone) as exc:    # e.g. a USB cable pulled
            raise TransportError(f"{self.port}: the port went away ({exc})") from None

    async def _first_contact(self):
        if not self._checked:
            try:
                await self.resync()
            except TransportError as exc:
                raise TransportError(f"{self.port} at {self.baud} baud: {exc} "
                                     "(is the board programmed, the cable connected, the baud rate right?)") from None
            self._checked = True

    async def read32(self, addr):
        await self._first_contact()
        return await super().read32(addr)

    async def write32(self, addr, value):
        await self._first_contact()
        return await super().write32(addr, value)

    async def events(self, records):
        await self._first_contact()
        return await super().events(records)

    async def close(self):
        self.ser.close()


class BridgeEmulator:
    """The board without the board: a pseudo-terminal served by the bridge and controller golden models
    (register frames and event batches: `cxlkv ctl --transport serial replay` runs against it).

    ``path`` is the terminal to open with :class:`SerialTransport`. Bytes are
    fed to :class:`cxlkv.models.uartbridge.BridgeModel` in front of
    :class:`cxlkv.models.controller.ControllerModel` (``params``); silence
    inside a frame for 640 bit times at ``baud`` is the frame timeout, as on
    the board. ``fault`` (tests) maps a byte index of the host's stream to a
    replacement byte, to corrupt the line on purpose.
    """

    def __init__(self, baud: int = 115200, fault: dict | None = None, **params):
        import os
        import threading
        import tty

        from cxlkv.models.controller import ControllerModel
        _check_baud(baud)
        self.model = proto.BridgeModel(ControllerModel(**params))
        self.timeout_s = 640 / baud
        self.fault = dict(fault or {})
        self.received = 0
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)                       # no echo, no line editing: a byte pipe
        self.path = os.ttyname(self._slave)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="bridge-emulator", daemon=True)
        self._thread.start()

    def _serve(self):
        import os
        import select
        while not self._stop.is_set():
            ready, _, _ = select.select([self._master], [], [], self.timeout_s if self.model.frame else 0.05)
            if not ready:
                if self.model.frame:
                    os.write(self._master, self.model.timeout())
                continue
            try:
                data = os.read(self._master, 256)
            except OSError:                           # the other side closed: wait for a new opener
                time.sleep(0.01)
                continue
            out = bytearray()
            for b in data:
                b = self.fault.pop(self.received, b)
                self.received += 1
                out += self.model.byte(b)
            if out:
                os.write(self._master, bytes(out))

    def close(self):
        import os
        self._stop.set()
        self._thread.join()
        os.close(self._master)
        os.close(self._slave)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main(argv=None):
    """``emulate``: serve the board's models on a pseudo-terminal; ``info``: the driver's info over a port."""
    import argparse
    import json
    import sys

    from cxlkv.errors import CxlkvError
    ap = argparse.ArgumentParser(prog="python -m cxlkv.sw.serial_transport",
                                 description="The serial transport without the CLI: talk to a board's UART "
                                             "bridge, or emulate one on a pseudo-terminal.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("emulate", help="print a pseudo-terminal's path and serve the bridge and controller "
                                       "models on it until interrupted")
    e.add_argument("--baud", type=positive_int, default=115200)
    e.add_argument("--board", help="emulate this board's controller configuration (e.g. ulx3s-85f)")
    i = sub.add_parser("info", help="identity and geometry read through the bridge (as `cxlkv ctl info`)")
    i.add_argument("--device", required=True, help="serial port: /dev/ttyUSB0, a pseudo-terminal, socket://...")
    i.add_argument("--baud", type=positive_int, default=115200)
    args = ap.parse_args(argv)
    if args.cmd == "emulate":
        params = {}
        if args.board:
            from cxlkv.hdl.boards import get_board
            try:
                params = get_board(args.board).controller
            except CxlkvError as exc:
                print(f"cxlkv: error: {exc}", file=sys.stderr)
                return 2
        with BridgeEmulator(baud=args.baud, **params) as emu:
            print(emu.path, flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
        return 0
    from cxlkv.sw.driver import SyncDevice
    try:
        with SyncDevice(SerialTransport(args.device, args.baud)) as dev:
            print(json.dumps(dev.info()))
    except CxlkvError as exc:
        print(f"cxlkv: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
