"""cocotb benches of the AXI4 metadata master (cxlkv.hdl.metaaxi): alone, against a scripted
AXI4 slave; and in front of the tracker (TrackerAxi4) against cocotbext-axi's AxiRam."""
from cxlkv.tb.runner import CocotbBench

MASTER_PARAMS = {"word_addr_width": 10, "pending_writes": 4}
TRACKER_PARAMS = {"n_layers": 3, "n_kv_heads": 2, "n_positions": 128, "n_buckets": 128}


def _make_master(word_addr_width, pending_writes):
    from cxlkv.hdl.metaaxi import MetaAxiMaster
    return MetaAxiMaster(word_addr_width, pending_writes=pending_writes)


def _make_tracker(n_layers, n_kv_heads, n_positions, n_buckets):
    from cxlkv.hdl.metaaxi import TrackerAxi4
    return TrackerAxi4(n_layers, n_kv_heads, n_positions, n_buckets)


BENCHES = [CocotbBench("metaaxi", _make_master, "cxlkv.tb.metaaxi.test_metaaxi", MASTER_PARAMS),
           CocotbBench("tracker_axi4", _make_tracker, "cxlkv.tb.metaaxi.test_tracker_axi", TRACKER_PARAMS)]
