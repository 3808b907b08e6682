"""Benchmarks of the phase detector: phase.events_per_cycle (cocotb on Verilator)."""
from cxlkv.tb.phase import BENCHES
from cxlkv.tb.runner import run


def measure():
    result = run(BENCHES[0], testcase="test_throughput", env={"CXLKV_THROUGHPUT_EVENTS": "50000"})
    if not result.passed:
        raise RuntimeError(f"throughput test failed; see {result.build_dir}/sim.log")
    return list(result.metrics.values())
