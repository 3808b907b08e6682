"""cocotb tests of the scoring pipeline: directed edges, random stream with backpressure,
a scoreboard negative test, and the throughput measurement.

Environment: CXLKV_EVENTS (random events, default 100000), CXLKV_SEED.
"""
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from cxlkv.hdl.scoring import input_layout, output_layout
from cxlkv.models import scoring as M
from cxlkv.tb.common import (InOrderScoreboard, Packer, StreamPort, drive_ready, drive_stream,
                             env_int, params, report_metric, test_rng)

EDGE_SCORES = (0, 1, 0x7FFF, 0x8000, 0xFFFF)


class ScoringEnv:
    """Clock, reset, ports, the model-fed scoreboard and a monitor of both handshakes."""

    def __init__(self, dut, corrupt_at=None):
        self.dut = dut
        self.idw = params().get("id_width", 32)
        self.inp = StreamPort(dut, "i")
        self.out = StreamPort(dut, "o")
        self.in_pack = Packer(input_layout(self.idw))
        self.out_pack = Packer(output_layout(self.idw))
        self.sb = InOrderScoreboard("scoring")
        self.corrupt_at = corrupt_at      # negative test: damage one model prediction
        self.accepted = 0
        self.emitted = 0
        self.cycles = 0
        self.first_accept_cycle = None
        self.last_accept_cycle = None

    async def start(self):
        cocotb.start_soon(Clock(self.dut.clk, 10, unit="ns").start())
        self.dut.rst.value = 1
        self.inp.valid.value = 0
        self.out.ready.value = 0
        cocotb.start_soon(self._monitor())      # before reset ends: no handshake goes unseen
        for _ in range(3):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0

    def configure(self, alpha, tau):
        self.dut.alpha.value = alpha
        self.dut.tau.value = tau

    async def _monitor(self):
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            self.cycles += 1
            if self.inp.valid.value and self.inp.ready.value:
                ev = M.ScoringInput(**self.in_pack.unpack(int(self.inp.payload.value)))
                exp = M.score_event(ev, int(dut.alpha.value), int(dut.tau.value))
                if self.accepted == self.corrupt_at:
                    exp = M.ScoringOutput(exp.id, exp.ema, exp.priority ^ 1)
                self.sb.expect(exp)
                if self.first_accept_cycle is None:
                    self.first_accept_cycle = self.cycles
                self.last_accept_cycle = self.cycles
                self.accepted += 1
            if self.out.valid.value and self.out.ready.value:
                self.sb.actual(M.ScoringOutput(**self.out_pack.unpack(int(self.out.payload.value))))
                self.emitted += 1

    async def drain(self, timeout=10_000):
        for _ in range(timeout):
            if self.emitted == self.accepted and not self.sb.expected:
                break
            await RisingEdge(self.dut.clk)
        for _ in range(8):                    # nothing extra may come out
            await RisingEdge(self.dut.clk)


def random_event(rng, idw, i):
    last = rng.getrandbits(32)
    r = rng.random()
    if r < 0.6:
        age = rng.randrange(0, 4096)
    elif r < 0.8:
        age = rng.randrange(0, 1 << 22)
    elif r < 0.9:
        age = rng.getrandbits(32)           # includes wrap-around and "last after cur"
    else:
        age = rng.choice((0, 1, M.AGE_MAX, M.AGE_MAX + 1, (1 << 32) - 1))
    pick = lambda: rng.choice(EDGE_SCORES) if rng.random() < 0.2 else rng.getrandbits(16)  # noqa: E731
    return {"id": (i * 2654435761) & ((1 << idw) - 1), "ema": pick(), "sample": pick(),
            "update": int(rng.random() < 0.8), "last_step": last, "cur_step": (last + age) & 0xFFFFFFFF}


RANDOM_CONFIGS = ((0x1000, 1000), (0xFFFF, 1), (1, M.TAU_MAX), (0x8000, 64), (0, 0),
                  (0x2000, M.TAU_MAX + 1), (0x0100, 12345), (0xFFFF, (1 << 32) - 1))


