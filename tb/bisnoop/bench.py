"""Benchmarks of the BI-snoop engine: bisnoop.msgs_per_cycle (cocotb on Verilator).

Input messages accepted per clock under random conflict-free traffic (MemRd with
MetaValue I/S/A and MemWr to random lines, offered on M2S Req and RwD at once),
outputs always ready. The engine handles one event per clock, so 1.0 is its ceiling.
"""
from cxlkv.tb.bisnoop import BENCHES
from cxlkv.tb.runner import run


def measure():
    result = run(BENCHES[0], testcase="test_throughput", env={"CXLKV_THROUGHPUT_MSGS": "20000"})
    if not result.passed:
        raise RuntimeError(f"throughput test failed; see {result.build_dir}/sim.log")
    return list(result.metrics.values())
