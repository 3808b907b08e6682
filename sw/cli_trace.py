"""`cxlkv trace`: synthesize KV access traces, print their statistics, validate trace files.

``trace synth`` writes a family of :mod:`cxlkv.models.tracegen` to an ``.npz``;
``trace info`` prints :mod:`cxlkv.models.tracestats` (a table, or ``--json``);
``trace validate`` checks a file against the contract's trace format;
``trace shuffle-reads`` writes a copy with the reads of each step and queue in a random order.

Extension point: if a module ``cxlkv.sw.cli_trace_hf`` exists, its
``add_subcommands(subparsers)`` adds more actions (real-model traces:
``dump-hf``, ``train-tiny``) to this subcommand's parser. An action it adds
must ``set_defaults(_trace_run=<callable(args) -> int>)``; :func:`run` calls it
(``trace_run`` is accepted too).
Only the absence of that module itself is ignored: an import error inside it
surfaces. It is imported when the parser is built, so it must keep heavy
imports (torch, transformers, numpy) inside its actions.
"""
import argparse
import importlib
import textwrap

HELP = "KV access traces: synthesize, inspect, validate and transform them, dump them from a model's attention"

#: The families of cxlkv.models.tracegen.FAMILIES, repeated here so that building
#: the parser imports no numpy (tests/test_cli_trace.py keeps the two equal).
FAMILY_NAMES = ("sinks", "recent", "heavy", "needle", "heads", "dense_early", "mixed")

_HF_MODULE = "cxlkv.sw.cli_trace_hf"


