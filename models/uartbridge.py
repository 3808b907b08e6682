"""Golden model of the UART-to-AXI4-Lite bridge (hdl/uartbridge.py): the byte protocol.

The host talks to the register bus through a UART (8N1) with request and
response frames. This module is the one definition of that protocol: the
bridge's RTL is checked against :class:`BridgeModel` byte for byte
(tb/uartbridge), and the host's serial transport (cxlkv.sw.serial_transport)
builds and parses frames with the ``encode_*``/``decode_*`` functions here.

Request (host to device), ``chk`` making the XOR of every byte of the frame 0::

    0xA5  cmd  addr[7:0]  addr[15:8]  [data[7:0] .. data[31:24]]  chk

``cmd``: 0x00 ping, 0x01 read32, 0x02 write32 (the only one carrying data).
Response (device to host), ``chk`` likewise::

    status  [data[7:0] .. data[31:24]]  chk       status = 0x50 | kind << 2 | code

==== ======== =========================================== ==================
kind name     code                                        data follows
==== ======== =========================================== ==================
0    read     the AXI RRESP (0 OKAY, 2 SLVERR, 3 DECERR)  yes (0 on error)
1    write    the AXI BRESP                               no
2    ping     0                                           yes: ``PING_MAGIC``
3    error    0 checksum, 1 unknown command,              no
              2 frame timeout, 3 bus timeout
==== ======== =========================================== ==================

Framing and resynchronisation: outside a frame every byte other than 0xA5 is
discarded, so line noise or the tail of a frame the device never saw the
start of is dropped. A frame that stops arriving (no byte for the timeout)
is abandoned with an ``error/frame timeout`` response; a frame whose check
byte is wrong is not executed and answers ``error/checksum``; an unknown
command answers ``error/unknown command`` as soon as the command byte
arrives and the parser returns to hunting for 0xA5. A host that starts
mid-stream stays silent for longer than the timeout, discards what it has
received, then pings (docs/uartbridge.md).

An address at or beyond the bus window (``1 << addr_width``) is answered
with DECERR without a bus transaction. A bus that does not complete a
transaction within the bus timeout answers ``error/bus timeout``.

The model is event-driven: :meth:`BridgeModel.byte` for each byte the bridge
receives, :meth:`BridgeModel.timeout` when the line stays idle for the frame
timeout; both return the response bytes the bridge sends as a result.
"""
from __future__ import annotations

SYNC = 0xA5
CMD_PING, CMD_READ, CMD_WRITE = 0x00, 0x01, 0x02
KIND_READ, KIND_WRITE, KIND_PING, KIND_ERROR = 0, 1, 2, 3
ERR_CHECKSUM, ERR_COMMAND, ERR_FRAME_TIMEOUT, ERR_BUS_TIMEOUT = 0, 1, 2, 3
OKAY, SLVERR, DECERR = 0, 2, 3
STATUS_BASE = 0x50
#: Data of a ping response: the bytes 'U', 'B', 'R', 'G' on the wire.
PING_MAGIC = 0x47524255

REQUEST_LEN = {CMD_PING: 5, CMD_READ: 5, CMD_WRITE: 9}
ERROR_NAMES = {ERR_CHECKSUM: "checksum", ERR_COMMAND: "unknown command",
               ERR_FRAME_TIMEOUT: "frame timeout", ERR_BUS_TIMEOUT: "bus timeout"}


def xor(data) -> int:
    out = 0
    for b in data:
        out ^= b
    return out


def _frame(body: bytes) -> bytes:
    return body + bytes([xor(body)])


def encode_ping() -> bytes:
    return _frame(bytes([SYNC, CMD_PING, 0, 0]))


def encode_read(addr: int) -> bytes:
    if not 0 <= addr <= 0xFFFF:
        raise ValueError(f"address {addr:#x} does not fit the protocol's 16 bits")
    return _frame(bytes([SYNC, CMD_READ]) + addr.to_bytes(2, "little"))


