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
  (``fifo_depth``, two write frames by default), and a byte that finds it
  full is dropped and counted.
* :class:`BridgedController`: the bridge in front of the controller top, as
  the board top and the cocotb bench use it.
"""
from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

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

    Ports: ``rx``/``tx`` (the serial line), ``m_axil`` (AXI4-Lite master),
    ``errors`` (16-bit saturating count of protocol errors, framing errors
    and receive overruns, one cycle after the event), and one-cycle strobes
    for LEDs: ``rx_byte``, ``tx_byte``, ``error``.
    """

    def __init__(self, divisor: int, timeout_cycles: int | None = None, bus_timeout_cycles: int = 255,
                 fifo_depth: int = 16, addr_width: int = ADDR_WIDTH):
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
        super().__init__({
            "rx": In(1, init=1), "tx": Out(1, init=1),
            "m_axil": Out(AXI4LiteSignature(addr_width)),
            "errors": Out(16), "rx_byte": Out(1), "tx_byte": Out(1), "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = urx = UARTRx(self.divisor)
        m.submodules.uart_tx = utx = UARTTx(self.divisor)
        m.submodules.rx_fifo = fifo = SyncFIFO(width=8, depth=self.fifo_depth)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx),
                     fifo.w_data.eq(urx.data.payload), fifo.w_en.eq(urx.data.valid),
                     self.rx_byte.eq(urx.data.valid), self.tx_byte.eq(utx.data.valid & utx.data.ready)]

        # --- error accounting: protocol errors from the FSM, framing errors, overruns.
        # The strobes are registered first and counted a cycle later, so the count is off the
        # parser's paths (it was the board top's critical path); ``errors`` lags by one cycle.
        proto_error = Signal()
        overrun = Signal()
        m.d.comb += overrun.eq(urx.data.valid & ~fifo.w_rdy)
        strobes = Signal(3)
        m.d.sync += strobes.eq(Cat(proto_error, urx.framing_error, overrun))
        total = Signal(17)
        m.d.comb += [total.eq(self.errors + strobes[0] + strobes[1] + strobes[2]),
                     self.error.eq(strobes.any())]
        m.d.sync += self.errors.eq(Mux(total[16], 0xFFFF, total[:16]))

        # --- frame parser state
        bus = self.m_axil
        cmd = Signal(8)
        addr = Signal(16)
        wdata = Signal(32)
        index = Signal(range(9))                         # index of the next byte of the frame
        check = Signal(8)                                # XOR of the frame so far
        timer = Signal(range(max(self.timeout_cycles, self.bus_timeout_cycles) + 1))
        # the parser reads the FIFO through a one-byte register: the FIFO's read path and the
        # parser's compare chains do not fit one fast cycle together
        byte = Signal(8)
        byte_valid = Signal()
        consume = Signal()
        m.d.comb += fifo.r_en.eq(~byte_valid | consume)
        with m.If(fifo.r_en & fifo.r_rdy):
            m.d.sync += [byte.eq(fifo.r_data), byte_valid.eq(1)]
        with m.Elif(consume):
            m.d.sync += byte_valid.eq(0)
        last = Mux(cmd == proto.CMD_WRITE, 8, 4)         # index of the check byte
        in_window = addr[self.addr_width:] == 0

        # --- response: status, up to 4 data bytes, then the check byte computed while sending
        status = Signal(8)
        rdata = Signal(32)
        has_data = Signal()
        sent = Signal(range(6))
        tx_check = Signal(8)

        def respond(kind, code, data=None):
            m.d.sync += [status.eq(proto.STATUS_BASE | (kind << 2) | code), sent.eq(0), tx_check.eq(0),
                         has_data.eq(data is not None), rdata.eq(0 if data is None else data)]
            m.next = "RESPOND"

        def fail(code):
            m.d.comb += proto_error.eq(1)
            respond(proto.KIND_ERROR, code)

        m.d.comb += [bus.wstrb.eq(0xF), bus.awaddr.eq(addr), bus.araddr.eq(addr), bus.wdata.eq(wdata)]
        aw_done = Signal()
        w_done = Signal()

        with m.FSM():
            with m.State("HUNT"):
                m.d.comb += consume.eq(1)
                with m.If(byte_valid & (byte == proto.SYNC)):
                    m.d.sync += [index.eq(1), check.eq(proto.SYNC), timer.eq(0)]
                    m.next = "RECEIVE"

            with m.State("RECEIVE"):
                m.d.comb += consume.eq(1)
                with m.If(byte_valid):
                    m.d.sync += [index.eq(index + 1), check.eq(check ^ byte), timer.eq(0)]
                    with m.Switch(index):
                        with m.Case(1):
                            m.d.sync += cmd.eq(byte)
                            with m.If((byte != proto.CMD_PING) & (byte != proto.CMD_READ) & (byte != proto.CMD_WRITE)):
                                fail(proto.ERR_COMMAND)
                        with m.Case(2):
                            m.d.sync += addr[:8].eq(byte)
                        with m.Case(3):
                            m.d.sync += addr[8:].eq(byte)
                        for i in range(4):
                            with m.Case(4 + i):
                                with m.If(cmd == proto.CMD_WRITE):
                                    m.d.sync += wdata[8 * i:8 * i + 8].eq(byte)
                    with m.If((index == last) & (index != 1)):
                        with m.If((check ^ byte) != 0):
                            fail(proto.ERR_CHECKSUM)
                        with m.Else():
                            m.next = "EXECUTE"
                with m.Elif(timer == self.timeout_cycles - 1):
                    fail(proto.ERR_FRAME_TIMEOUT)
                with m.Else():
                    m.d.sync += timer.eq(timer + 1)

            with m.State("EXECUTE"):
                m.d.sync += [timer.eq(0), aw_done.eq(0), w_done.eq(0)]
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

            with m.State("READ_ADDRESS"):
                m.d.comb += bus.arvalid.eq(1)
                m.d.sync += timer.eq(timer + 1)
                with m.If(bus.arready):
                    m.d.sync += timer.eq(0)
                    m.next = "READ_DATA"
                with m.Elif(timer == self.bus_timeout_cycles):
                    fail(proto.ERR_BUS_TIMEOUT)

            with m.State("READ_DATA"):
                m.d.comb += bus.rready.eq(1)
                m.d.sync += timer.eq(timer + 1)
                with m.If(bus.rvalid):
                    respond(proto.KIND_READ, 0, Mux(bus.rresp == proto.OKAY, bus.rdata, 0))
                    m.d.sync += status[:2].eq(bus.rresp)
                with m.Elif(timer == self.bus_timeout_cycles):
                    fail(proto.ERR_BUS_TIMEOUT)

            with m.State("WRITE"):                       # AW and W offered together, each held until taken
                m.d.comb += [bus.awvalid.eq(~aw_done), bus.wvalid.eq(~w_done)]
                m.d.sync += timer.eq(timer + 1)
                with m.If(bus.awready):
                    m.d.sync += aw_done.eq(1)
                with m.If(bus.wready):
                    m.d.sync += w_done.eq(1)
                with m.If((aw_done | bus.awready) & (w_done | bus.wready)):
                    m.d.sync += timer.eq(0)
                    m.next = "WRITE_RESPONSE"
                with m.Elif(timer == self.bus_timeout_cycles):
                    fail(proto.ERR_BUS_TIMEOUT)

            with m.State("WRITE_RESPONSE"):
                m.d.comb += bus.bready.eq(1)
                m.d.sync += timer.eq(timer + 1)
                with m.If(bus.bvalid):
                    respond(proto.KIND_WRITE, 0)
                    m.d.sync += status[:2].eq(bus.bresp)
                with m.Elif(timer == self.bus_timeout_cycles):
                    fail(proto.ERR_BUS_TIMEOUT)

            with m.State("RESPOND"):
                n_body = Mux(has_data, 5, 1)
                out = Signal(8)
                with m.Switch(sent):
                    with m.Case(0):
                        m.d.comb += out.eq(status)
                    for i in range(4):
                        with m.Case(1 + i):
                            m.d.comb += out.eq(Mux(has_data, rdata[8 * i:8 * i + 8], tx_check))
                    with m.Default():
                        m.d.comb += out.eq(tx_check)
                m.d.comb += [utx.data.valid.eq(1), utx.data.payload.eq(out)]
                with m.If(utx.data.ready):
                    m.d.sync += [sent.eq(sent + 1), tx_check.eq(tx_check ^ out)]
                    with m.If(sent == n_body):
                        m.next = "HUNT"
        return m


