"""cocotb bench of the prefetch engine (cxlkv.hdl.prefetch) against cxlkv.models.prefetch."""
from cxlkv.tb.runner import CocotbBench


def _make_dut(queue_bits=3, pos_width=12, depth=4, tags=4):
    from cxlkv.hdl.prefetch import PrefetchEngine
    return PrefetchEngine(queue_bits=queue_bits, pos_width=pos_width, depth=depth, tags=tags)


#: The configurations the regression runs (one Verilator build each): a small queue and tag pool
#: so overflow, tag exhaustion and the rate limit all happen within a short random run.
BENCHES = [CocotbBench("prefetch", _make_dut, "cxlkv.tb.prefetch.test_prefetch",
                       {"queue_bits": 3, "pos_width": 12, "depth": 4, "tags": 4})]
