"""cocotb bench of the phase detector (cxlkv.hdl.phase) against cxlkv.models.phase."""
from cxlkv.tb.runner import CocotbBench


def _make_dut(counter_width=32):
    from cxlkv.hdl.phase import PhaseDetector
    return PhaseDetector(counter_width=counter_width)


#: The configurations the regression runs (one Verilator build each).
BENCHES = [CocotbBench("phase", _make_dut, "cxlkv.tb.phase.test_phase", {"counter_width": 32})]
