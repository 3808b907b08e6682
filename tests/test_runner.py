"""The bench runner: the Verilator builds' cache keys (what the compiler gets is what the key holds),
how a run's results are read, and the suite's time limit."""
from pathlib import Path

from cxlkv.tb.runner import VERILATOR_MAKE_FLAGS, compiler_make_flags


def test_the_key_holds_the_flags_verilator_env_adds():
    flags = compiler_make_flags({"PATH": "/usr/bin"})
    assert set(VERILATOR_MAKE_FLAGS) <= set(flags)
    assert "CFG_CXXFLAGS_PCH_I=-include" in flags
    assert flags == sorted(flags)


def test_a_callers_compiler_setting_wins_and_the_jobserver_is_left_out():
    env = {"PATH": "/usr/bin", "MAKEFLAGS": "-j2 --jobserver-auth=3,4 OPT_FAST=-O3"}
    flags = compiler_make_flags(env)
    assert "OPT_FAST=-O3" in flags and "OPT_FAST=-O1" not in flags
    assert not any("jobserver" in f or f == "-j2" for f in flags)
    assert env["MAKEFLAGS"] == "-j2 --jobserver-auth=3,4 OPT_FAST=-O3"   # the caller's env is not changed


def test_every_slow_first_entry_names_a_collected_test():
    """tests/conftest.py's SLOW_FIRST table goes stale silently when a test is renamed: each entry
    must still name a test of the suite."""
    import subprocess
    import sys
    from pathlib import Path

    from conftest import SLOW_FIRST

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "tests"],
                         cwd=root, capture_output=True, text=True, check=True).stdout.splitlines()
    stale = [prefix for prefix in SLOW_FIRST if not any(line.startswith(prefix) for line in out)]
    assert not stale, f"SLOW_FIRST names no collected test: {stale}"


def test_results_file_tells_pass_fail_and_skip_apart(tmp_path):
    """A skipped cocotb test is neither a pass nor a failure, and a run whose tests were all
    skipped has not passed: a bench whose tests stop running must not read as green."""
    from cxlkv.tb.runner import BenchRun, _parse_results
    xml = tmp_path / "results.xml"
    xml.write_text('<testsuites><testsuite name="t">'
                   '<testcase name="ran" time="1.5" sim_time_ns="10"/>'
                   '<testcase name="broke"><failure message="boom"/></testcase>'
                   '<testcase name="crashed"><error message="oops"/></testcase>'
                   '<testcase name="not_here"><skipped/></testcase>'
                   '</testsuite></testsuites>')
    res = _parse_results(xml)
    assert [(r.name, r.status) for r in res] == [("ran", "PASS"), ("broke", "FAIL"), ("crashed", "FAIL"),
                                                  ("not_here", "SKIP")]
    assert [r.message for r in res] == ["", "boom", "oops", "skipped"]
    run = lambda rs: BenchRun("b", "c", rs, tmp_path)  # noqa: E731
    assert not run(res).passed                               # a failure
    assert run([res[0], res[3]]).passed and run([res[0], res[3]]).skipped == ["not_here"]
    assert not run([res[3]]).passed                          # all skipped: nothing checked
    assert not run([]).passed


def test_a_hung_simulator_fails_its_test_and_is_killed(tmp_path):
    """The suite's per-test time limit (pyproject's ``timeout``, pytest-timeout) turns a bench whose
    simulator never finishes into a failed test, and the simulator's process dies with it (the
    runner starts it with subprocess.run, which kills its child when the wait is interrupted)."""
    import os
    import subprocess
    import sys
    import time
    import tomllib
    ini = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert ini["tool"]["pytest"]["ini_options"]["timeout"] > 0, "the suite has no per-test time limit"
    pidfile = tmp_path / "sim.pid"
    child = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    (tmp_path / "test_hang.py").write_text(
        "import subprocess, sys\n"
        "def test_hang():\n"
        f"    subprocess.run([sys.executable, '-c', {child!r}])\n")
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "3",
                          "-o", "addopts=", str(tmp_path / "test_hang.py")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=90)
    assert out.returncode == 1 and "Timeout" in out.stdout, out.stdout[-2000:]
    assert time.monotonic() - t0 < 60
    pid = int(pidfile.read_text())
    for _ in range(50):                     # reaped by subprocess.run's kill; allow the kernel a moment
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        raise AssertionError("the hung child outlived its timed-out test")


