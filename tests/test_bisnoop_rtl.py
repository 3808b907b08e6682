"""Every directed BI-snoop scenario through the RTL (`cxlkv bisnoop run --rtl` path), in one
simulation: the RTL's output lines are identical to the golden model's."""
import json
from pathlib import Path

import pytest

from cxlkv.models import bisnoop as M

SCENARIOS = sorted((Path(__file__).resolve().parent.parent / "tb" / "bisnoop" / "scenarios").glob("*.jsonl"))


@pytest.mark.cocotb
def test_directed_scenarios_rtl_equals_model():
    from cxlkv.tb.bisnoop.rtl import run_scenarios_rtl
    results, passed, rundir = run_scenarios_rtl(SCENARIOS)
    dw = M.SCENARIO_CONFIG["data_width"]
    for path in SCENARIOS:
        want = M.scenario_lines(M.run_model(M.parse_scenario(path.read_text(), dw, path.name))[0], dw)
        got = results[str(path.resolve())]
        assert got == want, f"{path.name}: RTL differs from the model (logs: {rundir})"
        assert all(json.loads(line)["ch"] in M.OUT_CHANNELS for line in got)
    assert passed, f"the bench failed (counters, status or scoreboards); logs: {rundir}"


@pytest.mark.cocotb
def test_cli_rtl_path(capsys):
    from cxlkv.sw import cli
    path = next(p for p in SCENARIOS if p.stem.startswith("err05"))
    assert cli.main(["bisnoop", "run", "--rtl", str(path)]) == 0
    rtl = capsys.readouterr().out
    assert cli.main(["bisnoop", "run", str(path)]) == 0
    assert rtl == capsys.readouterr().out and '"kind": "timeout"' in rtl