def _load_hf():
    try:
        return importlib.import_module(_HF_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name == _HF_MODULE:
            return None
        raise


def add_arguments(p):
    sub = p.add_subparsers(dest="trace_cmd", metavar="ACTION", required=True)

    s = sub.add_parser("synth", help="write a synthetic decode trace of one family",
                       description="Write a deterministic synthetic decode trace (docs/tracegen.md). "
                                   f"Families: {', '.join(FAMILY_NAMES)}.")
    s.add_argument("--family", required=True, metavar="F", help=f"one of {', '.join(FAMILY_NAMES)}")
    s.add_argument("--out", required=True, metavar="FILE.npz", help="output trace file")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.add_argument("--layers", type=int, default=4, help="layers (default 4)")
    s.add_argument("--kv-heads", type=int, default=2, help="KV heads per layer (default 2)")
    s.add_argument("--prefill", type=int, default=512, help="prompt positions written at step 0 (default 512)")
    s.add_argument("--steps", type=int, default=512, help="decode steps (default 512)")
    s.add_argument("--params", metavar="FILE.json",
                   help="JSON object of parameter overrides (keys starting with '_' are ignored)")
    s.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override one generator parameter (repeatable; applied after --params)")

    i = sub.add_parser("info", help="print a trace's statistics",
                       description="Events, geometry, reads per step, score concentration, sink share, "
                                   "attention mass within +-W of the newest position, top-k persistence, "
                                   "cold reads (definitions: docs/tracegen.md).")
    i.add_argument("file", metavar="FILE", help="trace .npz")
    i.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    v = sub.add_parser("validate", help="check a trace file against the contract's format",
                       description="Exit 0 and print a one-line summary if FILE is a valid trace; "
                                   "otherwise print the first violation (key, event index) and exit 2.")
    v.add_argument("file", metavar="FILE", help="trace .npz")

    r = sub.add_parser("shuffle-reads", help="copy a trace with each query's reads in a random order",
                       description="Write OUT: IN with the reads of each (step, queue) in a random order (each "
                                   "read takes another read's place in the same step and queue); writes, steps "
                                   "and everything else stay where they were. Deterministic per --seed. A check "
                                   "of anything that depends on reads arriving in ascending position order, as "
                                   "they do in synthesized and dumped traces (docs/traces.md).")
    r.add_argument("file", metavar="IN", help="trace .npz")
    r.add_argument("out", metavar="OUT", help="output trace .npz")
    r.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    hf = _load_hf()
    if hf is not None:
        hf.add_subcommands(sub)
    # read from the parser, so that every action is named, the extension's too; filled here so that
    # no action name (train-tiny) is split at its hyphen
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.description = textwrap.fill(f"KV access traces. ACTION is one of: {', '.join(sub.choices)} "
                                  "(each: cxlkv trace ACTION --help).", width=78, break_on_hyphens=False)


def _parse_param(text):
    import json

    from cxlkv.errors import CxlkvError
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CxlkvError(f"--param must be KEY=VALUE, got {text!r}")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise CxlkvError(f"--param {key}: value must be a number, got {value!r}") from None
    return key.strip(), parsed


def _synth(args):
    import time

    from cxlkv.errors import CxlkvError
    from cxlkv.models import tracegen
    from cxlkv.models.trace import save_trace
    params = tracegen.load_params(args.params) if args.params else {}
    params.update(_parse_param(t) for t in args.param)
    t0 = time.perf_counter()
    trace = tracegen.synth(args.family, n_layers=args.layers, n_kv_heads=args.kv_heads,
                           prefill=args.prefill, steps=args.steps, seed=args.seed, **params)
    if args.params:
        trace.meta["params_file"] = str(args.params)
    try:
        save_trace(args.out, trace)
    except OSError as exc:
        raise CxlkvError(f"{args.out}: cannot write the trace ({exc.strerror or exc})") from None
    print(f"wrote {args.out}: {len(trace):,} events, family {args.family}, seed {args.seed}, "
          f"{trace.n_layers} layers x {trace.n_kv_heads} KV heads, prefill {args.prefill}, "
          f"{args.steps} steps ({time.perf_counter() - t0:.2f} s)")
    return 0


def _info(args):
    import json

    from cxlkv.models.trace import load_trace
    from cxlkv.models.tracestats import format_stats, trace_stats
    trace = load_trace(args.file)
    stats = trace_stats(trace)
    if args.json:
        print(json.dumps({"file": str(args.file), **stats, "meta": trace.meta}, sort_keys=True))
    else:
        print(f"{args.file}")
        print(format_stats(stats))
    return 0


def _validate(args):
    from cxlkv.models.trace import load_trace
    trace = load_trace(args.file)
    steps = f"steps {int(trace.step[0])}..{int(trace.step[-1])}" if len(trace) else "no steps"
    print(f"{args.file}: valid trace, {len(trace):,} events, {trace.n_layers} layers x "
          f"{trace.n_kv_heads} KV heads, {steps}")
    return 0


def _shuffle_reads(args):
    from pathlib import Path

    from cxlkv.errors import CxlkvError
    from cxlkv.models.trace import load_trace, save_trace, shuffle_reads
    if Path(args.out).resolve() == Path(args.file).resolve():
        raise CxlkvError(f"{args.out}: the output would overwrite the input; give another file")
    trace = load_trace(args.file)
    shuffled = shuffle_reads(trace, args.seed)
    shuffled.meta["shuffled_reads"]["source"] = str(args.file)
    try:
        save_trace(args.out, shuffled)
    except OSError as exc:
        raise CxlkvError(f"{args.out}: cannot write the trace ({exc.strerror or exc})") from None
    reads = int((shuffled.op == 0).sum())
    print(f"wrote {args.out}: {len(shuffled):,} events ({reads:,} reads shuffled within their step and queue, "
          f"seed {args.seed})")
    return 0


_ACTIONS = {"synth": _synth, "info": _info, "validate": _validate, "shuffle-reads": _shuffle_reads}


def run(args):
    extra = getattr(args, "_trace_run", None) or getattr(args, "trace_run", None)
    if extra is not None:
        return extra(args)
    return _ACTIONS[args.trace_cmd](args)
