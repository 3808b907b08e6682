"""Benchmarks of the phase detector.

``measure()`` (``make bench``): ``phase.events_per_cycle`` from the cocotb bench on Verilator.
``fpga()`` (``python -m cxlkv.tb.phase.bench --fpga``, not part of ``make bench``: a place and
route of a few minutes): ``fpga.ulx3s_85f.phase.*``, the block alone between registers
(``hdl/boards/timing.py``), as tb/hdm/bench.py measures the HDM decode.
"""
import sys

from cxlkv.tb.phase import BENCHES
from cxlkv.tb.runner import run

BOARD = "ulx3s-85f"
GOAL_MHZ = 125.0


def measure():
    result = run(BENCHES[0], testcase="test_throughput", env={"CXLKV_THROUGHPUT_EVENTS": "50000"})
    if not result.passed:
        raise RuntimeError(f"throughput test failed; see {result.build_dir}/sim.log")
    return list(result.metrics.values())


def fpga():
    from cxlkv.hdl.phase import PhaseDetector
    from cxlkv.tb.fpga.bench import measure_block
    return measure_block("phase", lambda: PhaseDetector(counter_width=32), "PhaseDetector(counter_width=32)",
                         BOARD, GOAL_MHZ)


if __name__ == "__main__":
    for rec in (fpga() if "--fpga" in sys.argv[1:] else measure()):
        print(f"{rec['name']}: {rec['value']} {rec['unit']}  {rec['config']}")
