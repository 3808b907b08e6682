"""UART-to-AXI4-Lite bridge: the host reaches the register bus over a serial line.

The byte protocol (frames, check byte, resynchronisation, timeouts, response
codes) is defined by the golden model cxlkv.models.uartbridge and documented
in docs/uartbridge.md; tb/uartbridge checks this RTL against it byte for byte.

Pieces:

* :class:`UARTRx`, :class:`UARTTx`: 8N1 at ``divisor`` clock cycles per bit.
  The receiver samples mid-bit after a two-flop synchroniser, checks the stop
  bit (a bad one is a framing error, the byte is dropped) and waits for the
  line to go high again after a break.
* :class:`UARTBridge`: receive FIFO, frame parser, AXI4-Lite master, response
  sender. One request at a time; bytes that arrive meanwhile wait in the FIFO
  (``fifo_depth``, 16 bytes by default: one further 9-byte write frame), and a byte that finds it
  full is dropped and counted.
  With ``event_layout``/``decision_layout`` it also has an ``event`` stream
  master and a ``decision`` stream slave: event-batch frames (cmd 0x03) are
  received whole into a record RAM, checked (check byte, every record against
  the event fields), then streamed into ``event`` while ``decision`` is
  drained into a decision RAM; the answer goes out when all decisions are in.
  The bridge never takes more events than it has room for decisions (one
  batch), so no decision is lost however slow the UART is.
* :class:`BridgedController`: the bridge in front of the controller top, as
  the board top and the cocotb bench use it; the bridge's event path is
  connected to the controller's ``event``/``decision`` ports when it has them.
  Registered slices sit on every channel between the two, flushed towards the
  controller when the bridge gives up on a request (``abandon``).
"""
from contextlib import contextmanager

from amaranth import Array, Cat, Const, Module, Mux, Shape, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.hdl._pipeline import StreamSlice, slice_channel
from cxlkv.hdl.regs import ADDR_WIDTH, AXI4LiteSignature
from cxlkv.models import uartbridge as proto


def _refuse(component, message):
    """Raise ValueError for bad parameters without also warning that the component went unused."""
    component._MustUse__silence = True
    raise ValueError(message)


def default_timeout(divisor: int) -> int:
    """Frame timeout: 64 character times (640 bit times) of silence inside a frame."""
    return 640 * divisor