@cocotb.test()
async def test_edges(dut):
    """Every combination of edge EMAs, samples, ages and configurations, including invalid ones."""
    env = ScoringEnv(dut)
    rng = test_rng()
    await env.start()
    cocotb.start_soon(drive_ready(dut.clk, env.out, rng, ready_prob=0.7, burst=3))
    ages = (0, 1, 2, 999, 1000, M.AGE_MAX, M.AGE_MAX + 1, (1 << 32) - 1)
    configs = ((1, 1), (0xFFFF, M.TAU_MAX), (0x8000, 1000), (0, 0), (0, M.TAU_MAX + 1), (7, (1 << 32) - 1))
    i = 0
    for alpha, tau in configs:
        env.configure(alpha, tau)
        items = []
        for ema in EDGE_SCORES:
            for sample in EDGE_SCORES:
                for age in ages:
                    for update in (0, 1):
                        last = (0xFFFFFFF0 + i) & 0xFFFFFFFF
                        items.append({"id": i & 0xFFFFFFFF, "ema": ema, "sample": sample, "update": update,
                                      "last_step": last, "cur_step": (last + age) & 0xFFFFFFFF})
                        i += 1
        await drive_stream(dut.clk, env.inp, env.in_pack, items, rng, idle=0.1)
        await env.drain()
        assert int(dut.cfg_error.value) == int(M.sanitize_config(alpha, tau)[2]), \
            f"cfg_error for alpha={alpha} tau={tau}"
    env.sb.check()
    dut._log.info("edge events checked: %d", env.sb.compared)


@cocotb.test()
async def test_random_backpressure(dut):
    """Random events, random input gaps, output backpressure bursts, configuration changes mid-stream."""
    env = ScoringEnv(dut)
    rng = test_rng()
    n = env_int("CXLKV_EVENTS", 100_000)
    await env.start()
    cocotb.start_soon(drive_ready(dut.clk, env.out, rng, ready_prob=0.8, burst=4))
    chunk = max(1, n // len(RANDOM_CONFIGS))
    done = 0
    for k, (alpha, tau) in enumerate(RANDOM_CONFIGS):
        env.configure(alpha, tau)
        count = chunk if k < len(RANDOM_CONFIGS) - 1 else n - done
        items = [random_event(rng, env.idw, done + j) for j in range(count)]
        await drive_stream(dut.clk, env.inp, env.in_pack, items, rng, idle=0.15)
        done += count
    await env.drain()
    env.sb.check()
    assert env.sb.compared == n, f"compared {env.sb.compared} of {n}"
    dut._log.info("random events checked: %d in %d cycles", n, env.cycles)


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test: a one-bit error injected into the model's 500th prediction must be reported."""
    env = ScoringEnv(dut, corrupt_at=500)
    rng = test_rng()
    await env.start()
    env.configure(0x1000, 1000)
    cocotb.start_soon(drive_ready(dut.clk, env.out, rng, ready_prob=0.9))
    await drive_stream(dut.clk, env.inp, env.in_pack, [random_event(rng, env.idw, j) for j in range(1000)], rng)
    await env.drain()
    env.sb.assert_caught_one(index=500, log=dut._log)


@cocotb.test()
async def test_throughput(dut):
    """Input always valid, output always ready: accepted events per clock (ema.events_per_cycle)."""
    env = ScoringEnv(dut)
    rng = test_rng()
    n = env_int("CXLKV_THROUGHPUT_EVENTS", 20_000)
    await env.start()
    env.configure(0x1000, 1000)
    env.out.ready.value = 1
    # wait for the decay divider to settle: this is configuration time, not throughput
    while int(dut.busy.value):
        await RisingEdge(dut.clk)
    await drive_stream(dut.clk, env.inp, env.in_pack, [random_event(rng, env.idw, j) for j in range(n)], rng)
    await env.drain()
    env.sb.check()
    span = env.last_accept_cycle - env.first_accept_cycle + 1
    rate = n / span
    dut._log.info("throughput: %d events in %d cycles = %.4f events/cycle", n, span, rate)
    report_metric("ema.events_per_cycle", round(rate, 6), "events/cycle",
                  {"events": n, "id_width": env.idw, "output_ready": "always", "input_valid": "always"})
    assert rate > 0.5, "pipeline lost its one-event-per-clock shape"
