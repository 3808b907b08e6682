"""fpga.<board>.*: fmax and utilisation from nextpnr-ecp5, for the board tops and the scoring pipeline alone.

Three place-and-route runs (10 to 15 minutes each on the 2-core machine, one at a time):

* the ULX3S board top (UART bridge with its event path + Controller in the board's
  configuration, the tracker on chip: hdl/boards/ulx3s.py; PLL
  constrained at 125 MHz, the goal): ``fpga.ulx3s_85f.fmax_mhz`` for the core
  clock and ``fpga.ulx3s_85f.{lut,ff,bram,dsp}_pct``; its LFE5U-85F is the -6 grade;
* the same board top on the ECPIX-5 85F (the same controller, the ECPIX-5's pins and
  100 MHz oscillator; its LFE5UM5G-85F is the -8 grade): ``fpga.ecpix5_85f.*``;
* cxlkv.hdl.scoring.ScoringPipeline alone between registers
  (cxlkv.hdl.boards.timing): ``fpga.ulx3s_85f.scoring.*``, since the 125 MHz goal
  is one event per clock through it.

The constraint is the goal, not a requirement: the runs allow a timing
failure, so the figure is what nextpnr achieved. Each metric's config names
the critical path's end points. Builds: build/fpga/bench-*/.
"""
from cxlkv import build_dir
from cxlkv.sw import fpga

BOARD = "ulx3s-85f"
#: the board tops measured, in this order (docs/fpga.md, "Figures")
BOARDS = (BOARD, "ecpix5-85f")
GOAL_MHZ = 125.0
#: a board top is placed and routed with nextpnr's own seed; when the router stalls there
#: (fpga.RouterStalled), with these, in order. The metric's config names the seed that routed
#: (``nextpnr_seed``) and those that stalled (``router_stalled_seeds``)
RETRY_SEEDS = (2, 3, 4)


def _prefix(board):
    """The bench names' prefix of a board: ``fpga.ulx3s_85f`` for ``ulx3s-85f``."""
    return f"fpga.{board.replace('-', '_')}"


def _path_ends(rep):
    """'source -> sink' cell names of the critical path, for the metric's config."""
    src = next((ln.split("Source", 1)[1].strip() for ln in rep.critical_path if "Source" in ln), "?")
    sink = next((ln.split("Sink", 1)[1].strip() for ln in reversed(rep.critical_path) if "Sink" in ln), "?")
    return f"{src} -> {sink}"


def measure_board(board=BOARD):
    """``fpga.<board>.*``: the board top at the goal's clock; build: build/fpga/bench-<board>/."""
    tim, config = fpga.build_board(board, GOAL_MHZ, 115200, None, build_dir() / "fpga" / f"bench-{board}",
                                   allow_timing_fail=True, retry_seeds=RETRY_SEEDS)
    rep = fpga.parse_report(tim.read_text())
    return fpga.metrics(rep, _prefix(board), None, {**config, "critical_path": _path_ends(rep)})


def measure_block(name, make_block, design, board=BOARD, goal_mhz=GOAL_MHZ, script_after_read=""):
    """``fpga.<board>.<name>.*``: ``make_block()`` alone between registers (hdl/boards/timing.py)
    on ``board``, PLL constrained at ``goal_mhz``; ``design`` describes it in the config. The
    blocks' own ``--fpga`` runs (tb/<block>/bench.py) use this too. Build: build/fpga/bench-<board>-<name>/.
    ``script_after_read``: Yosys commands after reading the design (``fpga.YOSYS_AFTER_READ``: the
    board top's one-hot state machines, to time a block as it is built in the board top)."""
    from cxlkv.hdl.boards import get_board
    from cxlkv.hdl.boards.timing import TimingTop
    top = TimingTop(get_board(board), make_block, core_mhz=goal_mhz)
    tim = fpga._board_build(board, top, build_dir() / "fpga" / f"bench-{board}-{name}", allow_timing_fail=True,
                            script_after_read=script_after_read)
    rep = fpga.parse_report(tim.read_text())
    config = {"board": board, "design": f"{design} between registers (hdl/boards/timing.py)",
              "core_mhz_target": goal_mhz, "critical_path": _path_ends(rep)}
    return fpga.metrics(rep, f"{_prefix(board)}.{name}", None, config)


def measure_scoring():
    from cxlkv.hdl.scoring import ScoringPipeline
    return measure_block("scoring", lambda: ScoringPipeline(id_width=32), "ScoringPipeline(id_width=32)")


def measure():
    return [m for board in BOARDS for m in measure_board(board)] + measure_scoring()
