"""Benchmarks of the HDM decode and hint path.

``measure()`` (``make bench``): ``hdm.accesses_per_cycle`` from the cocotb bench on Verilator.
``fpga()`` (``python -m cxlkv.tb.hdm.bench --fpga``, not part of ``make bench``: a place and
route of a few minutes): ``fpga.ulx3s_85f.hdm.*``, the block alone at the Llama-70B geometry
between registers (``hdl/boards/timing.py``), as tb/fpga/bench.py measures the scoring pipeline.
"""
import sys

from cxlkv.tb.hdm import BENCHES
from cxlkv.tb.runner import run

BOARD = "ulx3s-85f"
GOAL_MHZ = 125.0


def measure():
    result = run(BENCHES[0], testcase="test_throughput", env={"CXLKV_THROUGHPUT_ACCESSES": "50000"})
    if not result.passed:
        raise RuntimeError(f"throughput test failed; see {result.build_dir}/sim.log")
    return list(result.metrics.values())


def fpga():
    from cxlkv.hdl.hdm import Hdm
    from cxlkv.tb.fpga.bench import measure_block
    return measure_block("hdm", lambda: Hdm(n_layers=80, n_kv_heads=8, n_positions=131072, addr_width=52),
                         "Hdm(80, 8, 131072, addr_width=52, hint_depth=8)", BOARD, GOAL_MHZ)


if __name__ == "__main__":
    for rec in (fpga() if "--fpga" in sys.argv[1:] else measure()):
        print(f"{rec['name']}: {rec['value']} {rec['unit']}  {rec['config']}")
