"""``make bench``: run every benchmark, merge the figures into build/bench.json, print a table.

bench.json maps a dotted name (``ema.events_per_cycle``) to
``{"value": number, "unit": "...", "config": {...}}`` (../shared/spec/contracts.md).
Figures from earlier runs that this run did not measure are kept, and the table
shows them all, marked "this" or "earlier"; a bench.json that is not a JSON object
is refused before anything runs, not overwritten. Benchmarks measure; they never
fail because a machine is slow.
"""
import argparse
import json
import platform
import sys
import time
from pathlib import Path

from cxlkv import build_dir, discover


class BenchFileError(Exception):
    """An existing bench.json this run cannot merge into without losing what it holds."""


def read_existing(path: Path) -> dict:
    """The figures ``path`` holds (none if it does not exist); a file that is not a JSON object of
    figures is refused before any benchmark runs, rather than overwritten (its figures would be lost)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BenchFileError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BenchFileError(f"{path} holds a JSON {type(data).__name__}, not an object of figures")
    return data


def merge(path: Path, metrics: dict, existing: dict | None = None) -> dict:
    """``existing`` (read from ``path`` when not given) updated with ``metrics``, written to ``path``."""
    data = dict(read_existing(path) if existing is None else existing)
    data.update(metrics)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(sorted(data.items())), indent=2) + "\n")
    return data


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cxlkv.tb.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=build_dir() / "bench.json")
    ap.add_argument("--only", nargs="*", help="benchmark modules to run, by block name (e.g. scoring)")
    args = ap.parse_args(argv)
    try:
        existing = read_existing(args.out)
    except BenchFileError as exc:
        print(f"bench: error: {exc}; move it aside or delete it (nothing was run)", file=sys.stderr)
        return 2
    measured, errors = {}, []
    host = {"host": platform.node(), "python": platform.python_version(), "machine": platform.machine()}
    for mod in discover.bench_modules():
        block = mod.__name__.split(".")[-2]
        if args.only and block not in args.only:
            continue
        t0 = time.monotonic()
        try:
            results = mod.measure()
        except Exception as exc:  # report and go on: one broken benchmark must not hide the others
            errors.append(f"{block}: {type(exc).__name__}: {exc}")
            continue
        for m in results:
            measured[m["name"]] = {"value": m["value"], "unit": m["unit"],
                                   "config": {**m.get("config", {}), **host}}
        print(f"[{block}] {time.monotonic() - t0:.1f} s", file=sys.stderr)
    merged = merge(args.out, measured, existing)
    # the table is the file, as the contract says: this run's figures and the earlier ones it kept
    w = max([len(k) for k in merged] + [6])
    print(f"{'metric'.ljust(w)}  run       value")
    for name, m in sorted(merged.items()):
        cfg = ", ".join(f"{k}={v}" for k, v in (m.get("config") or {}).items() if k not in host)
        run = "this" if name in measured else "earlier"
        print(f"{name.ljust(w)}  {run.ljust(8)}  {m.get('value')} {m.get('unit', '')}  ({cfg})")
    print(f"written to {args.out}")
    for e in errors:
        print(f"bench: FAILED {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
