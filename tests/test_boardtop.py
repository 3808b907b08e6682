"""The ECP5 board top (``hdl/boards/ecp5.py``, ``BoardTop``) as the ULX3S builds it, in Amaranth's
simulator: the LED states of docs/bringup.md ("Expected LED states"), the reset path and the UART.

Only the two pieces that have no simulation model are replaced: the EHXPLLL (its output is the
input clock, its LOCK a testbench signal) and the pins (``SimulationPort``s from a stand-in for the
platform's ``request``). Everything else, the reset synchroniser, the heartbeat, the stretchers,
the UART bridge and the board's controller configuration, is the gateware the bitstream holds. The
clock is scaled down so that a second is ``HZ`` cycles (the heartbeat's period) and the UART runs
at ``DIVISOR`` cycles per bit.
"""
import types

import pytest
from amaranth import Elaboratable, Module, Signal
from amaranth.lib.io import SimulationPort
from amaranth.sim import Simulator

from cxlkv.hdl.boards import ecp5, get_board
from cxlkv.models import regmap
from cxlkv.models import uartbridge as proto

HZ = 400                       # cycles per simulated second: the core clock at 0.0004 MHz
DIVISOR = 5                    # cycles per UART bit
BAUD = HZ // DIVISOR


def _documented_leds():
    """LED name -> index, from the table of docs/bringup.md ("| D<i> | <name> | ..."): the order
    the bring-up guide promises, read independently of ``ecp5.LEDS``."""
    import re

    from cxlkv import repo_root
    text = (repo_root() / "docs" / "bringup.md").read_text()
    rows = re.findall(r"^\| D(\d) \| (\w+) \|", text, flags=re.M)
    assert [int(i) for i, _ in rows] == list(range(8)), rows
    return {name: int(i) for i, name in rows}


LED = _documented_leds()
R = regmap.BY_NAME


class _Platform:
    """``request`` as the board top calls it, answering with simulation ports."""

    def __init__(self, board):
        self.inputs = {board.clock, board.reset_button[0]}
        self.ports = {}

    def request(self, name, number=0, *, dir="-"):
        assert dir == "-", "the board top takes raw ports and buffers them itself"
        if name == "uart":
            port = types.SimpleNamespace(rx=SimulationPort("i", 1), tx=SimulationPort("o", 1))
        else:
            port = SimulationPort("i" if name in self.inputs else "o", 1)
        self.ports[(name, number)] = port
        return port


class _PLL(Elaboratable):
    """The EHXPLLL's stand-in: CLKOP is CLKI; LOCK is driven by the test (``made[-1].locked``)."""
    made = []

    def __init__(self, clk_in, fin_mhz, fout_mhz):
        self.clk_in, self.clk_out, self.locked = clk_in, Signal(), Signal()
        self.config = types.SimpleNamespace(fin_mhz=fin_mhz, fout_mhz=fout_mhz)
        _PLL.made.append(self)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.clk_out.eq(self.clk_in)
        return m


@pytest.fixture(scope="module")
def board_sim():
    """The ULX3S top, elaborated once against the stand-ins; the test drives it."""
    board = get_board("ulx3s-85f")
    mp = pytest.MonkeyPatch()
    mp.setattr(ecp5, "ECP5PLL", _PLL)
    try:
        top = ecp5.BoardTop(board, core_mhz=HZ / 1e6, baud=BAUD)
        assert top.divisor == DIVISOR
        platform = _Platform(board)
        from amaranth.hdl import Fragment
        fragment = Fragment.get(top, platform)
    finally:
        mp.undo()
    pll = _PLL.made[-1]
    assert (pll.config.fin_mhz, pll.config.fout_mhz) == (board.clock_mhz, HZ / 1e6)   # what the PLL was asked for
    return board, platform, fragment, pll


