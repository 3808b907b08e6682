"""Prefetch figures of the policy simulator: accuracy, extra bytes and hit-rate gain per trace and W.

    .venv/bin/python -m cxlkv.tb.prefetch.policy_figures [--windows 1,2,4,8] [--budgets 10,20,30]
                     [--triggers read,miss] [--out build/prefetch-figures]

For every trace (each synthetic family at the default geometry and seed 0, and every access
trace in traces/*.npz), budget and W, replays ``hw`` with prefetch (the rule of
``models/prefetch.py``) and compares with ``hw`` without prefetch and with MIN. Writes
``OUT/prefetch.csv`` and ``OUT/prefetch.md`` (the tables of ``docs/policy.md``).

Columns: ``hit`` hit rate; ``gain`` = hit rate − hit rate of ``hw`` without prefetch;
``min`` MIN's hit rate (the ceiling without prefetch); ``acc`` prefetch accuracy =
prefetch_hits / prefetches; ``pf/fill`` = prefetch bytes ÷ demand-fill bytes of the same run;
``bytes×`` = bytes moved ÷ bytes moved by ``hw`` without prefetch.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path


def sources():
    from cxlkv import repo_root
    from cxlkv.models import tracegen
    from cxlkv.models.trace import load_trace
    out = [(f"synth-{f}", lambda f=f: tracegen.synth(f, seed=0)) for f in tracegen.FAMILIES]
    root = repo_root() or Path.cwd()
    for path in sorted((root / "traces").glob("*.npz")):
        out.append((path.stem, lambda p=path: load_trace(p)))
    return out


def measure(windows, budgets, triggers, log=print, traces=None):
    """One row per (trace, budget, trigger, W); ``traces`` [(label, loader)] defaults to :func:`sources`."""
    from cxlkv.models import policy as P
    from cxlkv.models import prefetch as PF
    trig = {"read": PF.TRIGGER_READ, "miss": PF.TRIGGER_MISS}
    rows = []
    for label, load in (traces if traces is not None else sources()):
        trace = load()
        for pct in budgets:
            c = P.entries_from_budget(trace, pct)
            mn = P.replay(trace, "min", c).summary()["hit_rate"]
            base = P.replay(trace, "hw", c).summary()
            for tname in triggers:
                for w in windows:
                    s = P.replay(trace, "hw", c, window=w, prefetch_trigger=trig[tname]).summary()
                    row = {"trace": label, "budget_pct": pct, "entries": c, "trigger": tname, "window": w,
                           "hit": s["hit_rate"], "gain": s["hit_rate"] - base["hit_rate"], "hw_w0": base["hit_rate"],
                           "min": mn, "acc": s["prefetch_accuracy"], "prefetches": s["prefetches"],
                           "prefetch_hits": s["prefetch_hits"],
                           "pf_per_fill": s["prefetch_bytes"] / s["demand_bytes"] if s["demand_bytes"] else 0.0,
                           "bytes_x": s["bytes_moved"] / base["bytes_moved"] if base["bytes_moved"] else 0.0}
                    rows.append(row)
                    log(f"{label} {pct}% {tname} W={w}: hit {row['hit']:.3f} (hw {base['hit_rate']:.3f}, "
                        f"min {mn:.3f}) acc {row['acc']:.3f} bytes x{row['bytes_x']:.2f}")
    return rows


def markdown(rows, budgets, triggers):
    """Compact tables: the baselines (hw W=0, MIN) per trace and budget, then per trigger one row
    per (trace, W) with gain / accuracy / bytes× per budget."""
    traces = list(dict.fromkeys(r["trace"] for r in rows))
    windows = list(dict.fromkeys(r["window"] for r in rows))
    at = {(r["trace"], r["budget_pct"], r["trigger"], r["window"]): r for r in rows}
    head = " | ".join(f"{b}%" for b in budgets)
    lines = ["Hit rate without prefetch: `hw` (W = 0) / MIN", "",
             f"| trace | {head} |", "| --- |" + " --- |" * len(budgets)]
    for t in traces:
        cells = []
        for b in budgets:
            r = at[(t, b, triggers[0], windows[0])]
            cells.append(f"{r['hw_w0']:.3f} / {r['min']:.3f}")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines.append("")
    for tname in triggers:
        lines += [f"Trigger: {'every read' if tname == 'read' else 'demand misses'}. "
                  "Each cell: hit-rate gain over `hw` W = 0 / prefetch accuracy / bytes moved ÷ `hw` W = 0's", "",
                  f"| trace | W | {head} |", "| --- | --- |" + " --- |" * len(budgets)]
        for t in traces:
            for w in windows:
                cells = []
                for b in budgets:
                    r = at[(t, b, tname, w)]
                    cells.append(f"{r['gain']:+.3f} / {r['acc']:.2f} / {r['bytes_x']:.1f}")
                lines.append(f"| {t} | {w} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cxlkv.tb.prefetch.policy_figures",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--windows", default="1,2,4,8")
    ap.add_argument("--budgets", default="10,20,30")
    ap.add_argument("--triggers", default="read,miss")
    ap.add_argument("--out", type=Path, default=Path("build") / "prefetch-figures")
    a = ap.parse_args(argv)
    windows = [int(x) for x in a.windows.split(",")]
    budgets = [float(x) if "." in x else int(x) for x in a.budgets.split(",")]
    triggers = [t.strip() for t in a.triggers.split(",")]
    rows = measure(windows, budgets, triggers)
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / "prefetch.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (a.out / "prefetch.md").write_text(markdown(rows, budgets, triggers))
    print(f"wrote {a.out / 'prefetch.csv'} and {a.out / 'prefetch.md'}")


if __name__ == "__main__":
    main()
