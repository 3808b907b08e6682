"""cocotb bench of the HDM decode and hint path (cxlkv.hdl.hdm) against cxlkv.models.hdm."""
from cxlkv.tb.runner import CocotbBench

#: The geometry of the shipped traces (4 layers × 2 KV heads, positions 0..511) on a 52-bit HPA;
#: a 4-deep hint queue so that overflow and stale-hint removal are reached often.
PARAMS = {"n_layers": 4, "n_kv_heads": 2, "n_positions": 512, "addr_width": 52, "tag_width": 16,
          "hint_depth": 4}


def _make_dut(**kw):
    from cxlkv.hdl.hdm import Hdm
    return Hdm(**kw)


#: The same with a 1-deep hint queue: no age matrix (one slot has no order to keep), a
#: sample hint arriving while one waits dropped (hint_drops).
PARAMS_DEPTH1 = {**PARAMS, "hint_depth": 1}

#: The configurations the regression runs (one Verilator build each; the small one builds in ~15 s).
BENCHES = [CocotbBench("hdm", _make_dut, "cxlkv.tb.hdm.test_hdm", PARAMS),
           CocotbBench("hdm", _make_dut, "cxlkv.tb.hdm.test_hdm", PARAMS_DEPTH1)]
