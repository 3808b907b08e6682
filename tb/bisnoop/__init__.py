"""cocotb bench of the BI-snoop engine (cxlkv.hdl.bisnoop) against cxlkv.models.bisnoop,
the host-cache model (host.py), the directed scenarios (scenarios/*.jsonl) and the
formal jobs (formal.py)."""
from cxlkv.tb.runner import CocotbBench


def _make_dut(**params):
    from cxlkv.hdl.bisnoop import BISnoopEngine
    return BISnoopEngine(**params)


def _config():
    from cxlkv.models.bisnoop import SCENARIO_CONFIG
    return dict(SCENARIO_CONFIG)


#: The configurations the regression runs (one Verilator build each): the scenario configuration.
BENCHES = [CocotbBench("bisnoop", _make_dut, "cxlkv.tb.bisnoop.test_bisnoop", _config())]
