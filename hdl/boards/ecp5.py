"""ECP5 pieces shared by the board tops: PLL configuration, the board top itself, LED indicators.

:class:`BoardTop` puts :class:`cxlkv.hdl.uartbridge.BridgedController` (the
controller behind the UART bridge: register frames to its AXI4-Lite slave, event
batches to its tracker's ``event``/``decision`` ports) on a board described by a
:class:`cxlkv.hdl.boards.Board`: the core clock comes from an EHXPLLL at
``core_mhz``, reset from the PLL lock and a button, the bridge on the board's
FTDI UART, and eight indicator LEDs (docs/bringup.md lists their meaning).
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth import ClockDomain, ClockSignal, Elaboratable, Instance, Module, ResetSignal, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

#: EHXPLLL limits (Lattice TN1263): phase detector input and VCO ranges, MHz
PFD_MIN, PFD_MAX = 3.125, 400.0
VCO_MIN, VCO_MAX = 400.0, 800.0


@dataclass(frozen=True)
class PLLConfig:
    clki_div: int
    clkfb_div: int
    clkop_div: int
    fin_mhz: float

    @property
    def fout_mhz(self) -> float:
        return self.fin_mhz / self.clki_div * self.clkfb_div

    @property
    def vco_mhz(self) -> float:
        return self.fout_mhz * self.clkop_div


def pll_config(fin_mhz: float, fout_mhz: float, tolerance: float = 0.001) -> PLLConfig:
    """Dividers for CLKOP = ``fout_mhz`` with CLKOP fed back, as ecppll computes them.

    Among the settings within the PFD and VCO limits, the one closest to the
    requested frequency, then the one with the VCO nearest 600 MHz (mid-range).
    A result further than ``tolerance`` (relative) from the request is refused.
    """
    best, best_key = None, None
    for clki_div in range(1, 129):
        pfd = fin_mhz / clki_div
        if pfd < PFD_MIN:
            break
        if pfd > PFD_MAX:
            continue
        for clkfb_div in range(1, 81):
            fout = pfd * clkfb_div
            for clkop_div in range(1, 129):
                vco = fout * clkop_div
                if vco > VCO_MAX:
                    break
                if vco < VCO_MIN:
                    continue
                key = (round(abs(fout - fout_mhz), 9), abs(vco - 600.0))
                if best_key is None or key < best_key:
                    best, best_key = PLLConfig(clki_div, clkfb_div, clkop_div, fin_mhz), key
    if best is None or abs(best.fout_mhz - fout_mhz) > tolerance * fout_mhz:
        raise ValueError(f"no EHXPLLL setting makes {fout_mhz} MHz from {fin_mhz} MHz"
                         + (f" (nearest {best.fout_mhz:g} MHz)" if best else ""))
    return best


class ECP5PLL(Elaboratable):
    """One EHXPLLL, CLKOP fed back, driving ``clk_out``; ``locked`` is its LOCK output."""

    def __init__(self, clk_in, fin_mhz: float, fout_mhz: float):
        self.clk_in = clk_in
        self.config = pll_config(fin_mhz, fout_mhz)
        self.clk_out = Signal()
        self.locked = Signal()

    def elaborate(self, platform):
        m = Module()
        c = self.config
        m.submodules.pll = Instance(
            "EHXPLLL",
            # the attributes ecppll writes: frequencies for the timing tools, charge pump and filter
            a_FREQUENCY_PIN_CLKI=f"{c.fin_mhz:g}", a_FREQUENCY_PIN_CLKOP=f"{c.fout_mhz:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=c.clki_div, p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=c.clkop_div,
            # phase of CLKOP to the input does not matter here; ecppll's choice for 0 degrees at /5
            p_CLKOP_CPHASE=c.clkop_div // 2, p_CLKOP_FPHASE=0,
            p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=c.clkfb_div,
            i_RST=0, i_STDBY=0, i_CLKI=self.clk_in, o_CLKOP=self.clk_out, i_CLKFB=self.clk_out,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=self.locked)
        return m


class Stretch(Elaboratable):
    """Holds ``o`` high for ``cycles`` after each pulse on ``i``: a strobe a person can see.
    ``i`` is registered first (one cycle later, invisible on an LED): the strobe's source sits with
    its block and the stretcher by its pin, and the route between them was a 6.3 ns part of a
    9.2 ns path into the counter's reset."""

    def __init__(self, cycles: int):
        self.cycles = cycles
        self.i = Signal()
        self.o = Signal()

    def elaborate(self, platform):
        m = Module()
        left = Signal(range(self.cycles + 1))
        m.d.comb += self.o.eq(left != 0)
        i_r = Signal()
        m.d.sync += i_r.eq(self.i)
        with m.If(i_r):
            m.d.sync += left.eq(self.cycles)
        with m.Elif(left != 0):
            m.d.sync += left.eq(left - 1)
        return m


