"""Find the per-block pieces by convention, so adding a block touches no shared file.

* ``cxlkv.hdl.<block>`` may define ``verilog_tops() -> {name: factory}``: the
  configurations ``make verilog`` generates and ``make lint`` checks.
* ``cxlkv.tb.<block>`` (a package) may define ``BENCHES``: the cocotb bench
  configurations ``make sim`` and the test suite run.
* ``cxlkv.tb.<block>.bench`` may define ``measure() -> list[metric dict]``:
  what ``make bench`` runs.
"""
import importlib
import pkgutil


def _submodules(package_name):
    pkg = importlib.import_module(package_name)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield info


def verilog_tops() -> dict:
    tops = {}
    for info in _submodules("cxlkv.hdl"):
        mod = importlib.import_module(f"cxlkv.hdl.{info.name}")
        if callable(getattr(mod, "verilog_tops", None)) and mod.__name__ != "cxlkv.hdl.generate":
            tops.update(mod.verilog_tops())
    return tops


def cocotb_benches() -> list:
    benches = []
    for info in _submodules("cxlkv.tb"):
        if info.ispkg:
            mod = importlib.import_module(f"cxlkv.tb.{info.name}")
            benches += list(getattr(mod, "BENCHES", ()))
    return benches


def tb_modules(leaf: str) -> list:
    """``cxlkv.tb.<block>.<leaf>`` of every bench package that has one (``bench``: ``make bench``,
    ``formal``: ``make formal``); an import error inside one is raised, not skipped."""
    mods = []
    for info in _submodules("cxlkv.tb"):
        if info.ispkg:
            try:
                mods.append(importlib.import_module(f"cxlkv.tb.{info.name}.{leaf}"))
            except ModuleNotFoundError as exc:
                if exc.name != f"cxlkv.tb.{info.name}.{leaf}":
                    raise
    return mods


def bench_modules() -> list:
    return tb_modules("bench")
