"""`cxlkv policy`: replay KV access traces through eviction/prefetch policies; sweep budgets."""

HELP = "policy simulator: replay a trace through lru/min/h2o/tova/streaming/ema/ema+prefetch/hw; sweep budgets"

#: Kept here (not imported from cxlkv.models.policy) so that --help imports neither numpy nor numba.
POLICIES = ("lru", "min", "h2o", "tova", "streaming", "ema", "ema+prefetch", "hw")

_PARAM_HELP = """\
policy parameters (--param NAME=VALUE, integers but for the step-time model's four, which take
any positive number; UQ0.16 means 0..65535 for 0..1):
  h2o_recent=50         h2o: percent of the budget kept for the newest positions (H2O's recent
                        window; 0: accumulated attention alone)
  sinks=4               streaming: positions 0..sinks-1 kept
  ema_alpha=6554        ema, ema+prefetch: EMA weight (UQ0.16; seed: 0.1)
  ema_tau=1000          ema, ema+prefetch: recency time constant in steps (seed's example)
  window=0              ema+prefetch (default 4), hw: prefetch [P-W, P+W] on each read
  hw_alpha=16384        hw: EMA weight (UQ0.16)
  hw_tau=8              hw: EMA decay time constant between accesses, steps
  hw_rank_tau=0         hw: deadline time constant, normal mode (0: recency only, exactly LRU)
  hw_rank_tau_long=64   hw: deadline time constant while the queue is dense (0: no dense mode)
  hw_bucket_bits=3      hw: deadline bucket = deadline >> bucket_bits
  hw_pinned=0           hw: positions 0..pinned-1 never evicted
  hw_write_sample=0     hw: sample a write folds into the EMA (UQ0.16)
  hw_read_credit=0      hw: added to each read's sample (UQ0.16, saturating)
  entry_bytes=512       every policy: bytes per entry (bytes moved, modelled step time)
  fast_lat_ns=250       every policy, modelled step time: fast tier (device DRAM over CXL)
                        latency, ns (measured CXL load-to-use: 140-410 ns)
  fast_gbytes_s=64          ... fast tier bandwidth, GB/s = 10^9 bytes/s (a CXL x16 Gen5 link)
  slow_lat_us=50        ... slow tier (flash) read latency, us (an assumption: NAND)
  slow_gbytes_s=14          ... slow tier bandwidth, GB/s (an assumption: a Gen5 x4 SSD)
`policy replay` also takes --param prefetch_trigger_all (only with window > 0, refused otherwise):
1 (default) every read starts a prefetch window, 0 only demand misses (the controller's
PREFETCH.trigger; `ctl replay` takes the same). MIN (Belady) is the most read hits a policy
without prefetch can get on a trace where a position is written only as its first access (an
append: tracegen's traces and the dumps); prefetching policies can exceed it, and it bounds
neither attention recall nor traces that write a position after accessing it. bytes_moved and
demand_bytes count every read miss (fills), also one that bypassed the fast tier (no_victim).
modelled_step_us is an analytic model, not a measurement: per step and layer, max(fast tier:
latency + hits x entry_bytes / bandwidth, slow tier: latency + (misses + prefetches) x
entry_bytes / bandwidth), a tier's latency only if it serves anything; layers summed; the mean
over the steps that read. It leaves out queueing, other traffic on the link, compute overlap and
writes. The exact rules are in docs/policy.md."""

_BUDGET_HELP = ("resident entries per queue: an integer, or a percentage of the trace's context "
                "(max position + 1), e.g. 10%% (rounded up)")


