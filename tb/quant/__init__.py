"""cocotb bench of the quantizer (cxlkv.hdl.quant) against cxlkv.models.quant."""

from cxlkv.tb.runner import CocotbBench


def _make_dut(tag_width=16):
    from cxlkv.hdl.quant import QuantUnit
    return QuantUnit(tag_width=tag_width)


#: The configurations the regression runs (one Verilator build each).
BENCHES = [CocotbBench("quant", _make_dut, "cxlkv.tb.quant.test_quant", {"tag_width": 16})]