def test_must_fail_needs_the_check_to_fail_on_the_corruption():
    """A negative test passes only when the check fails because it found a mismatch: a check that
    passes, or fails for another reason (nothing compared), has not shown it can catch anything."""
    import logging

    import pytest

    from cxlkv.tb.common import must_fail
    log = logging.getLogger("t")

    def found():
        raise AssertionError("sb: 1 mismatches of 40\n  #3: expected 1, got 2")

    def empty():
        raise AssertionError("sb: nothing was compared")

    def passes():
        pass
    must_fail(found, "a corrupted prediction", log)
    with pytest.raises(AssertionError, match="failed, but not on a corrupted prediction"):
        must_fail(empty, "a corrupted prediction", log)
    with pytest.raises(AssertionError, match=r"passes\(\) passed despite"):
        must_fail(passes, "a corrupted prediction", log)
    must_fail(empty, "an empty run", log, match="nothing was compared")


def test_assert_caught_one_wants_the_corruption_and_nothing_else():
    import pytest

    from cxlkv.tb.common import InOrderScoreboard

    def board(expected, actual):
        sb = InOrderScoreboard("sb")
        for e in expected:
            sb.expect(e)
        for a in actual:
            sb.actual(a)
        return sb
    board([1, 2, 3], [1, 9, 3]).assert_caught_one(index=1)
    with pytest.raises(AssertionError, match="the mismatch is at 1, not 2"):
        board([1, 2, 3], [1, 9, 3]).assert_caught_one(index=2)
    with pytest.raises(AssertionError, match="1 predictions never arrived"):
        board([1, 2, 3], [1, 9]).assert_caught_one(index=1)
    with pytest.raises(AssertionError, match="expected exactly one mismatch, saw 0"):
        board([1, 2], [1, 2]).assert_caught_one()


def test_stream_stability_flags_a_changed_payload_or_a_dropped_valid_while_stalled():
    """The stream rule checker (tb/common.py StreamStability), cycle by cycle: a payload that changes,
    or a valid that falls, in a cycle after one with valid high and ready low is a violation; the same
    after a handshake, with ready high, or across a reset is not."""
    import pytest

    from cxlkv.tb.common import StreamStability

    def feed(cycles, reset_at=()):
        chk = StreamStability("s")
        for t, (valid, ready, payload) in enumerate(cycles):
            chk.reset() if t in reset_at else chk.observe(t, valid, ready, payload)
        return chk
    legal = [(1, 0, 5), (1, 0, 5), (1, 1, 5),      # held until taken
             (1, 1, 6), (1, 1, 7), (0, 1, 9),      # a new payload every handshake; valid falls after one
             (0, 0, 3), (1, 0, 4), (1, 0, 4), (1, 1, 4),   # valid rises with any payload; ready low without valid
             (1, 0, 8), (0, 0, 0), (1, 0, 2)]     # a stall across a reset (index 11) ends there
    ok = feed(legal, reset_at={11})
    ok.check()
    assert ok.errors == 0 and ok.stalled == 6 and ok.checked == 4 and ok.handshakes == 4
    bad = feed([(1, 0, 5), (1, 0, 6), (1, 0, 5), (0, 0, 5), (1, 1, 1)])
    assert [(v.index, v.seen) for v in bad.violations] == [(0, 6), (2, "valid dropped")]
    bad.assert_caught([0, 2])
    with pytest.raises(AssertionError, match="expected violations at \\[0\\], saw 2"):
        bad.assert_caught([0])
    with pytest.raises(AssertionError, match="2 stalled cycles broke the stream rule"):
        bad.check()
    planted = StreamStability("s", corrupt_at=1)        # the negative tests' hook: checked cycle 1 altered
    for t, c in enumerate([(1, 0, 4), (1, 0, 4), (1, 0, 4), (1, 1, 4)]):
        planted.observe(t, *c)
    planted.assert_caught([1])
