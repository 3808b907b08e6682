"""The Verilator builds' cache keys: what the compiler gets is what the key holds."""
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
