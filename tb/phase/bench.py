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
    from cxlkv import build_dir
    from cxlkv.hdl.boards import get_board
    from cxlkv.hdl.boards.timing import TimingTop
    from cxlkv.hdl.phase import PhaseDetector
    from cxlkv.sw import fpga as flow
    from cxlkv.tb.fpga.bench import _path_ends

    top = TimingTop(get_board(BOARD), lambda: PhaseDetector(counter_width=32), core_mhz=GOAL_MHZ)
    tim = flow._board_build(BOARD, top, build_dir() / "fpga" / f"bench-{BOARD}-phase", allow_timing_fail=True)
    rep = flow.parse_report(tim.read_text())
    config = {"board": BOARD, "design": "PhaseDetector(counter_width=32) between registers",
              "core_mhz_target": GOAL_MHZ, "critical_path": _path_ends(rep)}
    return flow.metrics(rep, "fpga.ulx3s_85f.phase", None, config)


if __name__ == "__main__":
    for rec in (fpga() if "--fpga" in sys.argv[1:] else measure()):
        print(f"{rec['name']}: {rec['value']} {rec['unit']}  {rec['config']}")
