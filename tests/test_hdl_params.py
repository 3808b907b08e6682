"""Block constructors refuse a width or count they cannot build, naming the block, the parameter and
the value (hdl/_params.py), instead of elaborating fields of no bits or failing deep in elaboration."""
import pytest

from cxlkv.hdl.bisnoop import BISnoopEngine
from cxlkv.hdl.hdm import Hdm
from cxlkv.hdl.phase import PhaseDetector
from cxlkv.hdl.prefetch import PrefetchEngine
from cxlkv.hdl.quant import QuantUnit
from cxlkv.hdl.scoring import ScoringPipeline
from cxlkv.hdl.tiermover import TierMover
from cxlkv.hdl.tracker import Tracker


@pytest.mark.parametrize("make, message", [
    (lambda: PhaseDetector(counter_width=0), "PhaseDetector: counter_width must be an integer >= 1, got 0"),
    (lambda: ScoringPipeline(id_width=0), "ScoringPipeline: id_width must be an integer >= 1, got 0"),
    (lambda: PrefetchEngine(pos_width=0), "PrefetchEngine: pos_width must be an integer >= 1, got 0"),
    (lambda: PrefetchEngine(counter_width=0), "PrefetchEngine: counter_width must be an integer >= 1, got 0"),
    (lambda: PrefetchEngine(queue_bits=-1), "PrefetchEngine: queue_bits must be an integer >= 0, got -1"),
    (lambda: Hdm(tag_width=0), "Hdm: tag_width must be an integer >= 1, got 0"),
    (lambda: QuantUnit(tag_width=0), "QuantUnit: tag_width must be an integer >= 1, got 0"),
    (lambda: BISnoopEngine(data_width=0), "BISnoopEngine: data_width must be an integer >= 8, got 0"),
    (lambda: BISnoopEngine(data_width=12), "BISnoopEngine: data_width must be a multiple of 8"),
    (lambda: Tracker(0, 2, 128, 128), "Tracker: n_layers must be an integer >= 1, got 0"),
    (lambda: Tracker(2, 0, 128, 128), "Tracker: n_kv_heads must be an integer >= 1, got 0"),
    (lambda: Tracker(2.5, 2, 128, 128), "Tracker: n_layers must be an integer >= 1, got 2.5"),
    # the tier mover's: counts of no bits, non-integers, a string taken for True
    (lambda: TierMover(counter_width=0), "TierMover: counter_width must be an integer >= 1, got 0"),
    (lambda: TierMover(counter_width=-3), "TierMover: counter_width must be an integer >= 1, got -3"),
    (lambda: TierMover(depth=2.0), "TierMover: depth must be an integer >= 2, got 2.0"),
    (lambda: TierMover(depth=6), "TierMover: depth must be a power of two >= 2, got 6"),
    (lambda: TierMover(buf_lines=2.5), "TierMover: buf_lines must be an integer >= 1, got 2.5"),
    (lambda: TierMover(buf_lines=0), "TierMover: buf_lines must be an integer >= 1, got 0"),
    (lambda: TierMover(host_ops="no"), "TierMover: host_ops must be True or False, got 'no'"),
    (lambda: TierMover(host_ops=1), "TierMover: host_ops must be True or False, got 1"),
    (lambda: TierMover(host_ops=True, host_rsp_depth=2.0), "TierMover: host_rsp_depth must be an integer >= 2"),
    (lambda: TierMover(host_ops=True, host_rsp_depth=3), "TierMover: host_rsp_depth must be a power of two"),
    (lambda: TierMover(n_queues=True), "tier mover: n_queues must be a positive integer, got True"),
    (lambda: TierMover(line_bits=8.0), "tier mover: line_bits must be a positive integer, got 8.0"),
    # the HDM decode's: every parameter named as the block's, whatever its type
    (lambda: Hdm(hint_depth=2.0), "Hdm: hint_depth must be an integer in 1 .. 64, got 2.0"),
    (lambda: Hdm(hint_depth=True), "Hdm: hint_depth must be an integer in 1 .. 64, got True"),
    (lambda: Hdm(hint_depth=0), "Hdm: hint_depth must be an integer in 1 .. 64, got 0"),
    (lambda: Hdm(hint_depth=65), "Hdm: hint_depth must be an integer in 1 .. 64, got 65"),
    (lambda: Hdm(n_layers="4"), "Hdm: n_layers must be an integer >= 1, got '4'"),
    (lambda: Hdm(n_layers=2.5), "Hdm: n_layers must be an integer >= 1, got 2.5"),
    (lambda: Hdm(n_kv_heads=0), "Hdm: n_kv_heads must be an integer >= 1, got 0"),
    (lambda: Hdm(n_positions=1), "Hdm: n_positions must be an integer >= 2, got 1"),
    (lambda: Hdm(n_positions=500), "HDM geometry: n_positions must be a power of two >= 2"),
    (lambda: Hdm(addr_width=15), "Hdm: addr_width must be an integer in 16 .. 64, got 15"),
    (lambda: Hdm(addr_width=65), "Hdm: addr_width must be an integer in 16 .. 64, got 65"),
])
def test_a_parameter_the_block_cannot_build_is_refused(make, message, monkeypatch):
    """...and the refused object, never built, is collected without Amaranth's unused-elaboratable
    warning (an error under -W error). Amaranth keeps that warning off until the process first
    elaborates something, so it is switched on here, and the collection forced, so that a refusal
    that forgot to silence its object fails this test whatever ran before it."""
    import gc

    from amaranth.hdl._ir import UnusedElaboratable
    monkeypatch.setattr(UnusedElaboratable, "_MustUse__silence", False)
    with pytest.raises(ValueError) as exc:
        make()
    assert message in str(exc.value)
    del exc
    gc.collect()


@pytest.mark.parametrize("make", [
    lambda: PhaseDetector(counter_width=1), lambda: ScoringPipeline(id_width=1),
    lambda: PrefetchEngine(queue_bits=0, pos_width=1, counter_width=1), lambda: QuantUnit(tag_width=1),
    lambda: BISnoopEngine(data_width=8), lambda: Tracker(1, 1, 2, 2),
    lambda: TierMover(n_queues=1, n_positions=2, frames_per_queue=1, lines_per_entry=1, line_bits=1, depth=2,
                      buf_lines=1, counter_width=1),
    lambda: TierMover(n_queues=1, n_positions=2, frames_per_queue=1, lines_per_entry=1, line_bits=1, depth=2,
                      buf_lines=1, counter_width=1, host_ops=True, host_rsp_depth=2),
    lambda: Hdm(n_layers=1, n_kv_heads=1, n_positions=2, addr_width=16, tag_width=1, hint_depth=1),
    lambda: Hdm(n_layers=1, n_kv_heads=1, n_positions=2, addr_width=64, tag_width=1, hint_depth=64),
], ids=["phase", "scoring", "prefetch", "quant", "bisnoop", "tracker", "tiermover", "tiermover_host", "hdm",
        "hdm_widest"])
def test_the_smallest_accepted_values_elaborate(make):
    """The lower bounds are the real ones: each block elaborates at them."""
    from amaranth.back import rtlil
    assert rtlil.convert(make())
