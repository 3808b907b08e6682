"""``make formal``: run every block's SymbiYosys proofs and print one table, property -> status.

A block takes part by having ``cxlkv.tb.<block>.formal`` with ``JOBS`` (each with
``name``, ``invariant``, ``mode``, ``depth``, ``summary``) and ``run_job(job, workdir)``
returning ``(status, seconds, jobdir)``. Jobs run under ``build/formal/<block>/``;
each keeps its ``.sby``, the RTLIL and the solver logs (counterexample traces
included) there. Exit status 1 unless every job passes.
"""
import argparse
import importlib
import pkgutil
import sys
import time

from cxlkv import build_dir


def formal_modules():
    import cxlkv.tb as tb
    mods = []
    for info in sorted(pkgutil.iter_modules(tb.__path__), key=lambda i: i.name):
        if not info.ispkg or info.name.startswith("_"):
            continue
        try:
            mods.append(importlib.import_module(f"cxlkv.tb.{info.name}.formal"))
        except ModuleNotFoundError as exc:
            if exc.name != f"cxlkv.tb.{info.name}.formal":
                raise
    return mods


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cxlkv.tb.formal", description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="job names (or block names) to run")
    args = ap.parse_args(argv)
    rows, failed = [], 0
    t0 = time.monotonic()
    for mod in formal_modules():
        block = mod.__name__.split(".")[-2]
        for job in mod.JOBS:
            if args.only and job.name not in args.only and block not in args.only:
                continue
            status, seconds, jobdir = mod.run_job(job, build_dir() / "formal" / block)
            bound = f"k={job.depth}" if job.mode == "prove" else f"depth {job.depth}"
            how = {"prove": "k-induction", "bmc": "bounded", "cover": "cover"}[job.mode]
            rows.append((block, job.name, job.invariant, f"{how} ({bound})", status, f"{seconds:.1f} s"))
            failed += status != "PASS"
            print(f"[{block}] {job.name}: {status} in {seconds:.1f} s ({jobdir})", file=sys.stderr)
    header = ("block", "property", "invariant", "method", "status", "time")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    print(f"\n{len(rows) - failed} passed, {failed} failed  ({time.monotonic() - t0:.0f} s)")
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