class UARTRx(wiring.Component):
    """8N1 receiver. ``data`` carries each good byte for one cycle (no backpressure)."""

    def __init__(self, divisor: int):
        if divisor < 4:
            _refuse(self, f"UART divisor {divisor} is below 4 clock cycles per bit")
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "data": Out(stream.Signature(8, always_ready=True)),
                          "framing_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        timer = Signal(range(self.divisor))
        bit = Signal(range(8))
        shift = Signal(8)
        m.d.sync += [self.data.valid.eq(0), self.framing_error.eq(0)]
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += timer.eq(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer == 0):
                    with m.If(rx):                       # a glitch, not a start bit
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [timer.eq(self.divisor - 1), bit.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [shift.eq(Cat(shift[1:], rx)), timer.eq(self.divisor - 1), bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(rx):
                        m.d.sync += [self.data.payload.eq(shift), self.data.valid.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += self.framing_error.eq(1)
                        m.next = "BREAK"
            with m.State("BREAK"):                       # wait out a break before hunting again
                with m.If(rx):
                    m.next = "IDLE"
        return m


class UARTTx(wiring.Component):
    """8N1 transmitter; takes a byte when idle."""

    def __init__(self, divisor: int):
        if divisor < 4:
            _refuse(self, f"UART divisor {divisor} is below 4 clock cycles per bit")
        self.divisor = divisor
        super().__init__({"data": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        shift = Signal(10, init=0x3FF)                   # stop, data[7:0], start; shifted out LSB first
        left = Signal(range(11))
        m.d.comb += [self.tx.eq(shift[0]), self.data.ready.eq(left == 0)]
        with m.If(left == 0):
            with m.If(self.data.valid):
                m.d.sync += [shift.eq(Cat(Const(0, 1), self.data.payload, Const(1, 1))),
                             left.eq(10), timer.eq(self.divisor - 1)]
        with m.Elif(timer == 0):
            m.d.sync += [shift.eq(Cat(shift[1:], Const(1, 1))), left.eq(left - 1), timer.eq(self.divisor - 1)]
        with m.Else():
            m.d.sync += timer.eq(timer - 1)
        return m


class UARTBridge(wiring.Component):
    """UART byte protocol (cxlkv.models.uartbridge) to AXI4-Lite master transactions.

    Parameters: ``divisor`` (clock cycles per UART bit, at least 4),
    ``timeout_cycles`` (silence inside a frame that abandons it; default 640
    bit times), ``bus_timeout_cycles`` (cycles a bus handshake or response
    may take), ``fifo_depth`` (receive FIFO), ``addr_width`` (bus window).

    Event path (docs/uartbridge.md, "Event batches"): ``event_layout`` and
    ``decision_layout`` (the controller's event and decision payloads; fields
    ``layer, head, position, write, sample, step`` and ``victim, hit, inserted,
    victim_valid, no_victim, error``), ``event_batch`` (records per frame, the
    RAMs' depth), ``event_timeout_cycles`` (cycles without an event or decision
    handshake that end a batch with "event port stalled"). Without the
    layouts an event batch is received and answered "stalled after 0".

    Ports: ``rx``/``tx`` (the serial line), ``m_axil`` (AXI4-Lite master),
    ``errors`` (16-bit saturating count of protocol errors, framing errors,
    receive overruns and decisions that came outside a batch, one cycle after
    the event), one-cycle strobes for LEDs: ``rx_byte``, ``tx_byte``, ``error``;
    ``abandon``, a one-cycle strobe in the cycle the bridge gives up on a request
    whose beats may still be on their way (a bus timeout; an event batch answered
    "stalled", after which events it handed over may not have reached the
    controller): the answers of ``proto.ABANDONING_STATUS``. A slave wired straight
    to the bridge can ignore it (a beat it did not take goes with ``valid``);
    registered slices in between flush on it (:class:`BridgedController`). With the
    event path ``event`` (out stream) and ``decision`` (in stream).
    """

    def __init__(self, divisor: int, timeout_cycles: int | None = None, bus_timeout_cycles: int = 255,
                 fifo_depth: int = 16, addr_width: int = ADDR_WIDTH, event_layout=None, decision_layout=None,
                 event_batch: int = proto.EVENT_BATCH_MAX, event_timeout_cycles: int = 1 << 20):
        if divisor < 4:
            _refuse(self, f"UART divisor {divisor} is below 4 clock cycles per bit")
        if not 1 <= addr_width <= 16:
            _refuse(self, f"address width {addr_width} outside 1 .. 16 (the protocol carries 16 bits)")
        self.divisor = divisor
        self.timeout_cycles = default_timeout(divisor) if timeout_cycles is None else timeout_cycles
        if self.timeout_cycles < 20 * divisor:
            _refuse(self, f"frame timeout {self.timeout_cycles} cycles is shorter than two characters")
        self.bus_timeout_cycles = bus_timeout_cycles
        self.fifo_depth = fifo_depth
        self.addr_width = addr_width
        if (event_layout is None) != (decision_layout is None):
            _refuse(self, "event_layout and decision_layout go together")
        if not 1 <= event_batch <= 0xFFFF:
            _refuse(self, f"event batch {event_batch} outside 1 .. 65535")
        if event_timeout_cycles < 1:
            _refuse(self, f"event timeout {event_timeout_cycles} cycles")
        self.event_batch = event_batch
        self.event_timeout_cycles = event_timeout_cycles
        self.has_events = event_layout is not None
        ports = {
            "rx": In(1, init=1), "tx": Out(1, init=1),
            "m_axil": Out(AXI4LiteSignature(addr_width)),
            "errors": Out(16), "rx_byte": Out(1), "tx_byte": Out(1), "error": Out(1), "abandon": Out(1),
        }
        if self.has_events:
            for name, width in (("layer", 16), ("head", 16), ("position", 32), ("write", 1)):
                if Shape.cast(event_layout[name].shape).width > width:
                    _refuse(self, f"event field {name} is wider than the record's {width} bits")
            if Shape.cast(decision_layout["victim"].shape).width > 32:
                _refuse(self, "decision victim wider than the record's 32 bits")
            ports["event"] = Out(stream.Signature(event_layout))
            ports["decision"] = In(stream.Signature(decision_layout))
        super().__init__(ports)

    def _allowed_bits(self):
        """Per byte offset of an event record, the bits a fitting record may set (a 128-bit table)."""
        table = [0xFF] * proto.EVENT_RECORD_BYTES
        lay = self.event.payload.shape()
        for name in ("layer", "head", "position", "write"):
            offset, size = proto.EVENT_RECORD_FIELDS[name]
            width = Shape.cast(lay[name].shape).width
            for j in range(size):
                table[offset + j] = (1 << min(max(width - 8 * j, 0), 8)) - 1
        return sum(b << (8 * i) for i, b in enumerate(table))

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = urx = UARTRx(self.divisor)
        m.submodules.uart_tx = utx = UARTTx(self.divisor)
        # The answer's bytes reach the transmitter through a registered slice: the FSM sees the
        # slice's ready (a flip-flop), not the transmitter's idle compare, so neither end's logic
        # is on a path to the other (on the board they sit apart: the transmitter's ready into the
        # FSM's byte count was the board top's critical path at e272cf0, 11.47 ns, 8.4 ns routing)
        m.submodules.tx_slice = tx_slice = StreamSlice(8)
        wiring.connect(m, tx_slice.o, utx.data)
        tx_byte = tx_slice.i
        m.submodules.rx_fifo = fifo = SyncFIFO(width=8, depth=self.fifo_depth)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx),
                     fifo.w_data.eq(urx.data.payload), fifo.w_en.eq(urx.data.valid),
                     self.rx_byte.eq(urx.data.valid), self.tx_byte.eq(utx.data.valid & utx.data.ready)]

        # --- error accounting: protocol errors from the FSM, framing errors, overruns.
        # The strobes are registered first and counted a cycle later, so the count is off the
        # parser's paths (it was the board top's critical path); ``errors`` lags by one cycle.
        proto_error = Signal()
        overrun = Signal()
        stray = Signal()                                 # a decision outside a batch (after a stall)
        m.d.comb += overrun.eq(urx.data.valid & ~fifo.w_rdy)
        strobes = Signal(4)
        m.d.sync += strobes.eq(Cat(proto_error, urx.framing_error, overrun, stray))
        total = Signal(17)
        m.d.comb += [total.eq(self.errors + strobes[0] + strobes[1] + strobes[2] + strobes[3]),
                     self.error.eq(strobes.any())]
        m.d.sync += self.errors.eq(Mux(total[16], 0xFFFF, total[:16]))

        # --- frame parser state
        bus = self.m_axil
        cmd = Signal(8)
        addr = Signal(16)
        wdata = Signal(32)
        index = Signal(range(9))                         # index of the next byte of the frame
        check = Signal(8)                                # XOR of the frame so far
        timer = Signal(range(max(self.timeout_cycles, self.bus_timeout_cycles, self.event_timeout_cycles) + 1))
        # The FSM only clears the timer or counts it up by one (``t_op``, last assignment wins as for
        # a sync statement); its limits are flags registered alongside it, ``hit[limit]`` == (timer ==
        # limit) in every cycle, so no wide compare sits in the FSM's decisions (timing).
        T_CLEAR, T_COUNT = 1, 2                          # (0: the timer holds)
        t_op = Signal(2)
        limits = sorted({self.timeout_cycles - 1, self.bus_timeout_cycles, self.event_timeout_cycles - 1})
        hit = {n: Signal(name=f"timer_is_{n}", init=int(n == 0)) for n in limits}
        with m.Switch(t_op):
            with m.Case(T_CLEAR):
                m.d.sync += timer.eq(0)
                m.d.sync += [flag.eq(int(n == 0)) for n, flag in hit.items()]
            with m.Case(T_COUNT):
                m.d.sync += timer.eq(timer + 1)
                m.d.sync += [flag.eq(timer == (n - 1) % (1 << len(timer))) for n, flag in hit.items()]

        def timer_clear():
            m.d.comb += t_op.eq(T_CLEAR)

        def timer_count():
            m.d.comb += t_op.eq(T_COUNT)
        # The parser reads the FIFO through two byte registers: `held`, then `byte` with the
        # byte's compares (`is_`: SYNC, zero, a known command, the batch-size bounds) registered
        # beside it from `held`. The FIFO's read path, the compares and the FSM's decisions are
        # then three separate cycles: on the board the FIFO sits by the pin and the FSM by the
        # controller, and `byte` → route → the batch-size check → `rdata` was the board top's
        # critical path at 112a51c (11.31 ns). The cost is a cycle per byte of latency, against
        # ~10 bit times (≥ 40 cycles) per byte on the line.
        batch = self.event_batch
        held = Signal(8)
        held_valid = Signal()
        byte = Signal(8)
        byte_valid = Signal()
        consume = Signal()
        advance = Signal()                               # `byte` takes `held` (valid or not)
        is_sync, is_zero, is_known_cmd = Signal(name="is_sync"), Signal(name="is_zero"), Signal(name="is_known_cmd")
        is_lo_over = Signal()                            # above the event batch's low byte
        is_hi_over, is_hi_equal = Signal(name="is_hi_over"), Signal(name="is_hi_equal")  # above / equal to the batch's high byte
        m.d.comb += [advance.eq(~byte_valid | consume), fifo.r_en.eq(~held_valid | advance)]
        with m.If(fifo.r_en):
            m.d.sync += [held.eq(fifo.r_data), held_valid.eq(fifo.r_rdy)]
        with m.If(advance):
            m.d.sync += [
                byte.eq(held), byte_valid.eq(held_valid),
                is_sync.eq(held == proto.SYNC), is_zero.eq(held == 0),
                is_known_cmd.eq((held == proto.CMD_PING) | (held == proto.CMD_READ) | (held == proto.CMD_WRITE)
                                | (held == proto.CMD_EVENTS)),
                is_lo_over.eq(held > (batch & 0xFF)),
                is_hi_over.eq((held != 0) if batch >> 8 == 0 else (held > batch >> 8)),
                is_hi_equal.eq(held == batch >> 8),
            ]
        last = Mux(cmd == proto.CMD_WRITE, 8, 4)         # index of the check byte
        lo_zero = Signal()                               # the frame's byte 2 (count[7:0]) is 0
        lo_over = Signal()                               # ... is above the event batch's low byte
        in_window = addr[self.addr_width:] == 0

        # --- response: status, up to 4 data bytes, then the check byte computed while sending
        status = Signal(8)
        rdata = Signal(32)
        data_len = Signal(range(5))                      # data bytes after the status: 0, 2 or 4
        sent = Signal(range(6))
        tx_check = Signal(8)

        def give_up_if_abandoning(status_value):
            """The answer ``status_value`` gives up on a request that may have beats in flight: strobe."""
            if status_value in proto.ABANDONING_STATUS:
                m.d.comb += self.abandon.eq(1)

        def respond(kind, code, data=None):
            m.d.sync += [status.eq(proto.STATUS_BASE | (kind << 2) | code),
                         data_len.eq(0 if data is None else 4), rdata.eq(0 if data is None else data)]
            m.next = "RESPOND"

        def fail(code):
            m.d.comb += proto_error.eq(1)
            give_up_if_abandoning(proto.status_byte(proto.KIND_ERROR, code))
            respond(proto.KIND_ERROR, code)

        @contextmanager
        def bus_phase(done):
            """A bus handshake or response being awaited: the timer counts; the body runs when
            ``done``, else after ``bus_timeout_cycles`` the request fails with ERR_BUS_TIMEOUT."""
            timer_count()
            with m.If(done):
                yield
            with m.Elif(hit[self.bus_timeout_cycles]):
                fail(proto.ERR_BUS_TIMEOUT)

        def bus_response(ready, valid, kind, resp, data=None):
            """READ_DATA / WRITE_RESPONSE: the response answers the host, its code in the status byte."""
            m.d.comb += ready.eq(1)
            with bus_phase(valid):
                respond(kind, 0, data)
                m.d.sync += status[:2].eq(resp)

        def events_fail(code, value):
            """An event-batch error answer: 0x60 | code, a 16-bit value, check byte."""
            m.d.comb += proto_error.eq(1)
            give_up_if_abandoning(proto.STATUS_EVENTS | code)
            m.d.sync += [status.eq(proto.STATUS_EVENTS | code),
                         data_len.eq(2), rdata.eq(value)]
            m.next = "RESPOND"

        # --- event path: record RAM (one 16-byte record per word, written a byte at a time),
        # decision RAM (victim, flags), counters
        n_events = Signal(16)
        # n_events - 1, registered with it: the "last record" compares have no subtract in front
        # (n_events → a carry chain → the compare → fsm_state was 9.39 ns at 9a6936e)
        n_last = Signal(signed(17))
        rec = Signal(range(batch + 1))                   # record being received / event being issued
        off = Signal(4)                                  # byte of the record being received
        bad_found = Signal()
        bad_index = Signal(16)
        got = Signal(range(batch + 1))                   # decisions received
        out_rec = Signal(range(batch + 1))
        out_byte = Signal(3)
        if self.has_events:
            m.submodules.event_ram = ev_ram = Memory(shape=8 * proto.EVENT_RECORD_BYTES, depth=batch, init=[])
            ev_wr = ev_ram.write_port(granularity=8)
            ev_rd = ev_ram.read_port(transparent_for=())
            m.submodules.decision_ram = dec_ram = Memory(shape=40, depth=batch, init=[])
            dec_wr = dec_ram.write_port()
            dec_rd = dec_ram.read_port(domain="comb")
            table = self._allowed_bits()            # a case per offset (a variable shift lints as a truncation)
            allowed = Array(Const((table >> (8 * i)) & 0xFF, 8) for i in range(proto.EVENT_RECORD_BYTES))[off]
            ev, dec = self.event.payload, self.decision.payload
            victim = Signal(32)                          # the record's u32, zero-extended
            rd = ev_rd.data
            fields = proto.EVENT_RECORD_FIELDS
            # the record RAM's write registered, a cycle after its byte (it is read from EV_FETCH
            # on, after the check byte: a whole UART byte later). The parser's state and offset
            # were four LUT levels in front of the distributed RAM's write enables (fsm_state →
            # the enables, 8.32 ns on the board at 0f14eae)
            ev_we = Signal(proto.EVENT_RECORD_BYTES)
            m.d.sync += [ev_wr.addr.eq(rec), ev_wr.data.eq(byte.replicate(proto.EVENT_RECORD_BYTES)),
                         ev_wr.en.eq(ev_we)]
            m.d.comb += [
                ev_rd.addr.eq(rec), ev_rd.en.eq(0),          # read in EV_FETCH only, held meanwhile
                victim.eq(dec.victim),
                dec_wr.addr.eq(got), dec_wr.data.eq(Cat(victim, dec.hit, dec.inserted, dec.victim_valid,
                                                        dec.no_victim, dec.error)),
                dec_rd.addr.eq(out_rec),
                # every decision is taken: inside a batch it has room in the RAM, outside one it is
                # a stray (after a stall) and is counted as an error
                self.decision.ready.eq(1),
            ]
            for name in ("layer", "head", "position", "step", "sample", "write"):
                o, size = fields[name]
                m.d.comb += getattr(ev, name).eq(rd[8 * o:8 * (o + size)])
            in_batch = Signal()
            dec_take = self.decision.valid & in_batch
            m.d.comb += [stray.eq(self.decision.valid & ~in_batch), dec_wr.en.eq(dec_take)]
            with m.If(dec_take):
                m.d.sync += got.eq(got + 1)
            # The batch's drain and stall checks read registers, a cycle late: the decision's
            # valid and got == n_events in front of the FSM's decisions were 6 LUT levels to
            # `rdata`'s enables and `fsm_state` (8.51 and 8.53 ns in the board build of b6c0a0b).
            # A cycle late costs a batch one cycle, and moves the stall timeout by at most one of
            # its thousands of cycles.
            dec_seen = Signal()                      # a decision was offered last cycle
            all_got = Signal()                       # got == n_events last cycle
            m.d.sync += [dec_seen.eq(self.decision.valid), all_got.eq(got == n_events)]

        m.d.comb += [bus.wstrb.eq(0xF), bus.awaddr.eq(addr), bus.araddr.eq(addr), bus.wdata.eq(wdata)]
        aw_done = Signal()
        w_done = Signal()

        # an answer starts with sent = 0 and tx_check = 0: both are held there in every state but the
        # two that send (each entered only from another state), not set by the decision to answer
        sending = Signal()
        with m.If(~sending):
            m.d.sync += [sent.eq(0), tx_check.eq(0)]

        with m.FSM() as fsm:
            m.d.comb += sending.eq(fsm.ongoing("RESPOND") | (fsm.ongoing("EV_RESPOND") if self.has_events else 0))
            with m.State("HUNT"):
                m.d.comb += consume.eq(1)
                with m.If(byte_valid & is_sync):
                    m.d.sync += [index.eq(1), check.eq(proto.SYNC)]
                    timer_clear()
                    m.next = "RECEIVE"

            with m.State("RECEIVE"):
                m.d.comb += consume.eq(1)
                with m.If(byte_valid):
                    m.d.sync += [index.eq(index + 1), check.eq(check ^ byte)]
                    timer_clear()
                    with m.Switch(index):
                        with m.Case(1):
                            m.d.sync += cmd.eq(byte)
                            with m.If(~is_known_cmd):
                                fail(proto.ERR_COMMAND)
                        with m.Case(2):
                            m.d.sync += [addr[:8].eq(byte), lo_zero.eq(is_zero), lo_over.eq(is_lo_over)]
                        with m.Case(3):
                            m.d.sync += addr[8:].eq(byte)
                            with m.If(cmd == proto.CMD_EVENTS):     # the count is in: size check, then records
                                count = Cat(addr[:8], byte)
                                m.d.sync += [n_events.eq(count), n_last.eq(count - 1), rec.eq(0), off.eq(0), bad_found.eq(0)]
                                # count == 0 or count > batch, from the flags of both bytes (no
                                # 16-bit compare, no compare behind the byte register)
                                bad_count = (is_zero & lo_zero) | is_hi_over | (is_hi_equal & lo_over)
                                with m.If(bad_count):
                                    events_fail(proto.EV_BATCH_SIZE, batch)
                                with m.Else():
                                    m.next = "EV_RECEIVE"
                        for i in range(4):
                            with m.Case(4 + i):
                                with m.If(cmd == proto.CMD_WRITE):
                                    m.d.sync += wdata[8 * i:8 * i + 8].eq(byte)
                    with m.If((index == last) & (index != 1)):
                        with m.If((check ^ byte) != 0):
                            fail(proto.ERR_CHECKSUM)
                        with m.Else():
                            m.next = "EXECUTE"
                with m.Elif(hit[self.timeout_cycles - 1]):
                    fail(proto.ERR_FRAME_TIMEOUT)
                with m.Else():
                    timer_count()

            with m.State("EXECUTE"):
                m.d.sync += [aw_done.eq(0), w_done.eq(0)]
                timer_clear()
                with m.If(cmd == proto.CMD_PING):
                    respond(proto.KIND_PING, 0, proto.PING_MAGIC)
                with m.Elif(~in_window):
                    with m.If(cmd == proto.CMD_READ):
                        respond(proto.KIND_READ, proto.DECERR, 0)
                    with m.Else():
                        respond(proto.KIND_WRITE, proto.DECERR)
                with m.Elif(cmd == proto.CMD_READ):
                    m.next = "READ_ADDRESS"
                with m.Else():
                    m.next = "WRITE"

            with m.State("EV_RECEIVE"):                  # the records, into the record RAM
                m.d.comb += consume.eq(1)
                with m.If(byte_valid):
                    m.d.sync += [check.eq(check ^ byte), off.eq(off + 1)]
                    timer_clear()
                    if self.has_events:
                        m.d.comb += ev_we.eq(Const(1, proto.EVENT_RECORD_BYTES) << off)
                        with m.If(~bad_found & ((byte & ~allowed) != 0)):
                            m.d.sync += [bad_found.eq(1), bad_index.eq(rec)]
                    with m.If(off == proto.EVENT_RECORD_BYTES - 1):
                        m.d.sync += rec.eq(rec + 1)
                        with m.If(rec == n_last):
                            m.next = "EV_CHECK"
                with m.Elif(hit[self.timeout_cycles - 1]):
                    fail(proto.ERR_FRAME_TIMEOUT)
                with m.Else():
                    timer_count()

            with m.State("EV_CHECK"):                    # the check byte: only a whole, intact batch runs
                m.d.comb += consume.eq(1)
                m.d.sync += [rec.eq(0), got.eq(0)]
                timer_clear()
                with m.If(byte_valid):
                    with m.If((check ^ byte) != 0):
                        fail(proto.ERR_CHECKSUM)
                    with m.Elif(bad_found):
                        events_fail(proto.EV_BAD_RECORD, bad_index)
                    with m.Else():
                        if self.has_events:
                            m.next = "EV_FETCH"
                        else:
                            events_fail(proto.EV_STALLED, 0)
                with m.Elif(hit[self.timeout_cycles - 1]):
                    fail(proto.ERR_FRAME_TIMEOUT)
                with m.Else():
                    timer_count()

            if self.has_events:
                def run_timer(progress):
                    """Cycles without an event or decision handshake end the batch: 'stalled after got'."""
                    with m.If(progress | dec_seen):
                        timer_clear()
                    with m.Elif(hit[self.event_timeout_cycles - 1]):
                        events_fail(proto.EV_STALLED, got)
                    with m.Else():
                        timer_count()

                with m.State("EV_FETCH"):                # read record ``rec`` (the RAM answers next cycle)
                    m.d.comb += [in_batch.eq(1), ev_rd.en.eq(1)]
                    m.next = "EV_OFFER"
                    run_timer(0)

                with m.State("EV_OFFER"):
                    m.d.comb += [in_batch.eq(1), self.event.valid.eq(1)]
                    with m.If(self.event.ready):
                        m.d.sync += rec.eq(rec + 1)
                        with m.If(rec == n_last):
                            m.next = "EV_DRAIN"
                        with m.Else():
                            m.next = "EV_FETCH"
                    run_timer(self.event.ready)

                with m.State("EV_DRAIN"):                # every event is in: wait for the last decisions
                    m.d.comb += in_batch.eq(1)
                    m.d.sync += [out_rec.eq(0), out_byte.eq(0)]
                    with m.If(all_got):         # (got == n_events: it only grows here)
                        m.next = "EV_RESPOND"
                    with m.Else():
                        run_timer(0)

                with m.State("EV_RESPOND"):              # 0x60, n, the decision records, check byte
                    word = Array([dec_rd.data[8 * i:8 * i + 8] for i in range(5)] + [Const(0, 8)] * 3)[out_byte]
                    out = Signal(8)
                    with m.Switch(sent):
                        with m.Case(0):
                            m.d.comb += out.eq(proto.STATUS_EVENTS | proto.EV_DONE)
                        with m.Case(1):
                            m.d.comb += out.eq(n_events[:8])
                        with m.Case(2):
                            m.d.comb += out.eq(n_events[8:])
                        with m.Case(3):
                            m.d.comb += out.eq(Mux(out_rec == n_events, tx_check, word))
                    m.d.comb += [tx_byte.valid.eq(1), tx_byte.payload.eq(out)]
                    with m.If(tx_byte.ready):
                        m.d.sync += tx_check.eq(tx_check ^ out)
                        with m.If(sent != 3):
                            m.d.sync += sent.eq(sent + 1)
                        with m.Elif(out_rec == n_events):
                            m.next = "HUNT"
                        with m.Else():
                            m.d.sync += out_byte.eq(out_byte + 1)
                            with m.If(out_byte == 7):
                                m.d.sync += out_rec.eq(out_rec + 1)

            with m.State("READ_ADDRESS"):
                m.d.comb += bus.arvalid.eq(1)
                with bus_phase(bus.arready):
                    timer_clear()
                    m.next = "READ_DATA"

            with m.State("READ_DATA"):
                bus_response(bus.rready, bus.rvalid, proto.KIND_READ, bus.rresp,
                             Mux(bus.rresp == proto.OKAY, bus.rdata, 0))

            with m.State("WRITE"):                       # AW and W offered together, each held until taken
                m.d.comb += [bus.awvalid.eq(~aw_done), bus.wvalid.eq(~w_done)]
                with m.If(bus.awready):
                    m.d.sync += aw_done.eq(1)
                with m.If(bus.wready):
                    m.d.sync += w_done.eq(1)
                with bus_phase((aw_done | bus.awready) & (w_done | bus.wready)):
                    timer_clear()
                    m.next = "WRITE_RESPONSE"

            with m.State("WRITE_RESPONSE"):
                bus_response(bus.bready, bus.bvalid, proto.KIND_WRITE, bus.bresp)

            with m.State("RESPOND"):
                n_body = data_len + 1
                out = Signal(8)
                with m.Switch(sent):
                    with m.Case(0):
                        m.d.comb += out.eq(status)
                    for i in range(4):
                        with m.Case(1 + i):
                            m.d.comb += out.eq(Mux(sent <= data_len, rdata[8 * i:8 * i + 8], tx_check))
                    with m.Default():
                        m.d.comb += out.eq(tx_check)
                m.d.comb += [tx_byte.valid.eq(1), tx_byte.payload.eq(out)]
                with m.If(tx_byte.ready):
                    m.d.sync += [sent.eq(sent + 1), tx_check.eq(tx_check ^ out)]
                    with m.If(sent == n_body):
                        m.next = "HUNT"
        return m


class BridgedController(wiring.Component):
    """The controller top behind a UART bridge: ``rx``/``tx`` in, ``irq`` and the bridge's counters out.

    ``controller`` holds the Controller's parameters; the rest go to :class:`UARTBridge`.
    The two talk through registered slices (:class:`cxlkv.hdl._pipeline.StreamSlice`) on every
    AXI4-Lite channel and on the event and decision streams, so no combinational path crosses
    between them (on the board one did, from the controller's hold logic into the bridge's
    parser: the critical path). Each channel gains a cycle of latency; throughput is unchanged.

    A slice takes a beat before the controller does, so when the bridge gives up on a request
    (its ``abandon`` strobe: a bus timeout, an event batch answered "stalled") the slices
    towards the controller (AW, W, AR, event) are flushed (the slice registers its flush, so the
    give-up logic ends at one flip-flop per slice: the cycle after the strobe the slice shows
    nothing and drops what it holds; on the board the flush acting in its own cycle was the
    critical path): what the controller had not taken is withdrawn, as the bridge dropping
    ``valid`` withdrew it without the slices. (Without the
    flush, events taken by the event slice while the controller was disabled reached it after
    re-enabling, and their decisions were taken as the next batch's.) The slices towards the
    bridge (B, R, decision) are not flushed: when the bridge gives up they hold nothing (it was
    waiting for that very response; it takes a decision every cycle), and a decision that comes
    later reaches it as before, to be counted as a stray. ``abandon`` is also an output, for the
    bench (docs/uartbridge.md, "Interface and parameters").
    """

    #: AXI4-Lite channels: valid, ready, payload, whether they flow from the bridge to the controller
    #: (those are the request channels: flushed on ``abandon``)
    AXIL_CHANNELS = {
        "aw": ("awvalid", "awready", ("awaddr", "awprot"), True),
        "w": ("wvalid", "wready", ("wdata", "wstrb"), True),
        "b": ("bvalid", "bready", ("bresp",), False),
        "ar": ("arvalid", "arready", ("araddr", "arprot"), True),
        "r": ("rvalid", "rready", ("rdata", "rresp"), False),
    }

    def __init__(self, divisor: int, controller: dict | None = None, **bridge):
        self.controller_params = dict(controller or {})
        self.bridge_params = dict(divisor=divisor, **bridge)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "irq": Out(1), "errors": Out(16),
                          "rx_byte": Out(1), "tx_byte": Out(1), "error": Out(1), "abandon": Out(1)})

    def elaborate(self, platform):
        from cxlkv.hdl.controller import Controller
        m = Module()
        m.submodules.controller = ctl = Controller(**self.controller_params)
        members = ctl.signature.members
        params = dict(self.bridge_params)
        if "event" in members:                          # the tracker's event path, over the UART
            params.update(event_layout=members["event"].signature.members["payload"].shape,
                          decision_layout=members["decision"].signature.members["payload"].shape)
        m.submodules.bridge = bridge = UARTBridge(**params)
        for name, (valid, ready, payload, to_controller) in self.AXIL_CHANNELS.items():
            if to_controller:
                slice_channel(m, f"axil_{name}_slice", bridge.m_axil, ctl.s_axil, valid, ready, payload,
                              flush=bridge.abandon)
            else:
                slice_channel(m, f"axil_{name}_slice", ctl.s_axil, bridge.m_axil, valid, ready, payload)
        if bridge.has_events:
            m.submodules.event_slice = event_slice = StreamSlice(params["event_layout"])
            m.submodules.decision_slice = decision_slice = StreamSlice(params["decision_layout"])
            wiring.connect(m, bridge.event, event_slice.i)
            wiring.connect(m, event_slice.o, ctl.event)
            m.d.comb += event_slice.flush.eq(bridge.abandon)
            wiring.connect(m, ctl.decision, decision_slice.i)
            wiring.connect(m, decision_slice.o, bridge.decision)
        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx), self.irq.eq(ctl.irq),
                     self.errors.eq(bridge.errors), self.rx_byte.eq(bridge.rx_byte),
                     self.tx_byte.eq(bridge.tx_byte), self.error.eq(bridge.error),
                     self.abandon.eq(bridge.abandon)]
        return m


def verilog_tops():
    return {"uartbridge": lambda: UARTBridge(divisor=8),
            "uartbridge_controller": lambda: BridgedController(divisor=8)}
