"""Golden model of the phase detector: windows, the strict ratio test, hysteresis, override, clamps."""
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


def test_vote_is_strict():
    assert M.window_vote(10, 1, 10) == M.PREFILL        # 10 reads, 1 write: not more than 10x
    assert M.window_vote(11, 1, 10) == M.DECODE
    assert M.window_vote(16, 0, 255) == M.DECODE         # no writes at all: decode
    assert M.window_vote(0, 16, 1) == M.PREFILL


def test_window_closes_on_its_last_event_and_the_phase_follows_one_clock_later():
    cfg = M.PhaseConfig(ratio=10, window_log2=4, hysteresis=1)
    det = M.PhaseDetector()
    out = feed(det, cfg, [0] * 15)
    assert det.windows == 0 and det.reads == 15 and out[-1]["decode"] == 0
    det.tick(cfg, 1, 0)               # the 16th event closes the window; the mode and phase switch
    assert det.windows == 1 and det.mode == M.DECODE and det.phase == M.DECODE
    assert det.outputs(cfg)["phase_change"] == 1 and det.changes == 1
    assert (det.last_reads, det.last_writes) == (16, 0) and det.reads == 0
    det.tick(cfg, 0, 0)               # an idle clock: nothing moves, the change pulse ends
    assert det.outputs(cfg)["phase_change"] == 0 and det.windows == 1


def test_idle_cycles_do_not_count():
    cfg = M.PhaseConfig(ratio=10, window_log2=4, hysteresis=1)
    det = M.PhaseDetector()
    feed(det, cfg, [None, 0] * 16)
    assert det.windows == 1 and det.last_reads == 16


def test_hysteresis_counts_consecutive_contrary_windows():
    cfg = M.PhaseConfig(ratio=10, window_log2=4, hysteresis=3)
    det = M.PhaseDetector()
    decode_window, prefill_window = [0] * 16, [1] * 16
    feed(det, cfg, decode_window * 2)
    assert det.mode == M.PREFILL and det.streak == 2
    feed(det, cfg, prefill_window)            # agrees with the mode: streak cleared
    assert det.streak == 0
    feed(det, cfg, decode_window * 3)
    assert det.mode == M.DECODE and det.streak == 0 and det.changes == 1


def test_override_forces_the_phase_and_counts_changes_of_the_phase():
    det = M.PhaseDetector()
    auto = M.PhaseConfig(window_log2=4, hysteresis=1)
    forced = M.PhaseConfig(window_log2=4, hysteresis=1, override=M.OVERRIDE_DECODE)
    det.tick(forced, 0, 0)
    assert det.phase == M.DECODE and det.mode == M.PREFILL and det.changes == 1
    feed(det, forced, [1] * 16)               # detection goes on underneath
    assert det.mode == M.PREFILL and det.phase == M.DECODE
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
    det.tick(M.PhaseConfig(window_log2=4, hysteresis=1), 1, 0)
    assert det.windows == 1 and det.last_reads == 41


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.sampled_from([None, 0, 1]), max_size=400), ratio=st.integers(0, 255),
       hyst=st.integers(0, 5), wl2=st.integers(0, 31))
def test_windows_partition_the_events(ops, ratio, hyst, wl2):
    cfg = M.PhaseConfig(ratio=ratio, window_log2=wl2, hysteresis=hyst)
    det = M.PhaseDetector()
    feed(det, cfg, ops)
    size = 1 << M.sanitize(cfg)[0].window_log2
    events = sum(op is not None for op in ops)
    assert det.windows == events // size
    assert det.reads + det.writes == events % size
    assert det.streak < max(hyst, 1)


def test_run_over_a_synthetic_trace_finds_prefill_then_decode():
    from cxlkv.models.tracegen import synth
    t = synth("mixed", n_layers=2, n_kv_heads=2, prefill=256, steps=16, seed=2)
    phases = M.run(t.op, M.PhaseConfig(ratio=10, window_log2=6, hysteresis=2))
    n_prefill = int((t.step == t.step[0]).sum())
    assert phases[n_prefill - 1] == M.PREFILL and phases[-1] == M.DECODE
    changes = sum(a != b for a, b in zip(phases, phases[1:]))
    assert changes == 1
