"""cocotb bench of the prefetch engine (cxlkv.hdl.prefetch) against cxlkv.models.prefetch."""
from cxlkv.tb.runner import CocotbBench


def _make_dut(queue_bits=3, pos_width=12, depth=4, tags=4, lookups=4):
    from cxlkv.hdl.prefetch import PrefetchEngine
    return PrefetchEngine(queue_bits=queue_bits, pos_width=pos_width, depth=depth, tags=tags, lookups=lookups)


#: The configurations the regression runs (one Verilator build each): a small queue, tag pool and
#: lookup queue so overflow, tag exhaustion, a full lookup queue and the rate limit all happen
#: within a short random run; and the
#: 640-queue geometry with a deeper queue and a tag pool that is not a power of two (tag 3 of a
#: 2-bit tag field is out of range: a completion of it must count as bad).
BENCHES = [CocotbBench("prefetch", _make_dut, "cxlkv.tb.prefetch.test_prefetch",
                       {"queue_bits": 3, "pos_width": 12, "depth": 4, "tags": 4, "lookups": 2}),
           CocotbBench("prefetch", _make_dut, "cxlkv.tb.prefetch.test_prefetch",
                       {"queue_bits": 10, "pos_width": 20, "depth": 8, "tags": 3, "lookups": 4}),
           # positions narrower than the window register (4 bits, windows up to 255): only
           # test_windows_beyond_the_positions runs (the others' stimulus needs wider positions)
           CocotbBench("prefetch", _make_dut, "cxlkv.tb.prefetch.test_prefetch",
                       {"queue_bits": 1, "pos_width": 4, "depth": 4, "tags": 4, "lookups": 2})]
