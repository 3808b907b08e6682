"""Timing wrappers: one block alone on a board, registers all around, to measure its own fmax.

A block's ports would otherwise go to pins, and pad delays would dominate the
figure. Here every input comes from a free-running shift register with
feedback (so no input is constant and nothing is optimised away) and every
output is folded by XOR (a registered tree) into one register that drives an LED. The core clock
comes from the board's PLL at ``core_mhz``; tb/fpga/bench.py builds these with
nextpnr and reports the achieved fmax (docs/fpga.md).
"""
from __future__ import annotations

from amaranth import Cat, ClockDomain, ClockSignal, Elaboratable, Module, Signal, Value
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer

from cxlkv.hdl.boards.ecp5 import ECP5PLL


def _flat_ports(component):
    """(inputs, outputs) of a component as flat Amaranth values, by signature direction."""
    ins, outs = [], []
    for path, member, value in component.signature.flatten(component):
        (ins if member.flow == wiring.In else outs).append(Value.cast(value))
    return ins, outs


class RegisteredWrapper(Elaboratable):
    """``block`` with pseudo-random registered inputs and its outputs XOR-folded into ``out``."""

    def __init__(self, block):
        self.block = block
        self.out = Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.block = block = self.block
        ins, outs = _flat_ports(block)
        width = sum(len(v) for v in ins)
        state = Signal(width + 1, init=0x9E3779B97F4A7C15 & ((1 << (width + 1)) - 1) or 1)
        # shift by one with two taps of feedback: every bit toggles, cheaply
        m.d.sync += state.eq(Cat(state[-1] ^ state[-3] ^ state[0], state[:-1]))
        offset = 0
        for value in ins:
            m.d.comb += value.eq(state[offset:offset + len(value)])
            offset += len(value)
        # XOR-fold the outputs in a tree of registered 16-input steps (two LUT levels each), so
        # that the fold of hundreds of bits is not itself the critical path
        level = list(Cat(*outs))
        while len(level) > 1:
            nxt = []
            for i in range(0, len(level), 16):
                r = Signal()
                m.d.sync += r.eq(Cat(*level[i:i + 16]).xor())
                nxt.append(r)
            level = nxt
        folded = Signal()
        m.d.sync += folded.eq(level[0])
        m.d.comb += self.out.eq(folded)
        return m


class TimingTop(Elaboratable):
    """A :class:`RegisteredWrapper` around ``make_block()`` on ``board`` at ``core_mhz`` (LED 0 shows the fold)."""

    def __init__(self, board, make_block, core_mhz: float = 125.0):
        self.board, self.make_block, self.core_mhz = board, make_block, core_mhz

    def elaborate(self, platform):
        m = Module()
        m.submodules.clk_in = clk_in = io.Buffer("i", platform.request(self.board.clock, 0, dir="-"))
        m.submodules.pll = pll = ECP5PLL(clk_in.i, self.board.clock_mhz, self.core_mhz)
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(pll.clk_out)
        m.submodules.reset_sync = ResetSynchronizer(~pll.locked, domain="sync")
        m.submodules.wrapper = wrapper = RegisteredWrapper(self.make_block())
        m.submodules.led = led = io.Buffer("o", self.board.leds(platform)[0])
        m.d.comb += led.o.eq(wrapper.out)
        return m
