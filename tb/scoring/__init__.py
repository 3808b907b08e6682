"""cocotb bench of the EMA scoring pipeline (cxlkv.hdl.scoring) against cxlkv.models.scoring."""
from cxlkv.tb.runner import CocotbBench


def _make_dut(id_width=32):
    from cxlkv.hdl.scoring import ScoringPipeline
    return ScoringPipeline(id_width=id_width)


#: The configurations the regression runs (one Verilator build each).
BENCHES = [CocotbBench("scoring", _make_dut, "cxlkv.tb.scoring.test_scoring", {"id_width": 32})]
