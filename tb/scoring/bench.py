"""Benchmarks of the scoring pipeline: ema.events_per_cycle (cocotb on Verilator)."""
from cxlkv.tb.runner import run
from cxlkv.tb.scoring import BENCHES


def measure():
    result = run(BENCHES[0], testcase="test_throughput", env={"CXLKV_THROUGHPUT_EVENTS": "100000"})
    if not result.passed:
        raise RuntimeError(f"throughput test failed; see {result.build_dir}/sim.log")
    return list(result.metrics.values())
