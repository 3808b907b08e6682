"""Golden model of the phase detector: windows, the strict ratio test, hysteresis, override, clamps,
the pipeline's timing; the RTL against it in the Amaranth simulator (the cocotb bench does it on Verilator)."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cxlkv.models import phase as M


def feed(det, cfg, ops):
    out = []
    for op in ops:
        det.tick(cfg, op is not None, int(bool(op)))
        out.append(det.outputs(cfg))
    return out


def settled(det, cfg, ops):
    """``ops``, then the idle clocks that take the last event to the phase."""
    feed(det, cfg, ops)
    det.drain(cfg)
    return det


def reference(ops, cfg):
    """The rules of docs/phase.md event by event, without the pipeline: (windows, mode, streak) after each op."""
    c = M.sanitize(cfg)[0]
    reads = writes = windows = streak = 0
    mode, out = M.PREFILL, []
    for op in ops:
        if op is not None:
            reads, writes = reads + (1 - op), writes + op
            if reads + writes >= 1 << c.window_log2:
                vote = M.window_vote(reads, writes, c.ratio)
                if vote == mode:
                    streak = 0
                elif streak + 1 >= c.hysteresis:
                    mode, streak = vote, 0
                else:
                    streak += 1
                windows, reads, writes = windows + 1, 0, 0
        out.append((windows, mode, streak))
    return out


def test_vote_is_strict():
    assert M.window_vote(10, 1, 10) == M.PREFILL        # 10 reads, 1 write: not more than 10x
    assert M.window_vote(11, 1, 10) == M.DECODE
    assert M.window_vote(16, 0, 255) == M.DECODE         # no writes at all: decode
    assert M.window_vote(0, 16, 1) == M.PREFILL


def test_the_closing_event_is_counted_one_clock_later_and_reaches_the_phase_two_clocks_after_that():
    cfg = M.PhaseConfig(ratio=10, window_log2=4, hysteresis=1)
    det = M.PhaseDetector()
    out = feed(det, cfg, [0] * 16)    # the 16th event closes the window: it is in the input register
    assert det.windows == 0 and det.reads == 15 and out[-1]["decode"] == 0
    det.tick(cfg, 0, 0)               # counted: the window closes, its vote is registered
    assert det.windows == 1 and (det.last_reads, det.last_writes) == (16, 0) and det.reads == 0
    assert det.closed and det.vote == M.DECODE and det.mode == M.PREFILL and det.phase == M.PREFILL
    det.tick(cfg, 0, 0)               # the mode and the phase switch
    assert det.mode == M.DECODE and det.phase == M.DECODE
    assert det.outputs(cfg)["phase_change"] == 1 and det.changes == 1
    det.tick(cfg, 0, 0)               # nothing moves, the change pulse ends
    assert det.outputs(cfg)["phase_change"] == 0 and det.windows == 1
    assert M.DRAIN == 2


def test_idle_cycles_do_not_count():
    cfg = M.PhaseConfig(ratio=10, window_log2=4, hysteresis=1)
    det = settled(M.PhaseDetector(), cfg, [None, 0] * 16)
    assert det.windows == 1 and det.last_reads == 16


def test_hysteresis_counts_consecutive_contrary_windows():
    cfg = M.PhaseConfig(ratio=10, window_log2=4, hysteresis=3)
    det = M.PhaseDetector()
    decode_window, prefill_window = [0] * 16, [1] * 16
    settled(det, cfg, decode_window * 2)
    assert det.mode == M.PREFILL and det.streak == 2
    settled(det, cfg, prefill_window)         # agrees with the mode: streak cleared
    assert det.streak == 0
    settled(det, cfg, decode_window * 3)
    assert det.mode == M.DECODE and det.streak == 0 and det.changes == 1


def test_hysteresis_is_the_closing_events():
    det = M.PhaseDetector()
    feed(det, M.PhaseConfig(window_log2=4, hysteresis=2), [0] * 16)     # the closing event's clock: 2
    settled(det, M.PhaseConfig(window_log2=4, hysteresis=1), [])
    assert det.mode == M.PREFILL and det.streak == 1


def test_override_forces_the_phase_and_counts_changes_of_the_phase():
    det = M.PhaseDetector()
    auto = M.PhaseConfig(window_log2=4, hysteresis=1)
    forced = M.PhaseConfig(window_log2=4, hysteresis=1, override=M.OVERRIDE_DECODE)
    det.tick(forced, 0, 0)                    # an override shows one clock later
    assert det.phase == M.DECODE and det.mode == M.PREFILL and det.changes == 1
    settled(det, forced, [1] * 16)            # detection goes on underneath
    assert det.mode == M.PREFILL and det.phase == M.DECODE and det.windows == 1
    det.tick(auto, 0, 0)
    assert det.phase == M.PREFILL and det.changes == 2


@pytest.mark.parametrize("written,applied", [
    (M.PhaseConfig(ratio=0), M.PhaseConfig(ratio=1)),
    (M.PhaseConfig(window_log2=3), M.PhaseConfig(window_log2=4)),
    (M.PhaseConfig(window_log2=31), M.PhaseConfig(window_log2=24)),
    (M.PhaseConfig(hysteresis=0), M.PhaseConfig(hysteresis=1)),
    (M.PhaseConfig(override=3), M.PhaseConfig(override=0)),
])
def test_unhonourable_configuration_is_clamped_and_flagged(written, applied):
    assert M.sanitize(written) == (applied, True)
    assert M.sanitize(applied) == (applied, False)
    assert M.PhaseDetector().outputs(written)["cfg_error"] == 1


def test_window_shrunk_mid_window_closes_at_the_next_event():
    det = M.PhaseDetector()
    feed(det, M.PhaseConfig(window_log2=6), [0] * 40)
    settled(det, M.PhaseConfig(window_log2=4, hysteresis=1), [0])     # the size of the event's clock
    assert det.windows == 1 and det.last_reads == 41


def test_each_write_weighs_the_ratio_of_its_clock():
    # 8 writes at ratio 1, then 8 reads at ratio 10: 8 > 8 * 1 is false, so prefill...
    det = M.PhaseDetector()
    feed(det, M.PhaseConfig(ratio=1, window_log2=5, hysteresis=1), [1] * 8)
    settled(det, M.PhaseConfig(ratio=10, window_log2=5, hysteresis=1), [0] * 24)
    assert det.windows == 1 and det.mode == M.DECODE           # 24 reads > 8 writes x ratio 1
    # ...the same window with the ratio written before the writes votes prefill (24 <= 80)
    det = settled(M.PhaseDetector(), M.PhaseConfig(ratio=10, window_log2=5, hysteresis=1), [1] * 8 + [0] * 24)
    assert det.windows == 1 and det.mode == M.PREFILL


def test_run_gives_the_settled_phase_after_each_event():
    cfg = M.PhaseConfig(ratio=10, window_log2=4, hysteresis=1)
    ops = [1] * 20 + [0] * 40
    phases = M.run(ops, cfg)
    assert len(phases) == len(ops)
    assert [settled(M.PhaseDetector(), cfg, ops[:k + 1]).phase for k in range(len(ops))] == phases
    assert phases.index(M.DECODE) == 47                        # the event closing the 3rd window (16 reads)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.sampled_from([None, 0, 1]), max_size=400), ratio=st.integers(0, 255),
       hyst=st.integers(0, 5), wl2=st.integers(0, 31))
def test_windows_partition_the_events(ops, ratio, hyst, wl2):
    cfg = M.PhaseConfig(ratio=ratio, window_log2=wl2, hysteresis=hyst)
    det = settled(M.PhaseDetector(), cfg, ops)
    size = 1 << M.sanitize(cfg)[0].window_log2
    events = sum(op is not None for op in ops)
    assert det.windows == events // size
    assert det.reads + det.writes == det.total == events % size
    assert det.streak < max(hyst, 1)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.sampled_from([None, 0, 1, 1]), max_size=300), ratio=st.integers(0, 12),
       hyst=st.integers(0, 3))
def test_the_pipeline_follows_the_rules_drain_clocks_later(ops, ratio, hyst):
    """With a constant configuration the pipelined model is the per-event rules, DRAIN clocks late
    (the window counts one clock late)."""
    cfg = M.PhaseConfig(ratio=ratio, window_log2=4, hysteresis=hyst)
    det, got = M.PhaseDetector(), []
    for op in [*ops, *[None] * M.DRAIN]:
        det.tick(cfg, op is not None, int(bool(op)))
        got.append((det.mode, det.streak))
    ref = reference(ops, cfg)
    assert got[M.DRAIN:] == [(mode, streak) for _, mode, streak in ref]
    assert det.windows == (ref[-1][0] if ref else 0)


def test_run_over_a_synthetic_trace_finds_prefill_then_decode():
    from cxlkv.models.tracegen import synth
    t = synth("mixed", n_layers=2, n_kv_heads=2, prefill=256, steps=16, seed=2)
    phases = M.run(t.op, M.PhaseConfig(ratio=10, window_log2=6, hysteresis=2))
    n_prefill = int((t.step == t.step[0]).sum())
    assert phases[n_prefill - 1] == M.PREFILL and phases[-1] == M.DECODE
    changes = sum(a != b for a, b in zip(phases, phases[1:]))
    assert changes == 1


def test_rtl_equals_the_model_with_the_configuration_changing_at_any_clock():
    """hdl.phase against this model in the Amaranth simulator: random events and idle clocks, the
    configuration (clamped values included) rewritten at random clocks, every output every clock."""
    from amaranth.sim import Simulator

    from cxlkv.hdl.phase import PhaseDetector
    outputs = ("decode", "mode", "streak", "phase_change", "last_reads", "last_writes", "windows", "changes",
               "cfg_error")
    dut, rng = PhaseDetector(counter_width=8), random.Random(5)
    seen = {"windows": 0, "changes": 0}

    async def bench(ctx):
        model, cfg, p_write = M.PhaseDetector(counter_width=8), M.PhaseConfig(ratio=3, window_log2=4, hysteresis=1), 0.5
        for clock in range(4000):
            if rng.random() < 0.03:
                cfg = M.PhaseConfig(ratio=rng.choice((0, 1, 3, 10, 255)), window_log2=rng.choice((0, 4, 5, 6, 31)),
                                    hysteresis=rng.choice((0, 1, 2, 3)), override=rng.choice((0, 0, 0, 1, 2, 3)))
            if rng.random() < 0.01:
                p_write = rng.choice((0.02, 0.1, 0.3, 0.9))
            valid, write = int(rng.random() < 0.9), int(rng.random() < p_write)
            for port, value in ((dut.ev_valid, valid), (dut.ev_write, write), (dut.ratio, cfg.ratio),
                                (dut.window_log2, cfg.window_log2), (dut.hysteresis, cfg.hysteresis),
                                (dut.phase_override, cfg.override)):
                ctx.set(port, value)
            assert {k: ctx.get(getattr(dut, k)) for k in outputs} == model.outputs(cfg), clock
            await ctx.tick()
            model.tick(cfg, valid, write)
        seen.update(windows=model.windows, changes=model.changes)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["windows"] > 50 and seen["changes"] > 20
