"""``make bench``: run every benchmark, merge the figures into build/bench.json, print a table.

bench.json maps a dotted name (``ema.events_per_cycle``) to
``{"value": number, "unit": "...", "config": {...}}`` (../shared/spec/contracts.md).
Figures from earlier runs that this run did not measure are kept. Benchmarks
measure; they never fail because a machine is slow.
"""
import argparse
import json
import platform
import sys
import time
from pathlib import Path

from cxlkv import build_dir, discover


def merge(path: Path, metrics: dict) -> dict:
    data = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            print(f"bench: {path} was not valid JSON; starting afresh", file=sys.stderr)
    data.update(metrics)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(sorted(data.items())), indent=2) + "\n")
    return data


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cxlkv.tb.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=build_dir() / "bench.json")
    ap.add_argument("--only", nargs="*", help="benchmark modules to run, by block name (e.g. scoring)")
    args = ap.parse_args(argv)
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
    merge(args.out, measured)
    w = max([len(k) for k in measured] + [6])
    print(f"{'metric'.ljust(w)}  value")
    for name, m in sorted(measured.items()):
        cfg = ", ".join(f"{k}={v}" for k, v in m["config"].items() if k not in host)
        print(f"{name.ljust(w)}  {m['value']} {m['unit']}  ({cfg})")
    print(f"written to {args.out}")
    for e in errors:
        print(f"bench: FAILED {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
