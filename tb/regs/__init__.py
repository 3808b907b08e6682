"""cocotb bench of the register block (cxlkv.hdl.regs) against the register-file model (cxlkv.models.regs)."""
from cxlkv.tb.runner import CocotbBench


def _make_dut():
    from cxlkv.hdl.regs import RegisterBlock
    return RegisterBlock()


BENCHES = [CocotbBench("regs", _make_dut, "cxlkv.tb.regs.test_regs", {})]
