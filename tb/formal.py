"""``make formal``: run every block's SymbiYosys proofs and print one table, property -> status.

A block takes part by having ``cxlkv.tb.<block>.formal`` with ``JOBS`` (each with
``name``, ``invariant``, ``mode``, ``depth``, ``summary``) and ``run_job(job, workdir)``
returning ``(status, seconds, jobdir)``. Jobs run under ``build/formal/<block>/``;
each keeps its ``.sby``, the RTLIL and the solver logs (counterexample traces
included) there. Exit status 1 unless every job passes.
"""
import argparse
import sys
import time

from cxlkv import build_dir, discover
from cxlkv.tb.regress import print_summary


def formal_modules():
    return discover.tb_modules("formal")


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
    print_summary(("block", "property", "invariant", "method", "status", "time"), rows, len(rows) - failed, failed,
                  time.monotonic() - t0)
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
