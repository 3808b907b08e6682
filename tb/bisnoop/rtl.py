"""Run scenario files through the RTL: the ``--rtl`` path of ``cxlkv bisnoop run``.

All files go through one simulation of the cocotb bench (one cached Verilator build),
each from a clean slate; the bench writes the RTL's output lines to a JSON file.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from cxlkv.errors import CxlkvError


def run_scenarios_rtl(paths) -> tuple[dict, bool, Path]:
    """{path: [output JSON line, ...]}, whether the bench passed (RTL == model), the run directory."""
    from cxlkv.tb.bisnoop import BENCHES
    from cxlkv.tb.runner import run

    paths = [str(Path(p).resolve()) for p in paths]
    with tempfile.TemporaryDirectory(prefix="cxlkv-bisnoop-") as tmp:
        out = Path(tmp) / "rtl.json"
        result = run(BENCHES[0], testcase="test_directed_scenarios",
                     env={"CXLKV_BISNOOP_SCENARIOS": os.pathsep.join(paths), "CXLKV_BISNOOP_OUT": str(out)})
        if not out.is_file():
            raise CxlkvError(f"the RTL simulation produced no output; see {result.build_dir}/sim.log")
        lines = json.loads(out.read_text())
    return {p: lines[p] for p in paths}, result.passed, result.build_dir