def add_arguments(p):
    import argparse
    sub = p.add_subparsers(dest="policy_cmd", metavar="ACTION", required=True)
    r = sub.add_parser("replay", help="replay one trace through one policy at one budget",
                       description="Replay TRACE through a policy (docs/contracts.md, 'Replay semantics').",
                       epilog=_PARAM_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("trace", metavar="TRACE", help="trace file (.npz, the contract's format)")
    r.add_argument("--policy", required=True, choices=POLICIES, metavar="P", help=", ".join(POLICIES))
    r.add_argument("--entries", required=True, metavar="C", help=_BUDGET_HELP)
    r.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="policy parameter (repeatable)")
    r.add_argument("--json", action="store_true", help="print one JSON object (the contract's keys and more)")
    r.add_argument("--per-queue", action="store_true", help="per-queue figures too (a table, or the JSON's per_queue list)")
    s = sub.add_parser("sweep", help="policies x budgets x traces -> CSV and PNG per trace",
                       description="Replay traces through policies at several budgets (percent of context); "
                                   "write DIR/sweep.csv, DIR/sweep.md (tables), a PNG per trace (hit rate and "
                                   "attention recall against budget, with MIN: Belady's bound on the read hits "
                                   "of policies that do not prefetch, on traces where a position is written only "
                                   "as its first access; not a bound on prefetching policies nor on attention "
                                   "recall) and, for "
                                   "several traces, DIR/sweep.png with all of them. hit_rate_vs_min in the CSV "
                                   "is hit rate / MIN's.",
                       epilog=_PARAM_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--traces", nargs="*", default=None, metavar="TRACE",
                   help="trace files; with neither --traces nor --families: every synthetic family "
                        "(cxlkv.models.tracegen, default geometry, --seed) plus every access trace in "
                        "traces/*.npz of the checkout")
    s.add_argument("--families", default=None, metavar="F1,F2",
                   help="synthetic families to include")
    s.add_argument("--seed", type=int, default=0, help="seed of the synthetic traces (default 0)")
    s.add_argument("--policies", default=",".join(POLICIES), metavar="P1,P2", help="default: all")
    s.add_argument("--budgets", default="5,10,20,30,50", metavar="PCT,...",
                   help="budgets in percent of the context (default 5,10,20,30,50)")
    s.add_argument("--param", action="append", default=[], metavar="[POLICY:]NAME=VALUE",
                   help="policy parameter for every policy that uses it, or for POLICY only (repeatable)")
    s.add_argument("--out", required=True, metavar="DIR", help="output directory")
    s.add_argument("--no-png", action="store_true", help="write the CSV only")


def _params(items):
    from cxlkv.models.policy import TIMING_PARAMS
    from cxlkv.sw.argtypes import name_values
    return name_values(items, "--param", numbers=TIMING_PARAMS)


def _budget(text, trace):
    from cxlkv.errors import CxlkvError
    from cxlkv.models import policy as P
    text = str(text).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            raise CxlkvError(f"--entries: '{text}' is not a percentage") from None
        return P.entries_from_budget(trace, pct)
    try:
        c = int(text)
    except ValueError:
        raise CxlkvError(f"--entries: '{text}' is neither an integer nor a percentage like 10%") from None
    if c < 1:
        raise CxlkvError(f"--entries must be at least 1, got {c}")
    return c


def _params_for(policy, overrides):
    """The overrides that apply to ``policy``: NAME=VALUE goes to every policy that uses NAME,
    POLICY:NAME=VALUE to that policy only (_check_sweep_params has refused any that would apply to none)."""
    from cxlkv.models import policy as P
    used = P.accepted_params(policy, trigger=False)
    out = {k: v for k, v in overrides.items() if ":" not in k and k in used}
    out.update({k.split(":", 1)[1]: v for k, v in overrides.items() if k.startswith(policy + ":")})
    return out


def _check_sweep_params(overrides, policies):
    """Refuse a sweep --param that no swept policy would use: it would be dropped without a word.
    (The sweep sets no prefetch trigger, so prefetch_trigger_all is not taken.)"""
    from cxlkv.errors import CxlkvError
    from cxlkv.models import policy as P
    unused = []
    for key in overrides:
        pol, colon, name = key.rpartition(":")
        if not colon:
            if not any(name in P.accepted_params(p, trigger=False) for p in policies):
                unused.append(name)
        elif pol not in P.POLICIES:
            raise CxlkvError(f"--param {key}: unknown policy '{pol}'; valid policies: {', '.join(P.POLICIES)}")
        elif pol not in policies:
            raise CxlkvError(f"--param {key}: policy '{pol}' is not swept (--policies {','.join(policies)})")
        else:
            try:
                P.refuse_foreign_params(pol, [name], P.accepted_params(pol, trigger=False))
            except CxlkvError as exc:
                raise CxlkvError(f"--param {key}: {exc}") from None
    if unused:
        taken = dict.fromkeys(n for p in policies for n in P.accepted_params(p, trigger=False))
        raise CxlkvError(f"{', '.join(sorted(unused))}: not a parameter of any policy swept ({', '.join(policies)}; "
                         f"their parameters: {', '.join(taken)})")