def encode_write(addr: int, value: int) -> bytes:
    if not 0 <= addr <= 0xFFFF:
        raise ValueError(f"address {addr:#x} does not fit the protocol's 16 bits")
    return _frame(bytes([SYNC, CMD_WRITE]) + addr.to_bytes(2, "little") + (value & 0xFFFFFFFF).to_bytes(4, "little"))


def status_byte(kind: int, code: int) -> int:
    return STATUS_BASE | kind << 2 | code


def response_length(status: int) -> int | None:
    """Length of the response starting with ``status`` (None: not a status byte)."""
    if status & 0xF0 != STATUS_BASE:
        return None
    kind = (status >> 2) & 3
    return 6 if kind in (KIND_READ, KIND_PING) else 2


def encode_response(kind: int, code: int, data: int | None = None) -> bytes:
    body = bytes([status_byte(kind, code)])
    if kind in (KIND_READ, KIND_PING):
        body += (data or 0).to_bytes(4, "little")
    return _frame(body)


class ProtocolError(ValueError):
    """A response that breaks the framing (bad status byte or check byte)."""


def decode_response(frame: bytes) -> tuple[int, int, int | None]:
    """``(kind, code, data)`` of one complete response frame; ProtocolError if malformed."""
    if not frame:
        raise ProtocolError("empty response")
    n = response_length(frame[0])
    if n is None:
        raise ProtocolError(f"byte {frame[0]:#04x} is not a response status")
    if len(frame) != n:
        raise ProtocolError(f"response of {len(frame)} bytes, expected {n}")
    if xor(frame):
        raise ProtocolError(f"response check byte wrong: {frame.hex()}")
    kind, code = (frame[0] >> 2) & 3, frame[0] & 3
    data = int.from_bytes(frame[1:5], "little") if n == 6 else None
    return kind, code, data


class BridgeModel:
    """The bridge as the host sees it, in front of ``bus``.

    ``bus`` answers ``read32(addr) -> (value, resp)`` and ``write32(addr, value) -> resp``
    (cxlkv.models.controller.ControllerModel does). ``bus=None`` models a bus
    that never answers (every access ends in a bus timeout).
    """

    def __init__(self, bus, addr_width: int = 12):
        self.bus = bus
        self.addr_width = addr_width
        self.frame = bytearray()          # bytes of the frame being received, sync included
        self.errors = 0                   # what the RTL's ``errors`` counter shows (saturating, 16 bit)
        self.transactions = 0             # bus transactions issued

    def _error(self, code: int) -> bytes:
        self.errors = min(self.errors + 1, 0xFFFF)
        self.frame.clear()
        return encode_response(KIND_ERROR, code)

    def byte(self, b: int) -> bytes:
        """The bridge received ``b``; returns what it sends in answer (often nothing)."""
        if not self.frame:
            if b == SYNC:
                self.frame.append(b)
            return b""
        self.frame.append(b)
        if len(self.frame) == 2 and b not in REQUEST_LEN:
            return self._error(ERR_COMMAND)
        if len(self.frame) < REQUEST_LEN[self.frame[1]]:
            return b""
        frame = bytes(self.frame)
        self.frame.clear()
        if xor(frame):
            return self._error(ERR_CHECKSUM)
        return self._execute(frame[1], int.from_bytes(frame[2:4], "little"), int.from_bytes(frame[4:8], "little"))

    def feed(self, data: bytes) -> bytes:
        return b"".join(self.byte(b) for b in data)

    def timeout(self) -> bytes:
        """The line stayed idle for the frame timeout."""
        return self._error(ERR_FRAME_TIMEOUT) if self.frame else b""

    def _execute(self, cmd: int, addr: int, data: int) -> bytes:
        if cmd == CMD_PING:
            return encode_response(KIND_PING, 0, PING_MAGIC)
        kind = KIND_READ if cmd == CMD_READ else KIND_WRITE
        if addr >> self.addr_width:
            return encode_response(kind, DECERR, 0)
        if self.bus is None:
            return self._error(ERR_BUS_TIMEOUT)
        self.transactions += 1
        if cmd == CMD_READ:
            value, resp = self.bus.read32(addr)
            return encode_response(KIND_READ, resp, value if resp == OKAY else 0)
        return encode_response(KIND_WRITE, self.bus.write32(addr, data))