class BridgedController(wiring.Component):
    """The controller top behind a UART bridge: ``rx``/``tx`` in, ``irq`` and the bridge's counters out.

    ``controller`` holds the Controller's parameters; the rest go to :class:`UARTBridge`.
    """

    def __init__(self, divisor: int, controller: dict | None = None, **bridge):
        self.controller_params = dict(controller or {})
        self.bridge_params = dict(divisor=divisor, **bridge)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "irq": Out(1), "errors": Out(16),
                          "rx_byte": Out(1), "tx_byte": Out(1), "error": Out(1)})

    def elaborate(self, platform):
        from cxlkv.hdl.controller import Controller
        m = Module()
        m.submodules.bridge = bridge = UARTBridge(**self.bridge_params)
        m.submodules.controller = ctl = Controller(**self.controller_params)
        wiring.connect(m, bridge.m_axil, ctl.s_axil)
        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx), self.irq.eq(ctl.irq),
                     self.errors.eq(bridge.errors), self.rx_byte.eq(bridge.rx_byte),
                     self.tx_byte.eq(bridge.tx_byte), self.error.eq(bridge.error)]
        return m


def verilog_tops():
    return {"uartbridge": lambda: UARTBridge(divisor=8),
            "uartbridge_controller": lambda: BridgedController(divisor=8)}