def run(args):
    if args.policy_cmd == "replay":
        return _replay(args)
    return _sweep(args)


def _replay(args):
    import json

    from cxlkv.errors import CxlkvError
    from cxlkv.models import policy as P
    from cxlkv.models import prefetch as PF
    from cxlkv.models.trace import load_trace
    overrides = _params(args.param)
    # first: a name the policy does not take is refused with the names it does take
    P.refuse_foreign_params(args.policy, overrides, P.accepted_params(args.policy))
    trigger_given = "prefetch_trigger_all" in overrides
    trigger = PF.pop_trigger(overrides)
    params = P.make_params(args.policy, **overrides)
    PF.refuse_trigger_without_window(trigger_given, params.window, f"policy '{args.policy}'")
    trace = load_trace(args.trace)
    entries = _budget(args.entries, trace)
    result = P.replay(trace, args.policy, entries, params=params, prefetch_trigger=trigger)
    s = result.summary(per_queue=args.per_queue)
    s["trace"] = str(args.trace)
    if args.json:
        print(json.dumps(s))
        return 0
    print(f"{args.trace}: {s['events']} events, {s['n_queues']} queues, policy {s['policy']}, "
          f"{entries} entries per queue")
    print(f"reads {s['reads']}  hits {s['read_hits']}  hit rate {s['hit_rate']:.4f}  "
          f"attention recall {s['attention_recall']:.4f}")
    print(f"writes {s['writes']}  fills {s['fills']}  evictions {s['evictions']}  "
          f"prefetches {s['prefetches']} (hits {s['prefetch_hits']}, accuracy {s['prefetch_accuracy']:.3f})")
    print(f"bytes moved {s['bytes_moved']} (demand {s['demand_bytes']}, prefetch {s['prefetch_bytes']})")
    print(f"modelled time per decode step {s['modelled_step_us']:.2f} us (every read from the fast tier "
          f"{s['modelled_step_us_all_fast']:.2f}, from the slow tier {s['modelled_step_us_all_slow']:.2f}; "
          f"mean of {s['modelled_steps']} steps with reads)")
    print(f"  model (docs/policy.md): {timing_label(s)}")
    if s["no_victim"]:
        print(f"misses with no evictable entry (bypassed): {s['no_victim']}")
    if args.per_queue:
        print("layer  head  reads  hits  hit rate  attention recall")
        for r in s["per_queue"]:
            print(f"{r['layer']:5d}  {r['head']:4d}  {r['reads']:5d}  {r['read_hits']:4d}  {r['hit_rate']:8.4f}  "
                  f"{r['attention_recall']:16.4f}")
    return 0


def timing_label(p) -> str:
    """The step-time model's parameters, as the figures state them: ``p`` a summary or its row."""
    return (f"fast tier {p['fast_lat_ns']:.10g} ns, {p['fast_gbytes_s']:.10g} GB/s; slow tier "
            f"{p['slow_lat_us']:.10g} us, {p['slow_gbytes_s']:.10g} GB/s; {p['entry_bytes']} B entries")