def test_board_top_leds_reset_and_uart(board_sim):
    board, platform, fragment, pll = board_sim
    ports = platform.ports
    clk = ports[(board.clock, 0)]
    button = ports[board.reset_button]
    uart = ports[("uart", 0)]
    leds = [ports[("led", i)] for i in range(8)]
    sim = Simulator(fragment)
    half = 0.5e-6
    trace = []                      # per clock: the eight LEDs
    rx_bytes = []                   # bytes the board sent on tx, decoded

    async def clock(ctx):
        while True:
            ctx.set(clk.i, 1)
            await ctx.delay(half)
            ctx.set(clk.i, 0)
            await ctx.delay(half)

    async def tick(ctx, n=1):
        for _ in range(n):
            await ctx.posedge(clk.i)
            trace.append(tuple(ctx.get(p.o) for p in leds))

    async def uart_monitor(ctx):
        """Decodes tx (8N1): the start bit's middle, then each bit's."""
        while True:
            await ctx.negedge(uart.tx.o)
            await ctx.delay(2 * half * DIVISOR / 2)
            if ctx.get(uart.tx.o):
                continue                                  # a glitch, not a start bit
            byte = 0
            for bit in range(8):
                await ctx.delay(2 * half * DIVISOR)
                byte |= ctx.get(uart.tx.o) << bit
            await ctx.delay(2 * half * DIVISOR)
            assert ctx.get(uart.tx.o) == 1, "stop bit low on tx"
            rx_bytes.append(byte)

    async def send(ctx, data: bytes):
        for byte in data:
            for bit in [0] + [(byte >> k) & 1 for k in range(8)] + [1]:
                ctx.set(uart.rx.i, bit)
                await tick(ctx, DIVISOR)

    async def answer(ctx, n, limit=4000):
        start = len(rx_bytes)
        for _ in range(limit):
            if len(rx_bytes) >= start + n:
                return bytes(rx_bytes[start:start + n])
            await tick(ctx)
        raise AssertionError(f"the board answered {len(rx_bytes) - start} of {n} bytes")

    async def read(ctx, name):
        await send(ctx, proto.encode_read(R[name].offset))
        kind, resp, data = proto.decode_response(await answer(ctx, 6))
        assert (kind, resp) == (proto.KIND_READ, proto.OKAY), (name, kind, resp)
        return data

    async def write(ctx, name, value, ok=True):
        await send(ctx, proto.encode_write(R[name].offset, value))
        kind, resp, _ = proto.decode_response(await answer(ctx, 2))
        assert (kind, resp) == (proto.KIND_WRITE, proto.OKAY if ok else proto.SLVERR), (name, value, kind, resp)

    def lit(cycles, name):
        return [t[LED[name]] for t in trace[-cycles:]]

    def runs(name, start, end=None):
        """(first cycle, length) of each stretch of LED ``name`` on within trace[start:end]."""
        out, on = [], None
        for i, t in enumerate(trace[start:end], start):
            if t[LED[name]] and on is None:
                on = i
            elif not t[LED[name]] and on is not None:
                out.append((on, i - on))
                on = None
        return out + ([(on, len(trace) - on)] if on is not None else [])

    async def testbench(ctx):
        ctx.set(uart.rx.i, 1)
        # PLL not locked: the design is held in reset; D1 off, nothing blinks (the heartbeat's
        # counter stays at 0: D0 steady on)
        await tick(ctx, HZ)
        assert set(lit(HZ, "pll_locked")) == {0} and set(lit(HZ, "heartbeat")) == {1}
        assert set(lit(HZ, "reset")) == {0}
        ctx.set(pll.locked, 1)
        await tick(ctx, 2 * HZ + 10)
        # locked: D1 on; D0 blinks at 1 Hz, on half a second, off half a second
        assert set(lit(2 * HZ, "pll_locked")) == {1}
        d0 = lit(2 * HZ, "heartbeat")
        edges = [i for i in range(1, len(d0)) if d0[i] != d0[i - 1]]
        assert len(edges) in (3, 4) and all(b - a == HZ // 2 for a, b in zip(edges, edges[1:])), edges
        assert set(lit(2 * HZ, "uart_rx")) == set(lit(2 * HZ, "uart_tx")) == {0}
        # a ping: D2 lights for 50 ms per byte received, D3 per byte sent
        t0 = len(trace)
        await send(ctx, proto.encode_ping())
        t1 = len(trace)
        ping = await answer(ctx, 6)
        assert proto.decode_response(ping) == (proto.KIND_PING, 0, proto.PING_MAGIC)
        await tick(ctx, HZ // 10)
        rx_on, tx_on = runs("uart_rx", t0), runs("uart_tx", t0)
        assert [n for _, n in rx_on] == [HZ // 20] * 5 and all(i < t1 + 2 for i, _ in rx_on), rx_on
        assert [n for _, n in tx_on] == [HZ // 20] * 6 and all(i > t1 - DIVISOR for i, _ in tx_on), tx_on
        # the board's controller answers over the bridge: the register block's identity
        assert await read(ctx, "ID") == R["ID"].fields[0].reset
        assert set(lit(HZ // 10, "bridge_error") + lit(HZ // 10, "errors_seen") + lit(HZ // 10, "irq")) == {0}
        # a corrupt check byte: D4 flashes for 250 ms, D5 stays on
        frame = bytearray(proto.encode_read(R["ID"].offset))
        frame[-1] ^= 0xFF
        t0 = len(trace)
        await send(ctx, bytes(frame))
        err = await answer(ctx, 2)
        assert proto.decode_response(err)[:2] == (proto.KIND_ERROR, proto.ERR_CHECKSUM)
        await tick(ctx, HZ // 4 + HZ // 20)
        assert [n for _, n in runs("bridge_error", t0)] == [HZ // 4], runs("bridge_error", t0)
        assert set(lit(HZ // 4, "errors_seen")) == {1}
        # the controller's interrupt: a refused register write sets IRQ_STATUS.cfg_reject; D6 on
        # once IRQ_ENABLE lets it through, off when it is cleared
        await write(ctx, "COLDLIST_THRESHOLD", 0, ok=False)                # below range_min: refused
        assert lit(1, "irq") == [0]
        await write(ctx, "IRQ_ENABLE", 1)
        await tick(ctx, 4)
        assert lit(1, "irq") == [1]
        await write(ctx, "IRQ_STATUS", 1)
        await tick(ctx, 4)
        assert lit(1, "irq") == [0]
        # the button: D7 on while held, the design in reset (no heartbeat, the bridge's error count
        # cleared: D5 off after it)
        ctx.set(button.i, 1)
        await tick(ctx, HZ)
        assert set(lit(HZ - 4, "reset")) == {1} and set(lit(HZ - 4, "heartbeat")) == {1}
        ctx.set(button.i, 0)
        await tick(ctx, HZ)
        assert set(lit(HZ - 8, "reset")) == {0} and set(lit(HZ - 8, "errors_seen")) == {0}
        assert 0 in lit(HZ, "heartbeat")
        assert await read(ctx, "ID") == R["ID"].fields[0].reset                 # out of reset, answering

    sim.add_process(clock)
    sim.add_testbench(uart_monitor, background=True)
    sim.add_testbench(testbench)
    sim.run()
