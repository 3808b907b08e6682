"""cxlkv: policy logic of a KV-cache-aware CXL 3.0 Type-3 memory controller.

Subpackages: cxlkv.hdl (Amaranth gateware), cxlkv.models (golden models),
cxlkv.tb (cocotb benches and benchmarks), cxlkv.sw (driver and CLI).
"""
import contextlib
import os
from pathlib import Path

__version__ = "0.1.0"


def repo_root() -> Path | None:
    """The source checkout this package runs from (editable install), else None."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def build_dir() -> Path:
    """Where generated Verilog, simulator builds and bench.json go.

    ``CXLKV_BUILD`` overrides; otherwise ``build/`` of the checkout, or of the
    current directory for a non-editable install.
    """
    if "CXLKV_BUILD" in os.environ:
        return Path(os.environ["CXLKV_BUILD"]).resolve()
    return (repo_root() or Path.cwd()) / "build"


@contextlib.contextmanager
def patched_environ(values: dict):
    """Set environment variables for the duration of a block, then restore them exactly."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