def _sweep_sources(args):
    """[(label, family, loader)] of the traces to sweep. Labels are unique: a trace's label names its
    rows in sweep.csv and sweep.md and its PNG, so two traces with one label are refused."""
    import sys
    from pathlib import Path

    from cxlkv import repo_root
    from cxlkv.errors import CxlkvError
    sources = []
    origins = []        # what each source came from, for the message on a repeated label
    families = None
    if args.families:
        families = [f.strip() for f in args.families.split(",") if f.strip()]
    if args.traces is not None and not args.traces:     # not the default sweep: that is --traces left out
        raise CxlkvError("--traces given without any file")
    for path in args.traces or []:
        sources.append((Path(path).stem, "file", lambda p=path: _load(p)))
        origins.append(str(path))
    if not args.traces and families is None:
        # the default sweep: every synthetic family and every shipped access trace
        from cxlkv.models import tracegen
        families = list(tracegen.FAMILIES)
        root = repo_root() or Path.cwd()
        for path in sorted((root / "traces").glob("*.npz")):
            if _is_access_trace(path):
                sources.append((path.stem, "file", lambda p=path: _load(p)))
                origins.append(str(path))
            else:
                print(f"sweep: skipping {path}: not an access trace (no 'step' array; K/V tensors?)",
                      file=sys.stderr)
    if families:
        from cxlkv.models import tracegen
        for f in families:
            if f not in tracegen.FAMILIES:
                raise CxlkvError(f"unknown trace family '{f}'; valid: {', '.join(tracegen.FAMILIES)}")
            sources.append((f"synth-{f}", f, lambda f=f: tracegen.synth(f, seed=args.seed)))
            origins.append(f"--families {f}")
    if not sources:
        raise CxlkvError("nothing to sweep: give --traces or --families")
    first = {}
    for (label, _, _), origin in zip(sources, origins):
        if label in first:
            raise CxlkvError(f"two traces would both be labelled '{label}' in the sweep's files ({first[label]} "
                             f"and {origin}): their rows, tables and sweep_{label}.png could not be told apart; "
                             f"give them different file names")
        first[label] = origin
    return sources


def _is_access_trace(path):
    """Whether an auto-discovered .npz holds events at all (traces/ also holds K/V dumps).
    A file that has events but breaks the contract is still loaded, and refused by load_trace."""
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            return "step.npy" in z.namelist()
    except (OSError, zipfile.BadZipFile):
        return True


def _load(path):
    from cxlkv.models.trace import load_trace
    return load_trace(path)


CSV_FIELDS = ("trace", "family", "policy", "budget_pct", "entries", "events", "reads", "read_hits", "hit_rate",
              "attention_recall", "hit_rate_vs_min", "writes", "fills", "evictions", "prefetches",
              "prefetch_hits", "prefetch_accuracy", "bytes_moved", "no_victim", "params",
              # appended 2026-12-02: the modelled time per decode step and the parameters it used
              "modelled_step_us", "modelled_step_us_all_fast", "modelled_step_us_all_slow", "entry_bytes",
              "fast_lat_ns", "fast_gbytes_s", "slow_lat_us", "slow_gbytes_s")
#: columns written with %g (parameters) rather than six decimals
_CSV_PARAMS = ("fast_lat_ns", "fast_gbytes_s", "slow_lat_us", "slow_gbytes_s")


