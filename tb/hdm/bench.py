"""Benchmarks of the HDM decode and hint path: hdm.accesses_per_cycle (cocotb on Verilator)."""
from cxlkv.tb.hdm import BENCHES
from cxlkv.tb.runner import run


def measure():
    result = run(BENCHES[0], testcase="test_throughput", env={"CXLKV_THROUGHPUT_ACCESSES": "50000"})
    if not result.passed:
        raise RuntimeError(f"throughput test failed; see {result.build_dir}/sim.log")
    return list(result.metrics.values())


if __name__ == "__main__":
    for rec in measure():
        print(f"{rec['name']}: {rec['value']} {rec['unit']}  {rec['config']}")
