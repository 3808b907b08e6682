"""``make sim``: build every block's cocotb bench on Verilator, run it against the golden
model, and print one summary table. Exit status 1 if anything failed.

Options pass through the environment: WAVES=1 (FST waveforms), CXLKV_SEED,
and each bench's own knobs (e.g. CXLKV_EVENTS); ``--only NAME`` limits the run.
"""
import argparse
import sys
import time

from cxlkv import discover
from cxlkv.tb.runner import run


def print_summary(header, rows, passed, failed, seconds, skipped=0):
    """The table ``make sim`` and ``make formal`` end with: ``header`` and ``rows`` in aligned
    columns, then the pass/fail count and the time taken."""
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    print(f"\n{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else "") + f"  ({seconds:.0f} s)")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cxlkv.tb.regress", description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="bench names to run (default: all)")
    args = ap.parse_args(argv)
    rows, failed = [], 0
    t0 = time.monotonic()
    for bench in discover.cocotb_benches():
        if args.only and bench.name not in args.only:
            continue
        t = time.monotonic()
        try:
            result = run(bench)
        except Exception as exc:  # a build failure is a failed row, not a crash of the whole regression
            rows.append((bench.name, bench.config_id, "(build)", "ERROR", f"{type(exc).__name__}: {exc}"[:80]))
            failed += 1
            continue
        if not result.results:
            rows.append((bench.name, bench.config_id, "(run)", "ERROR", f"no results; see {result.build_dir}/sim.log"))
            failed += 1
        for r in result.results:
            rows.append((bench.name, bench.config_id, r.name, r.status,
                         f"{r.real_time_s:.1f} s" if r.passed else r.message[:80]))
            failed += r.failed
        if result.results and not any(r.passed for r in result.results):
            rows.append((bench.name, bench.config_id, "(run)", "ERROR", "every test was skipped: nothing was checked"))
            failed += 1
        for name, m in result.metrics.items():
            rows.append((bench.name, bench.config_id, f"metric {name}", "", f"{m['value']} {m['unit']}"))
        print(f"[{bench.name}/{bench.config_id}] {time.monotonic() - t:.1f} s, logs in {result.build_dir}",
              file=sys.stderr)
    tests = sum(1 for r in rows if r[3] in ("PASS", "FAIL", "ERROR"))
    skipped = sum(1 for r in rows if r[3] == "SKIP")
    print_summary(("bench", "config", "test", "result", "detail"), rows, tests - failed, failed, time.monotonic() - t0,
                  skipped)
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