def sweep(sources, policies, budgets, overrides, out_dir, png=True, log=None):
    """Run the sweep; write out_dir/sweep.csv (+ PNGs). Returns the rows (dicts)."""
    import csv
    import json
    from pathlib import Path

    from cxlkv.errors import CxlkvError
    from cxlkv.models import policy as P
    params = {pol: P.make_params(pol, **_params_for(pol, overrides)) for pol in policies}
    # every trace loaded (and so validated) before the first replay or file: nothing is half-swept
    traces = [(label, family, loader()) for label, family, loader in sources]
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CxlkvError(f"--out {out_dir}: cannot make the directory ({exc.strerror or exc})") from None
    rows = []
    for label, family, trace in traces:
        trows = []
        for pct in budgets:
            entries = P.entries_from_budget(trace, pct)
            # MIN's hit rate (hit_rate_vs_min's denominator), always; with min's own parameters
            # (entry_bytes) when min is swept. It bounds the read hits of demand-only policies on a
            # trace where a position is written only as its first access: prefetching policies can
            # exceed it, and it can be beaten when a position is written after it was accessed
            # (docs/policy.md, "What MIN bounds")
            min_summary = P.replay(trace, "min", entries, params=params.get("min")).summary()
            mn = min_summary["hit_rate"]
            for pol in policies:
                s = min_summary if pol == "min" else P.replay(trace, pol, entries, params=params[pol]).summary()
                row = {"trace": label, "family": family, "policy": pol, "budget_pct": pct, "entries": entries,
                       **{k: s[k] for k in ("events", "reads", "read_hits", "hit_rate", "attention_recall",
                                            "writes", "fills", "evictions", "prefetches", "prefetch_hits",
                                            "prefetch_accuracy", "bytes_moved", "no_victim")},
                       "hit_rate_vs_min": s["hit_rate"] / mn if mn else 0.0,
                       "params": json.dumps(s["params"], sort_keys=True),
                       **{k: s[k] for k in ("modelled_step_us", "modelled_step_us_all_fast",
                                            "modelled_step_us_all_slow", "entry_bytes", *_CSV_PARAMS)}}
                trows.append(row)
            if log:
                log(f"{label} {pct}%: " + "  ".join(f"{r['policy']} {r['hit_rate']:.3f}"
                                                    for r in trows if r["budget_pct"] == pct))
        rows += trows
        if png:
            _plot(out_dir / f"sweep_{label}.png", label, trows, policies, budgets)
    if png and len(sources) > 1:
        _plot_grid(out_dir / "sweep.png", rows, [label for label, _, _ in sources], policies, budgets)
    with open(out_dir / "sweep.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for row in rows:
            w.writerow({k: (f"{v:.10g}" if k in _CSV_PARAMS else f"{v:.6f}" if isinstance(v, float) else v)
                        for k, v in row.items()})
    (out_dir / "sweep.md").write_text(markdown(rows, [label for label, _, _ in sources], policies, budgets))
    return rows


def markdown(rows, labels, policies, budgets):
    """Tables of hit rate, attention recall, bytes moved and modelled step time: a row per (trace,
    policy), a column per budget."""
    def cell(label, pol, b):
        return next((r for r in rows if r["trace"] == label and r["policy"] == pol and r["budget_pct"] == b), None)

    def table(metric, title, fmt, references=()):
        head = "| trace | policy | " + " | ".join(f"{b}%" for b in budgets) + " |"
        lines = [f"#### {title}", "", head, "|" + " --- |" * (len(budgets) + 2)]
        for label in labels:
            for pol in policies:
                cells = []
                for b in budgets:
                    r = cell(label, pol, b)
                    cells.append(fmt(r[metric]) if r else "")
                name = f"**{pol}**" if pol == "hw" else pol
                lines.append(f"| {label} | {name} | " + " | ".join(cells) + " |")
            for name, key in references:
                # the same for every policy and budget (no replay decides them): the first policy's
                cells = [fmt(cell(label, policies[0], b)[key]) if cell(label, policies[0], b) else ""
                         for b in budgets]
                lines.append(f"| {label} | *{name}* | " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    # the step time's parameters head its table when every row shares them; else they are per
    # policy (sweep.csv has them) and the references, which depend on them, are left out
    timings = {timing_label(r) for r in rows}
    shared = len(timings) == 1
    used = timings.pop() if shared else "parameters per policy: sweep.csv"
    step_title = f"Modelled time per decode step (µs; {used}; docs/policy.md, \"Modelled time per decode step\")"
    return "\n".join([table("hit_rate", "Hit rate (read_hits / reads)", lambda v: f"{v:.3f}"),
                      table("attention_recall", "Attention recall", lambda v: f"{v:.3f}"),
                      table("bytes_moved",
                            "Bytes moved from the slow tier: read misses + prefetches (MB, 512 B entries)",
                            lambda v: f"{v / 1e6:.0f}"),
                      table("modelled_step_us", step_title, lambda v: f"{v:.1f}",
                            (("every read from the fast tier", "modelled_step_us_all_fast"),
                             ("every read from the slow tier", "modelled_step_us_all_slow")) if shared else ())])


#: One look per policy, distinguishable in a palette PNG and in greyscale (marker + colour).
_STYLE = {
    "min": dict(color="black", linestyle="--", linewidth=2, label="min (Belady, no prefetch)"),
    "lru": dict(color="#1f77b4", marker="o"),
    "h2o": dict(color="#ff7f0e", marker="s"),
    "tova": dict(color="#2ca02c", marker="^"),
    "streaming": dict(color="#8c564b", marker="v"),
    "ema": dict(color="#9467bd", marker="x"),
    "ema+prefetch": dict(color="#7f7f7f", marker="+", linestyle=":"),
    "hw": dict(color="#d62728", marker="D", linewidth=2.4),
}


def _draw(ax, rows, policies, budgets, metric, title):
    for pol in policies:
        pts = sorted((r["budget_pct"], r[metric]) for r in rows if r["policy"] == pol)
        style = {"markersize": 3, "linewidth": 1.2, "label": pol, **_STYLE.get(pol, {})}
        ax.plot([p for p, _ in pts], [v for _, v in pts], **style)
    ax.set_xlabel("budget, % of context per queue", fontsize=8)
    ax.set_ylim(0, 1.02)
    ax.set_xticks(list(budgets))
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=9)


def _save(fig, path, dpi):
    """Save as a palette PNG (a few tens of KB) when Pillow is there (it comes with matplotlib)."""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    try:
        from PIL import Image
        buf.seek(0)
        with Image.open(buf) as im:
            im.convert("RGB").quantize(colors=128).save(path, optimize=True)
    except ImportError:
        path.write_bytes(buf.getvalue())


def _plot(path, label, rows, policies, budgets):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), constrained_layout=True)
    _draw(axes[0], rows, policies, budgets, "hit_rate", f"{label}: hit rate")
    _draw(axes[1], rows, policies, budgets, "attention_recall", f"{label}: attention recall")
    axes[1].legend(fontsize=7, loc="lower right")
    _save(fig, path, 80)
    plt.close(fig)


