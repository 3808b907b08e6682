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

Event batches (cmd 0x03) carry access events to the controller's ``event`` port and
return its decisions, in the records of the simulation harness's batch event op
(cxlkv.tb.vharness, cxlkv.sw.transport.EVENT_DTYPE / DECISION_DTYPE)::

    0xA5  0x03  n[7:0]  n[15:8]  record[0] .. record[n-1]  chk      (16-byte records)

    record = layer u16, head u16, position u32, step u32, sample u16, write u8, pad u8

``n`` is 1 .. the bridge's ``event_batch`` (32 by default); a count outside that is
answered ``batch size`` at once (with the bridge's limit) and the rest of the frame
is line noise. The whole frame is received and its check byte verified before any
event goes to the controller, so a damaged or truncated batch executes nothing.
Answers (status byte 0x60 | code; the XOR of each frame is 0)::

    0x60  n[2]      decision[0] .. decision[n-1]  chk   all n events executed, decisions in order
    0x61  index[2]  chk      record ``index`` does not fit the event port: nothing executed
    0x62  done[2]   chk      the event port stalled: ``done`` decisions came, then none for the
                             decision timeout (no tracker, CONTROL.enable = 0, a hung design)
    0x63  max[2]    chk      ``n`` is 0 or above the bridge's batch limit ``max``

    decision = victim u32, flags u8 (bit 0 hit, 1 inserted, 2 victim_valid, 3 no_victim,
               4 error), 0, 0, 0

A record fits when layer, head and position fit the controller's event fields and
``write`` is 0 or 1 (the pad byte is ignored). Every 0x61-0x63 answer counts in ``errors``.

The model is event-driven: :meth:`BridgeModel.byte` for each byte the bridge
receives, :meth:`BridgeModel.timeout` when the line stays idle for the frame
timeout; both return the response bytes the bridge sends as a result.
"""
from __future__ import annotations

SYNC = 0xA5
CMD_PING, CMD_READ, CMD_WRITE, CMD_EVENTS = 0x00, 0x01, 0x02, 0x03
KIND_READ, KIND_WRITE, KIND_PING, KIND_ERROR = 0, 1, 2, 3
ERR_CHECKSUM, ERR_COMMAND, ERR_FRAME_TIMEOUT, ERR_BUS_TIMEOUT = 0, 1, 2, 3
OKAY, SLVERR, DECERR = 0, 2, 3
STATUS_BASE = 0x50
#: Data of a ping response: the bytes 'U', 'B', 'R', 'G' on the wire.
PING_MAGIC = 0x47524255

REQUEST_LEN = {CMD_PING: 5, CMD_READ: 5, CMD_WRITE: 9}
#: every command the bridge knows (CMD_EVENTS frames have a variable length: events_request_length)
COMMANDS = (CMD_PING, CMD_READ, CMD_WRITE, CMD_EVENTS)

#: event batches: record sizes (the harness's EVENT_RECORD and DECISION_RECORD) and answers
EVENT_RECORD_BYTES, DECISION_RECORD_BYTES = 16, 8
#: the RTL bridge's default batch limit (``event_batch``)
EVENT_BATCH_MAX = 32
STATUS_EVENTS = 0x60
EV_DONE, EV_BAD_RECORD, EV_STALLED, EV_BATCH_SIZE = 0, 1, 2, 3
EV_NAMES = {EV_DONE: "done", EV_BAD_RECORD: "bad record", EV_STALLED: "event port stalled",
            EV_BATCH_SIZE: "batch size"}
#: byte offset, width in bytes of each event-record field (16 bytes, little-endian)
EVENT_RECORD_FIELDS = {"layer": (0, 2), "head": (2, 2), "position": (4, 4), "step": (8, 4), "sample": (12, 2),
                       "write": (14, 1)}
ERROR_NAMES = {ERR_CHECKSUM: "checksum", ERR_COMMAND: "unknown command",
               ERR_FRAME_TIMEOUT: "frame timeout", ERR_BUS_TIMEOUT: "bus timeout"}
#: status bytes of the answers that give up on a request whose beats may still be out towards the
#: bus or the event port (a bus timeout, a stalled event batch): the RTL bridge pulses ``abandon``
#: as it decides on one of these, and BridgedController then withdraws what its slices hold
ABANDONING_STATUS = (STATUS_BASE | KIND_ERROR << 2 | ERR_BUS_TIMEOUT, STATUS_EVENTS | EV_STALLED)


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


def events_request_length(n: int) -> int:
    return 5 + EVENT_RECORD_BYTES * n


def encode_events(records: bytes) -> bytes:
    """An event-batch frame for ``records``: whole 16-byte records, 1 .. 65535 of them."""
    n, rest = divmod(len(records), EVENT_RECORD_BYTES)
    if rest or not 1 <= n <= 0xFFFF:
        raise ValueError(f"an event batch is 1 .. 65535 records of {EVENT_RECORD_BYTES} bytes, got {len(records)} bytes")
    return _frame(bytes([SYNC, CMD_EVENTS]) + n.to_bytes(2, "little") + bytes(records))


def unpack_event(record: bytes) -> dict:
    return {k: int.from_bytes(record[o:o + w], "little") for k, (o, w) in EVENT_RECORD_FIELDS.items()}


def pack_decision(hit, inserted, victim_valid, no_victim, error, victim) -> bytes:
    flags = hit | inserted << 1 | victim_valid << 2 | no_victim << 3 | error << 4
    return (victim & 0xFFFFFFFF).to_bytes(4, "little") + bytes([flags, 0, 0, 0])


def encode_events_response(code: int, value: int, decisions: bytes = b"") -> bytes:
    """``0x60 | code``, a 16-bit value (n, index, done or max), the decisions (code 0 only), check byte."""
    return _frame(bytes([STATUS_EVENTS | code]) + value.to_bytes(2, "little") + decisions)


def events_response_length(header: bytes) -> int | None:
    """Length of the event-batch answer whose first 3 bytes are ``header`` (None: not one)."""
    if len(header) < 3 or header[0] & 0xFC != STATUS_EVENTS:
        return None
    if header[0] & 3 == EV_DONE:
        return 4 + DECISION_RECORD_BYTES * int.from_bytes(header[1:3], "little")
    return 4


def _check_frame(frame: bytes, n: int | None, what: str, not_start: str, check_detail) -> None:
    """``frame`` is one complete ``what`` of ``n`` bytes with a correct check byte, else a
    ProtocolError: ``not_start`` when its start is not one (``n`` None), the length, or the
    check byte (the message ending in ``check_detail(frame)``)."""
    if n is None:
        raise ProtocolError(not_start)
    if len(frame) != n:
        raise ProtocolError(f"{what} of {len(frame)} bytes, expected {n}")
    if xor(frame):
        raise ProtocolError(f"{what} check byte wrong{check_detail(frame)}")


def decode_events_response(frame: bytes) -> tuple[int, int, bytes]:
    """``(code, value, decision bytes)`` of one complete event-batch answer; ProtocolError if malformed."""
    _check_frame(frame, events_response_length(frame[:3]), "event-batch answer",
                 f"{frame[:3].hex() or 'nothing'} does not start an event-batch answer",
                 lambda f: f" (status {f[0]:#04x})")
    return frame[0] & 3, int.from_bytes(frame[1:3], "little"), bytes(frame[3:-1])


def field_bits(n: int) -> int:
    """Width of a layer or head field for ``n`` of them (as the tracker's Geometry: at least 1)."""
    return max(1, (n - 1).bit_length())


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
    _check_frame(frame, n, "response", f"byte {frame[0]:#04x} is not a response status", lambda f: f": {f.hex()}")
    kind, code = (frame[0] >> 2) & 3, frame[0] & 3
    data = int.from_bytes(frame[1:5], "little") if n == 6 else None
    return kind, code, data


class BridgeModel:
    """The bridge as the host sees it, in front of ``bus``.

    ``bus`` answers ``read32(addr) -> (value, resp)`` and ``write32(addr, value) -> resp``
    (cxlkv.models.controller.ControllerModel does). ``bus=None`` models a bus
    that never answers (every access ends in a bus timeout).
    """

    def __init__(self, bus, addr_width: int = 12, event_batch: int = EVENT_BATCH_MAX):
        self.bus = bus
        self.addr_width = addr_width
        self.event_batch = event_batch
        self.frame = bytearray()          # bytes of the frame being received, sync included
        self.errors = 0                   # what the RTL's ``errors`` counter shows (saturating, 16 bit)
        self.transactions = 0             # bus transactions issued (an executed event batch counts one)
        self.events = 0                   # events sent to the controller
        self.abandons = 0                 # requests given up (the RTL's ``abandon`` pulses)

    def _count_error(self, answer: bytes) -> bytes:
        self.errors = min(self.errors + 1, 0xFFFF)
        self.abandons += int(answer[0] in ABANDONING_STATUS)
        self.frame.clear()
        return answer

    def _error(self, code: int) -> bytes:
        return self._count_error(encode_response(KIND_ERROR, code))

    def byte(self, b: int) -> bytes:
        """The bridge received ``b``; returns what it sends in answer (often nothing)."""
        if not self.frame:
            if b == SYNC:
                self.frame.append(b)
            return b""
        self.frame.append(b)
        if len(self.frame) == 2 and b not in COMMANDS:
            return self._error(ERR_COMMAND)
        if self.frame[1] == CMD_EVENTS:
            return self._events_byte()
        if len(self.frame) < REQUEST_LEN[self.frame[1]]:
            return b""
        frame = bytes(self.frame)
        self.frame.clear()
        if xor(frame):
            return self._error(ERR_CHECKSUM)
        return self._execute(frame[1], int.from_bytes(frame[2:4], "little"), int.from_bytes(frame[4:8], "little"))

    def _events_error(self, code: int, value: int) -> bytes:
        return self._count_error(encode_events_response(code, value))

    def _events_byte(self) -> bytes:
        if len(self.frame) < 4:
            return b""
        n = int.from_bytes(self.frame[2:4], "little")
        if not 1 <= n <= self.event_batch:
            return self._events_error(EV_BATCH_SIZE, self.event_batch)
        if len(self.frame) < events_request_length(n):
            return b""
        frame = bytes(self.frame)
        self.frame.clear()
        if xor(frame):
            return self._error(ERR_CHECKSUM)
        records = [unpack_event(frame[4 + EVENT_RECORD_BYTES * i:4 + EVENT_RECORD_BYTES * (i + 1)])
                   for i in range(n)]
        bus = self.bus
        if bus is None or not getattr(bus, "has_tracker", False):
            return self._events_error(EV_STALLED, 0)          # no event port: nothing ever takes an event
        widths = {"layer": field_bits(bus.n_layers), "head": field_bits(bus.n_kv_heads),
                  "position": bus.entries_log2, "write": 1}
        for i, r in enumerate(records):
            if any(r[k] >> w for k, w in widths.items()):
                return self._events_error(EV_BAD_RECORD, i)
        decisions = bus.events([(r["layer"], r["head"], r["position"], r["write"], r["sample"], r["step"])
                                for r in records])
        if decisions is None:                                 # CONTROL.enable = 0: the port never opens
            return self._events_error(EV_STALLED, 0)
        self.transactions += 1
        self.events += n
        return encode_events_response(EV_DONE, n, b"".join(pack_decision(*d) for d in decisions))

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
