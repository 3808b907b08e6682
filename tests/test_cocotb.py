"""Every block's cocotb bench on Verilator, in every configuration it declares (cxlkv.tb.<block>.BENCHES).

Builds are cached under build/sim/, so only the first run of a configuration compiles.
"""
import pytest

from cxlkv import discover
from cxlkv.tb.runner import run

BENCHES = discover.cocotb_benches()


@pytest.mark.cocotb
@pytest.mark.parametrize("bench", BENCHES, ids=[f"{b.name}-{b.config_id}" for b in BENCHES])
def test_cocotb_bench(bench):
    result = run(bench)
    assert result.results, f"no test results; see {result.build_dir}/sim.log"
    failed = [f"{r.name}: {r.message}" for r in result.results if not r.passed]
    assert not failed, "\n".join(failed) + f"\nlogs: {result.build_dir}"