def _plot_grid(path, rows, labels, policies, budgets):
    """Every trace in one figure: a row per trace, hit rate and attention recall."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(labels), 2, figsize=(8, 2.3 * len(labels)), constrained_layout=True,
                             squeeze=False)
    for k, label in enumerate(labels):
        trows = [r for r in rows if r["trace"] == label]
        _draw(axes[k][0], trows, policies, budgets, "hit_rate", f"{label}: hit rate")
        _draw(axes[k][1], trows, policies, budgets, "attention_recall", f"{label}: attention recall")
    axes[0][1].legend(fontsize=6, loc="lower right")
    _save(fig, path, 60)
    plt.close(fig)


def _sweep(args):
    import sys

    from cxlkv.errors import CxlkvError
    from cxlkv.models import policy as P
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies:
        raise CxlkvError(f"--policies: no policy in '{args.policies}'; valid policies: {', '.join(P.POLICIES)}")
    for pol in policies:
        if pol not in P.POLICIES:
            raise CxlkvError(f"unknown policy '{pol}'; valid policies: {', '.join(P.POLICIES)}")
    if len(set(policies)) != len(policies):
        raise CxlkvError(f"--policies: '{args.policies}' names a policy twice")
    try:
        budgets = [float(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError:
        raise CxlkvError(f"--budgets: '{args.budgets}' is not a comma-separated list of percentages") from None
    if not budgets:
        raise CxlkvError(f"--budgets: no percentage in '{args.budgets}'")
    for b in budgets:
        if not 0 < b <= 100:        # NaN too
            raise CxlkvError(f"--budgets: {b} is not in (0, 100]")
    budgets = [int(b) if b == int(b) else b for b in budgets]
    if len(set(budgets)) != len(budgets):
        raise CxlkvError(f"--budgets: '{args.budgets}' names a budget twice")
    overrides = _params(args.param)
    _check_sweep_params(overrides, policies)
    sources = _sweep_sources(args)
    if not args.no_png:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CxlkvError("the PNG needs matplotlib (pip install 'cxlkv[plot]'), or pass --no-png") from None
    sweep(sources, policies, budgets, overrides, args.out, png=not args.no_png,
          log=lambda m: print(m, file=sys.stderr))
    print(f"wrote {args.out}/sweep.csv, sweep.md" + ("" if args.no_png else f" and {len(sources)} PNG(s)"))
    return 0
