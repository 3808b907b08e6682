"""cocotb bench of the access tracker (cxlkv.hdl.tracker) against cxlkv.models.tracker / policy.replay."""
from cxlkv.tb.runner import CocotbBench

#: Bench geometry: 3 layers x 2 KV heads (3 layers so an out-of-range layer is representable),
#: 128 positions per queue (the traces reach 95), a 128-bucket ring (the defaults need NB = 90,
#: so 38 expired buckets stay in place), slots for every position, the default events in flight (hdl.tracker.INFLIGHT).
PARAMS = {"n_layers": 3, "n_kv_heads": 2, "n_positions": 128, "n_buckets": 128}
#: Second configuration: 16 slots per queue (budgets up to 16), a 256-bucket ring (lazier
#: splicing), and only 4 events in flight (the in-flight limit and forwarding across a full
#: window are exercised; throughput is bounded by it).
PARAMS_SMALL = {"n_layers": 3, "n_kv_heads": 2, "n_positions": 128, "n_buckets": 256, "max_budget": 16,
                "inflight": 4}

#: Third configuration: the matrix selection (the board's), 16 slots per queue, the default in flight.
PARAMS_MATRIX = {"n_layers": 3, "n_kv_heads": 2, "n_positions": 128, "n_buckets": 128, "max_budget": 16,
                 "select": "matrix"}


def _make_dut(n_layers, n_kv_heads, n_positions, n_buckets, max_budget=None, inflight=None, select="ring"):
    from cxlkv.hdl.tracker import INFLIGHT, Tracker
    return Tracker(n_layers, n_kv_heads, n_positions, n_buckets, max_budget=max_budget,
                   inflight=INFLIGHT if inflight is None else inflight, select=select)


BENCHES = [CocotbBench("tracker", _make_dut, "cxlkv.tb.tracker.test_tracker", PARAMS),
           CocotbBench("tracker", _make_dut, "cxlkv.tb.tracker.test_tracker", PARAMS_SMALL),
           CocotbBench("tracker", _make_dut, "cxlkv.tb.tracker.test_tracker", PARAMS_MATRIX)]
