"""The controller's tier memory model (hdl/_tiermem.py) in Amaranth's simulator.

Against a reference (a dict of lines, requests applied in acceptance order): every read answers
the data of every write accepted before it, in request order, never earlier than 2 + latency
cycles after its acceptance, with random request gaps, response backpressure and latency changes;
the read limit holds requests back; parameter errors are CxlkvErrors.
"""
import random

import pytest
from amaranth.sim import Simulator

from cxlkv.errors import CxlkvError
from cxlkv.hdl._tiermem import TierMemory


def run(dut, requests, latencies, rng, resp_ready=0.7, gap=0.3, timeout=20000):
    """Drive ``requests`` [(addr, write, wdata)] with latency ``latencies[i]`` set while request i
    is offered; returns (answers [(line, cycle)], accept cycles of the reads, max reads waiting)."""
    answers, accepted = [], []
    n_reads = sum(1 for r in requests if not r[1])
    state = {"cycle": 0, "waiting": 0, "max_waiting": 0}

    async def clock(ctx):
        async for _ in ctx.tick():
            state["cycle"] += 1

    async def producer(ctx):
        for (addr, write, wdata), lat in zip(requests, latencies):
            while rng.random() < gap:
                await ctx.tick()
            ctx.set(dut.latency, lat)
            ctx.set(dut.req.payload, {"addr": addr, "write": write, "wdata": wdata})
            ctx.set(dut.req.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.req.ready)
                if ready:
                    break
            if not write:
                accepted.append((state["cycle"] - 1, lat))
            ctx.set(dut.req.valid, 0)

    async def backpressure(ctx):
        while True:
            ctx.set(dut.resp.ready, int(rng.random() < resp_ready))
            await ctx.tick()

    async def monitor(ctx):
        async for _, _, v, r, p in ctx.tick().sample(dut.resp.valid, dut.resp.ready, dut.resp.payload):
            if v and r:
                answers.append((p, state["cycle"] - 1))
            if len(answers) == n_reads:
                return
            if state["cycle"] > timeout:
                raise AssertionError(f"only {len(answers)} of {n_reads} answers after {timeout} cycles")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_process(clock)
    sim.add_process(backpressure)
    sim.add_testbench(producer, background=True)
    sim.add_testbench(monitor)
    sim.run()
    return answers, accepted


def reference(requests):
    mem, out = {}, []
    for addr, write, wdata in requests:
        if write:
            mem[addr] = wdata
        else:
            out.append(mem.get(addr, 0))
    return out


@pytest.mark.parametrize("seed,max_reads,resp_ready", [(1, 4, 0.7), (2, 2, 1.0), (3, 8, 0.4)])
def test_reads_see_earlier_writes_in_order_after_the_latency(seed, max_reads, resp_ready):
    rng = random.Random(seed)
    depth, width = 24, 16
    dut = TierMemory(depth, width, addr_bits=6, max_reads=max_reads, latency_bits=4)
    # reads and writes of few addresses, so a read often follows a write to its line at once
    requests = [(rng.randrange(6) if rng.random() < 0.6 else rng.randrange(depth), int(rng.random() < 0.45),
                 rng.randrange(1 << width)) for _ in range(400)]
    latencies = [rng.choice([0, 0, 1, 3, 7, 15]) for _ in requests]
    answers, accepted = run(dut, requests, latencies, rng, resp_ready=resp_ready)
    assert [a for a, _ in answers] == reference(requests)
    for (line, at), (acc, lat) in zip(answers, accepted):
        assert at >= acc + 2 + lat, (line, at, acc, lat)


def test_latency_zero_and_always_ready_answers_in_two_cycles():
    rng = random.Random(5)
    dut = TierMemory(8, 8, max_reads=4)
    requests = [(i, 1, 0x10 + i) for i in range(8)] + [(i, 0, 0) for i in range(8)]
    answers, accepted = run(dut, requests, [0] * len(requests), rng, resp_ready=1.0, gap=0.0)
    assert [a for a, _ in answers] == [0x10 + i for i in range(8)]
    assert [at - acc for (_, at), (acc, _) in zip(answers, accepted)] == [2] * 8


def test_reference_disagrees_with_a_wrong_order():
    """Negative check: the comparison above can fail (a swapped pair of answers differs)."""
    rng = random.Random(7)
    dut = TierMemory(8, 8, max_reads=2)
    requests = [(0, 1, 1), (1, 1, 2), (0, 0, 0), (1, 0, 0)]
    answers, _ = run(dut, requests, [3] * 4, rng)
    got = [a for a, _ in answers]
    assert got == reference(requests) == [1, 2]
    assert got[::-1] != reference(requests)


@pytest.mark.parametrize("kw,match", [(dict(depth=0, line_bits=8), "depth"), (dict(depth=8, line_bits=0), "line_bits"),
                                      (dict(depth=64, line_bits=8, addr_bits=5), "address bits"),
                                      (dict(depth=8, line_bits=8, max_reads=3), "max_reads"),
                                      (dict(depth=8, line_bits=8, latency_bits=0), "latency_bits"),
                                      (dict(depth=2, line_bits=8, init=[1, 2, 3]), "initial"),
                                      (dict(depth=True, line_bits=8), "depth"), (dict(depth=8, line_bits=8.0), "line_bits"),
                                      (dict(depth=8, line_bits=8, addr_bits=4.0), "address bits"),
                                      (dict(depth=8, line_bits=8, max_reads=True), "max_reads")])
def test_parameter_errors(kw, match):
    with pytest.raises(CxlkvError, match=match):
        TierMemory(**kw)
