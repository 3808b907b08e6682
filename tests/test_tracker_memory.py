"""The controller's tracker memory (cxlkv.hdl.controller.TrackerMemory) in Amaranth's simulator.

A scoreboard under random reads, writes and response backpressure: every read answers, in
order, the word as the writes accepted before it or in its own cycle left it (the same-cycle
write is forwarded). It runs with the memory as one RAM and split into banks (``BANK_DEPTH``
lowered so that the test geometry has several, the last one short), and must catch a memory that
reads the wrong bank.
"""
import random

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from cxlkv.hdl.controller import Controller, TrackerMemory

GEOMETRY = dict(n_layers=3, n_kv_heads=1, entries_log2=6)      # 3 queues x 64 positions: 192 words


def _memory(bank_depth):
    ctl = Controller(**GEOMETRY)
    ctl._MustUse__silence = True                      # only its geometry and port signatures are used
    return type(f"TrackerMemory{bank_depth}", (TrackerMemory,), {"BANK_DEPTH": bank_depth})(
        ctl.geom, ctl._tracker_ports)


class WrongBankReads(wiring.Component):
    """Broken: a TrackerMemory whose reads go to the next bank's word (address + bank depth)."""

    def __init__(self, bank_depth):
        self.inner = _memory(bank_depth)
        self.geom = self.inner.geom
        self.bank_depth = bank_depth
        super().__init__(self.inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        depth = self.geom.n_queues * self.geom.n_positions
        wiring.connect(m, wiring.flipped(self.meta_wr), inner.meta_wr)
        wiring.connect(m, inner.meta_rd_data, wiring.flipped(self.meta_rd_data))
        m.d.comb += [inner.meta_rd.valid.eq(self.meta_rd.valid), self.meta_rd.ready.eq(inner.meta_rd.ready),
                     inner.meta_rd.payload.addr.eq((self.meta_rd.payload.addr + self.bank_depth) % depth),
                     self.busy.eq(inner.busy)]
        return m


def run_random(dut, n_cycles=3000, seed=1, p_read=0.6, p_write=0.5, p_ready=0.7):
    """Returns (answers, expected): the words the memory answered and the scoreboard's, in order."""
    rng = random.Random(seed)
    depth = dut.geom.n_queues * dut.geom.n_positions
    # a few hot words, so reads meet writes to their word in the same and the next cycles
    hot = [rng.randrange(depth) for _ in range(6)]
    model = [0] * depth
    expected, answers = [], []

    def addr():
        return rng.choice(hot) if rng.random() < 0.5 else rng.randrange(depth)

    async def bench(ctx):
        while ctx.get(dut.busy):                       # the reset sweep
            await ctx.tick()
        rd_addr = wr_addr = None
        for _ in range(n_cycles):
            if rd_addr is None and rng.random() < p_read:
                rd_addr = addr()
            if wr_addr is None and rng.random() < p_write:
                wr_addr, wr_data = addr(), rng.getrandbits(64)
            ctx.set(dut.meta_rd.valid, rd_addr is not None)
            ctx.set(dut.meta_rd.payload.addr, rd_addr or 0)
            ctx.set(dut.meta_wr.valid, wr_addr is not None)
            ctx.set(dut.meta_wr.payload, {"addr": wr_addr or 0, "wdata": wr_data if wr_addr is not None else 0})
            ready = rng.random() < p_ready
            ctx.set(dut.meta_rd_data.ready, ready)
            if ready and ctx.get(dut.meta_rd_data.valid):
                answers.append(ctx.get(dut.meta_rd_data.payload))
            wrote = wr_addr is not None and ctx.get(dut.meta_wr.ready)
            if wrote:
                model[wr_addr] = wr_data
            if rd_addr is not None and ctx.get(dut.meta_rd.ready):
                expected.append(model[rd_addr])         # (after this cycle's write: forwarded)
                rd_addr = None
            if wrote:
                wr_addr = None
            await ctx.tick()
        ctx.set(dut.meta_rd.valid, 0)
        ctx.set(dut.meta_wr.valid, 0)
        ctx.set(dut.meta_rd_data.ready, 1)
        for _ in range(8):
            if ctx.get(dut.meta_rd_data.valid):
                answers.append(ctx.get(dut.meta_rd_data.payload))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return answers, expected


@pytest.mark.parametrize("bank_depth", [TrackerMemory.BANK_DEPTH, 64, 128])
def test_reads_see_every_earlier_write(bank_depth):
    """One RAM (the default bank depth is above the test geometry's 192 words), three banks of
    64 words, and two banks of 128 and 64 words."""
    dut = _memory(bank_depth)
    answers, expected = run_random(dut, seed=bank_depth)
    assert len(expected) > 1000
    assert answers == expected


def test_scoreboard_catches_a_wrong_bank():
    answers, expected = run_random(WrongBankReads(64), seed=3)
    assert len(answers) == len(expected)
    assert sum(a != e for a, e in zip(answers, expected)) > len(expected) // 2
