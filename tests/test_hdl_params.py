"""Block constructors refuse a width or count they cannot build, naming the block, the parameter and
the value (hdl/_params.py), instead of elaborating fields of no bits or failing deep in elaboration."""
import pytest

from cxlkv.hdl.bisnoop import BISnoopEngine
from cxlkv.hdl.hdm import Hdm
from cxlkv.hdl.phase import PhaseDetector
from cxlkv.hdl.prefetch import PrefetchEngine
from cxlkv.hdl.quant import QuantUnit
from cxlkv.hdl.scoring import ScoringPipeline
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
], ids=["phase", "scoring", "prefetch", "quant", "bisnoop", "tracker"])
def test_the_smallest_accepted_values_elaborate(make):
    """The lower bounds are the real ones: each block elaborates at them."""
    from amaranth.back import rtlil
    assert rtlil.convert(make())
