"""Documentation that mirrors or is generated from a source stays in step with it."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_CONTRACT = ROOT.parent / "shared" / "spec" / "contracts.md"


@pytest.mark.skipif(not SHARED_CONTRACT.is_file(), reason="no ../shared/spec/contracts.md beside this checkout")
def test_contract_mirror_is_current():
    mirror = (ROOT / "docs" / "contracts.md").read_text()
    assert SHARED_CONTRACT.read_text().strip() in mirror, \
        "docs/contracts.md is stale: copy ../shared/spec/contracts.md into it"


def test_every_block_has_its_pieces():
    """One block = hdl/<name>.py, models/<name>.py, tb/<name>/, docs/<name>.md."""
    for hdl in sorted((ROOT / "hdl").glob("*.py")):
        name = hdl.stem
        if name.startswith("_") or name in ("generate",):
            continue
        for piece in (ROOT / "models" / f"{name}.py", ROOT / "tb" / name, ROOT / "docs" / f"{name}.md"):
            assert piece.exists(), f"block '{name}' has hdl/{name}.py but no {piece.relative_to(ROOT)}"
