"""cocotb tests of the phase detector against its cycle-accurate golden model.

Every cycle the bench drives an event (or none) and the configuration, samples
every output in the ReadOnly phase and compares it with the model's, then ticks
the model; an in-order scoreboard holds the per-cycle snapshots.

Environment: CXLKV_EVENTS (events of the random test, default 20000), CXLKV_SEED.
"""
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from cxlkv.models import phase as M
from cxlkv.tb.common import InOrderScoreboard, env_int, report_metric, test_rng

OUTPUTS = ("decode", "mode", "streak", "phase_change", "last_reads", "last_writes", "windows", "changes", "cfg_error")


class PhaseEnv:
    def __init__(self, dut, corrupt_at=None):
        self.dut = dut
        self.model = M.PhaseDetector()
        self.cfg = M.PhaseConfig()
        self.sb = InOrderScoreboard("phase")
        self.corrupt_at = corrupt_at
        self.cycles = 0
        self.events = 0

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.rst.value = 1
        dut.ev_valid.value = 0
        dut.ev_write.value = 0
        self.configure(M.PhaseConfig())
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0

    def configure(self, cfg):
        self.cfg = cfg
        d = self.dut
        d.ratio.value = cfg.ratio
        d.window_log2.value = cfg.window_log2
        d.hysteresis.value = cfg.hysteresis
        d.phase_override.value = cfg.override

    async def feed(self, events, cfg=None):
        """One cycle per item: None is an idle cycle, 0 a read, 1 a write."""
        first = True
        for ev in events:
            await RisingEdge(self.dut.clk)
            if first and cfg is not None:
                self.configure(cfg)
            first = False
            self.dut.ev_valid.value = int(ev is not None)
            self.dut.ev_write.value = int(bool(ev))
            await ReadOnly()
            exp = self.model.outputs(self.cfg)
            if self.cycles == self.corrupt_at:
                exp = {**exp, "decode": exp["decode"] ^ 1}
            self.sb.expect((self.cycles, exp))
            self.sb.actual((self.cycles, {k: int(getattr(self.dut, k).value) for k in OUTPUTS}))
            self.model.tick(self.cfg, int(ev is not None), int(bool(ev)))
            self.events += ev is not None
            self.cycles += 1


def phased_ops(rng, n, window):
    """Alternating prefill-like (mostly writes) and decode-like (mostly reads) stretches, some
    near the ratio boundary, with idle cycles."""
    out = []
    while len(out) < n:
        kind = rng.random()
        length = rng.randrange(window // 2, 6 * window)
        p_write = 0.9 if kind < 0.3 else (1 / 11 if kind < 0.6 else rng.choice((0.02, 0.085, 0.09, 0.1, 0.5)))
        for _ in range(length):
            out.append(None if rng.random() < 0.1 else int(rng.random() < p_write))
    return out[:n]


RANDOM_CONFIGS = (M.PhaseConfig(ratio=10, window_log2=4, hysteresis=1), M.PhaseConfig(ratio=10, window_log2=5, hysteresis=2),
                  M.PhaseConfig(ratio=1, window_log2=4, hysteresis=3), M.PhaseConfig(ratio=255, window_log2=6, hysteresis=1),
                  M.PhaseConfig(ratio=0, window_log2=2, hysteresis=0, override=3),            # clamped, flagged
                  M.PhaseConfig(ratio=10, window_log2=4, hysteresis=1, override=2),
                  M.PhaseConfig(ratio=10, window_log2=4, hysteresis=1, override=1),
                  M.PhaseConfig(ratio=4, window_log2=31, hysteresis=255))


@cocotb.test()
async def test_random(dut):
    """Random phased streams, idle cycles, every configuration (including clamped ones) changed mid-window."""
    env = PhaseEnv(dut)
    rng = test_rng()
    await env.start()
    n = env_int("CXLKV_EVENTS", 20_000)
    per = n // len(RANDOM_CONFIGS)
    for cfg in RANDOM_CONFIGS:
        await env.feed(phased_ops(rng, per, 1 << min(max(cfg.window_log2, 4), 8)), cfg)
    env.sb.check()
    m = env.model
    dut._log.info("random: %d cycles, %d windows, %d phase changes", env.cycles, m.windows, m.changes)
    assert m.windows > 50 and m.changes > 10, "stimulus never exercised the detector"


@cocotb.test()
async def test_config_at_any_clock(dut):
    """The configuration rewritten at random clocks, a few clocks apart (mid-window, with events in the
    pipeline): the pipeline takes each field at its clock, as the model says."""
    env = PhaseEnv(dut)
    rng = test_rng()
    await env.start()
    ops = phased_ops(rng, env_int("CXLKV_EVENTS", 20_000) // 2, 32)
    i = 0
    while i < len(ops):
        n = rng.randrange(1, 24)
        cfg = M.PhaseConfig(ratio=rng.choice((0, 1, 2, 4, 10, 255)), window_log2=rng.choice((0, 4, 4, 5, 6, 31)),
                            hysteresis=rng.choice((0, 1, 1, 2, 3)), override=rng.choice((0, 0, 0, 0, 1, 2, 3)))
        await env.feed(ops[i:i + n], cfg)
        i += n
    env.sb.check()
    m = env.model
    dut._log.info("config churn: %d cycles, %d windows, %d phase changes", env.cycles, m.windows, m.changes)
    assert m.windows > 50 and m.changes > 10, "stimulus never exercised the detector"


@cocotb.test()
async def test_trace_driven(dut):
    """The op streams of tiny synthetic traces: prefill (writes) then decode (reads)."""
    from cxlkv.models.tracegen import synth
    env = PhaseEnv(dut)
    await env.start()
    for family in ("recent", "mixed", "needle"):
        t = synth(family, n_layers=2, n_kv_heads=2, prefill=128, steps=12, seed=1)
        before = env.model.changes
        await env.feed([int(x) for x in t.op], M.PhaseConfig(ratio=10, window_log2=5, hysteresis=2))
        assert env.model.changes > before, f"{family}: no phase change over prefill then decode"
        await env.feed([1] * 256)          # back to prefill for the next trace
    env.sb.check()


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test: one flipped phase prediction (cycle 300) must be reported, and only it."""
    env = PhaseEnv(dut, corrupt_at=300)
    rng = test_rng()
    await env.start()
    await env.feed(phased_ops(rng, 1000, 16), M.PhaseConfig(ratio=10, window_log2=4, hysteresis=1))
    env.sb.assert_caught_one(index=300, log=dut._log)


@cocotb.test()
async def test_throughput(dut):
    """An event every clock: events per clock the detector takes (phase.events_per_cycle)."""
    env = PhaseEnv(dut)
    rng = test_rng()
    await env.start()
    n = env_int("CXLKV_THROUGHPUT_EVENTS", 5000)
    ops = [x if x is not None else 0 for x in phased_ops(rng, n, 16)]
    await env.feed(ops, M.PhaseConfig(ratio=10, window_log2=4, hysteresis=2))
    env.sb.check()
    rate = env.events / env.cycles
    report_metric("phase.events_per_cycle", round(rate, 6), "events/cycle",
                  {"events": env.events, "window_log2": 4, "input_valid": "always"})
    assert env.events == n
