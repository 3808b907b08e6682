"""Fast check of the quantizer's two paths in Amaranth's own simulator (no Verilator build).

For quick iteration; the cocotb bench on Verilator (tests/test_cocotb.py, tb/quant/) is the
full regression with >= 100,000 lines.
"""
import numpy as np
from amaranth.sim import Simulator

from cxlkv.hdl.quant import QuantUnit
from cxlkv.models import quant as M

TAG_WIDTH = 8


def _stimulus(rng, n):
    """Lines mixing magnitudes, edge lines and non-finite lines; formats cycling."""
    scale = rng.choice([2.0 ** -20, 1e-3, 1.0, 300.0, 20000.0], size=(n, 1))
    x = (rng.standard_normal((n, M.LANES)) * scale).astype(np.float16)
    x[0] = 0
    x[1] = np.float16(-0.0)
    x[2] = np.float16(65504)
    x[3, 5] = np.float16(np.inf)
    x[4, 9] = np.float16(np.nan)
    x[5] = np.float16(6e-8)
    bits = x.view(np.uint16)
    fmts = np.arange(n) % 4
    return bits, fmts


def _run(dut, feed_port, drain_port, items, expected_fn, rng, n_out):
    actual = []

    async def producer(ctx):
        for item in items:
            ctx.set(feed_port.payload, item)
            ctx.set(feed_port.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(feed_port.ready)
                if ready:
                    break
            ctx.set(feed_port.valid, 0)
            if rng.random() < 0.2:
                await ctx.tick()

    async def monitor(ctx):
        async for _, _, ov, orr, op in ctx.tick().sample(drain_port.valid, drain_port.ready, drain_port.payload):
            if ov and orr:
                actual.append(expected_fn(op))
            if len(actual) == n_out:
                return

    async def backpressure(ctx):
        while True:
            ctx.set(drain_port.ready, int(rng.random() < 0.7))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(monitor)
    sim.add_process(backpressure)
    sim.add_testbench(producer)
    sim.run_until(1e-8 * (4 * n_out + 100))
    return actual


def test_quantizer_and_dequantizer_match_model_with_backpressure():
    rng = np.random.default_rng(11)
    n = 48
    bits, fmts = _stimulus(rng, n)
    rec = M.quantize_records(bits, fmts)
    data = M.pack_data(rec.codes, rec.fmt, rec.raw)
    want_rec = [(i % 256, int(rec.fmt[i]), int(rec.raw[i]), int(rec.scale[i]), int(rec.min[i]), data[i])
                for i in range(n)]
    items = [{"tag": i % 256, "fmt": int(fmts[i]), "data": [int(b) for b in bits[i]]} for i in range(n)]

    dut = QuantUnit(tag_width=TAG_WIDTH)
    got_rec = _run(dut, dut.wr_i, dut.wr_o, items,
                   lambda p: (int(p.tag), int(p.fmt), int(p.raw), int(p.scale), int(p.min), int(p.data)),
                   np.random.default_rng(1), n)
    assert got_rec == want_rec

    out, bad = M.dequantize_records(rec)
    want_line = [(i % 256, int(bad[i]), [int(v) for v in out[i]]) for i in range(n)]
    rd_items = [{"tag": r[0], "fmt": r[1], "raw": r[2], "scale": r[3], "min": r[4], "data": r[5]} for r in want_rec]
    dut = QuantUnit(tag_width=TAG_WIDTH)
    got_line = _run(dut, dut.rd_i, dut.rd_o, rd_items,
                    lambda p: (int(p.tag), int(p.bad), [int(p.data[k]) for k in range(M.LANES)]),
                    np.random.default_rng(2), n)
    assert got_line == want_line
