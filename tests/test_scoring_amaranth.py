"""Fast check of the scoring pipeline in Amaranth's own simulator (no Verilator build).

For quick iteration; the cocotb bench on Verilator (tests/test_cocotb.py) is the
full regression.
"""
import random

from amaranth.sim import Simulator

from cxlkv.hdl.scoring import ScoringPipeline
from cxlkv.models import scoring as M


def _events(rng, n):
    for i in range(n):
        last = rng.getrandbits(32)
        age = rng.choice((0, 1, rng.randrange(5000), rng.getrandbits(32)))
        yield {"id": i, "ema": rng.getrandbits(16), "sample": rng.getrandbits(16),
               "update": rng.getrandbits(1), "last_step": last, "cur_step": (last + age) & 0xFFFFFFFF}


def test_pipeline_matches_model_with_backpressure():
    dut = ScoringPipeline(id_width=16)
    rng = random.Random(7)
    events = list(_events(rng, 600))
    configs = [(0x1000, 1000), (0, 0), (0xFFFF, M.TAU_MAX + 5)]
    expected, actual = [], []

    async def producer(ctx):
        for k, ev in enumerate(events):
            alpha, tau = configs[k * len(configs) // len(events)]
            ctx.set(dut.alpha, alpha)
            ctx.set(dut.tau, tau)
            ctx.set(dut.i.payload, ev)
            ctx.set(dut.i.valid, 1)
            while True:                        # hold the event until a clock edge takes it
                _, _, ready = await ctx.tick().sample(dut.i.ready)
                if ready:
                    break
            ctx.set(dut.i.valid, 0)
            if rng.random() < 0.2:
                await ctx.tick()

    async def monitor(ctx):
        async for clk_edge, rst, iv, ir, ip, ov, orr, op, alpha, tau in ctx.tick().sample(
                dut.i.valid, dut.i.ready, dut.i.payload, dut.o.valid, dut.o.ready, dut.o.payload,
                dut.alpha, dut.tau):
            if iv and ir:
                ev = M.ScoringInput(**{f: int(getattr(ip, f)) for f in
                                       ("id", "ema", "sample", "update", "last_step", "cur_step")})
                expected.append(M.score_event(ev, alpha, tau))
            if ov and orr:
                actual.append(M.ScoringOutput(int(op.id), int(op.ema), int(op.priority)))
            if len(actual) == len(events):
                return

    async def backpressure(ctx):
        while True:
            ctx.set(dut.o.ready, int(rng.random() < 0.7))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(monitor)
    sim.add_process(backpressure)
    sim.add_testbench(producer)
    sim.run_until(1e-8 * 20_000)
    assert len(actual) == len(events)
    assert actual == expected


def test_tau_change_runs_the_divider_once():
    """After a τ change the input stalls for one divider run (2 cycles per quotient bit, then up to
    21 to normalise, and the cycles around it), not two: the divider must not start again in the
    cycle its result is loaded (it did until the start came from a register, doubling the stall)."""
    dut = ScoringPipeline(id_width=8)
    one_run = 2 * M.RATE_BITS + 21
    stalls = []

    async def bench(ctx):
        ctx.set(dut.alpha, 0x1000)
        for tau in (1000, 3, M.TAU_MAX, 1000):
            ctx.set(dut.tau, tau)
            await ctx.tick()
            busy = 0
            while ctx.get(dut.busy):
                busy += 1
                await ctx.tick()
            stalls.append(busy)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run_until(1e-8 * 5_000)
    assert len(stalls) == 4, stalls
    assert all(2 * M.RATE_BITS <= s <= one_run + 4 for s in stalls), f"busy cycles per tau change: {stalls}"


def test_an_event_at_the_first_clock_sees_the_sanitized_configuration():
    """Straight out of reset with α = 0 and τ = 0 on the inputs (the registers' own reset values),
    an event must still be scored with the sanitized α = 1 and τ = TAU_MIN, as the model does: the
    configuration registers reset to those values, so the input waits for the divider's first run
    (it was accepted at once, scored with α = 0 and a zero decay rate)."""
    dut = ScoringPipeline(id_width=8)
    ev = {"id": 1, "ema": 2, "sample": 60000, "update": 1, "last_step": 0, "cur_step": 1000}
    got = []

    async def bench(ctx):
        ctx.set(dut.alpha, 0)
        ctx.set(dut.tau, 0)
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.payload, ev)
        ctx.set(dut.i.valid, 1)
        while True:
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            if ready:
                break
        ctx.set(dut.i.valid, 0)
        while not ctx.get(dut.o.valid):
            await ctx.tick()
        op = ctx.get(dut.o.payload)
        got.append(M.ScoringOutput(int(op.id), int(op.ema), int(op.priority)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run_until(1e-8 * 2_000)
    assert got == [M.score_event(M.ScoringInput(**ev), 0, 0)]
