"""cocotb bench of the access tracker (cxlkv.hdl.tracker) against cxlkv.models.tracker / policy.replay."""
from cxlkv.tb.runner import CocotbBench

#: Bench geometry: 3 layers x 2 KV heads (3 layers so an out-of-range layer is representable),
#: 128 positions per queue (the traces reach 95), a 128-bucket ring (the defaults need NB = 90).
PARAMS = {"n_layers": 3, "n_kv_heads": 2, "n_positions": 128, "n_buckets": 128}


def _make_dut(n_layers, n_kv_heads, n_positions, n_buckets):
    from cxlkv.hdl.tracker import Tracker
    return Tracker(n_layers, n_kv_heads, n_positions, n_buckets)


BENCHES = [CocotbBench("tracker", _make_dut, "cxlkv.tb.tracker.test_tracker", PARAMS)]