def uart_divisor(core_mhz: float, baud: int) -> tuple[int, float]:
    """Clock cycles per UART bit at ``core_mhz`` and the relative baud error; ValueError beyond 2 %."""
    if isinstance(baud, bool) or not isinstance(baud, int) or baud < 1 or not core_mhz > 0:
        raise ValueError(f"a positive baud rate and clock are needed, got {baud!r} baud at {core_mhz!r} MHz")
    divisor = round(core_mhz * 1e6 / baud)
    error = abs(core_mhz * 1e6 / max(divisor, 1) - baud) / baud
    if divisor < 4 or error > 0.02:
        raise ValueError(f"{baud} baud is not reachable at {core_mhz} MHz (divisor {divisor}, {error:.1%} off)")
    return divisor, error


#: LED meanings, index -> name (docs/bringup.md has the expected states)
LEDS = ("heartbeat", "pll_locked", "uart_rx", "uart_tx", "bridge_error", "errors_seen", "irq", "reset")


class BoardTop(Elaboratable):
    """The controller behind the UART bridge on an ECP5 board (``board``: a cxlkv.hdl.boards.Board)."""

    def __init__(self, board, core_mhz: float | None = None, baud: int = 115200, controller: dict | None = None):
        self.board = board
        self.core_mhz = board.core_mhz if core_mhz is None else core_mhz
        self.baud = baud
        self.controller = dict(board.controller if controller is None else controller)
        try:
            self.divisor, self.baud_error = uart_divisor(self.core_mhz, baud)
        except ValueError:
            self._MustUse__silence = True          # refused, not forgotten
            raise

    def elaborate(self, platform):
        from cxlkv.hdl.controller import hold_domain
        from cxlkv.hdl.uartbridge import BridgedController
        m = Module()
        board = self.board
        m.submodules.clk_in = clk_in = io.Buffer("i", platform.request(board.clock, 0, dir="-"))
        m.submodules.pll = pll = ECP5PLL(clk_in.i, board.clock_mhz, self.core_mhz)
        m.domains.sync = cd_sync = ClockDomain("sync")
        # the blocks that CONTROL.enable = 0 holds cleared run on the same clock with that hold as
        # their only reset, so their thousands of reset inputs hang off one flip-flop, not off a
        # LUT that ORs it with this domain's reset (Controller._cleared_by)
        m.domains.hold = hold_domain(cd_sync, "hold")
        # no FREQUENCY constraint is needed: nextpnr derives the PLL output's from CLKI and the dividers
        m.d.comb += ClockSignal("sync").eq(pll.clk_out)

        m.submodules.button = button_buf = io.Buffer("i", platform.request(*board.reset_button, dir="-"))
        button = button_buf.i
        # The synchroniser's flip-flops are reset asynchronously from the PLL lock and the button,
        # so the placer keeps them near those pins, at the part's edge; the sync domain's reset,
        # thousands of LSR pins, comes from one more flip-flop with no asynchronous input, which
        # the placer is free to put among its loads (from the synchroniser itself, 3.7 ns of
        # route to the first LUT, then the fan-out: the most frequent failing path of board builds
        # at 125 MHz, up to 1,624 endpoints in one). It adds a cycle to reset's entry and exit.
        m.domains.reset_sync = ClockDomain("reset_sync", local=True)
        m.d.comb += ClockSignal("reset_sync").eq(pll.clk_out)
        m.submodules.reset_sync = ResetSynchronizer(~pll.locked | button, domain="reset_sync")
        reset_q = Signal(init=1, reset_less=True)
        m.d.reset_sync += reset_q.eq(ResetSignal("reset_sync"))
        m.d.comb += ResetSignal("sync").eq(reset_q)

        m.submodules.core = core = BridgedController(divisor=self.divisor,
                                                          controller={**self.controller, "hold_domain": "hold"})
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = uart_rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = uart_tx = io.Buffer("o", uart.tx)
        m.d.comb += [core.rx.eq(uart_rx.i), uart_tx.o.eq(core.tx)]

        hz = int(pll.config.fout_mhz * 1e6)
        heartbeat = Signal(range(hz))                    # one period a second
        m.d.sync += heartbeat.eq(heartbeat + 1)
        with m.If(heartbeat == hz - 1):
            m.d.sync += heartbeat.eq(0)
        indicators = {}
        for name, strobe, seconds in (("uart_rx", core.rx_byte, 0.05), ("uart_tx", core.tx_byte, 0.05),
                                      ("bridge_error", core.error, 0.25)):
            m.submodules[f"stretch_{name}"] = s = Stretch(int(hz * seconds))
            m.d.comb += s.i.eq(strobe)
            indicators[name] = s.o
        # the reset LED follows the button itself: the sync domain is held in reset meanwhile
        indicators.update(heartbeat=heartbeat < hz // 2, pll_locked=pll.locked, errors_seen=core.errors != 0,
                          irq=core.irq, reset=button)
        for i, (name, port) in enumerate(zip(LEDS, board.leds(platform))):
            m.submodules[f"led{i}"] = led = io.Buffer("o", port)
            m.d.comb += led.o.eq(indicators[name])
        return m
