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
    from cxlkv import build_dir
    from cxlkv.hdl.boards import get_board
    from cxlkv.hdl.boards.timing import TimingTop
    from cxlkv.hdl.hdm import Hdm
    from cxlkv.sw import fpga as flow
    from cxlkv.tb.fpga.bench import _path_ends

    def make():
        return Hdm(n_layers=80, n_kv_heads=8, n_positions=131072, addr_width=52)
    top = TimingTop(get_board(BOARD), make, core_mhz=GOAL_MHZ)
    tim = flow._board_build(BOARD, top, build_dir() / "fpga" / f"bench-{BOARD}-hdm", allow_timing_fail=True)
    rep = flow.parse_report(tim.read_text())
    config = {"board": BOARD, "design": "Hdm(80, 8, 131072, addr_width=52, hint_depth=8) between registers",
              "core_mhz_target": GOAL_MHZ, "critical_path": _path_ends(rep)}
    return flow.metrics(rep, "fpga.ulx3s_85f.hdm", None, config)


if __name__ == "__main__":
    for rec in (fpga() if "--fpga" in sys.argv[1:] else measure()):
        print(f"{rec['name']}: {rec['value']} {rec['unit']}  {rec['config']}")
