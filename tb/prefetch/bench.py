"""Benchmarks of the prefetch engine: prefetch.events_per_cycle (cocotb on Verilator)."""
from cxlkv.tb.prefetch import BENCHES
from cxlkv.tb.runner import run


def measure():
    result = run(BENCHES[0], testcase="test_throughput", env={"CXLKV_THROUGHPUT_EVENTS": "20000"})
    if not result.passed:
        raise RuntimeError(f"throughput test failed; see {result.build_dir}/sim.log")
    return list(result.metrics.values())
