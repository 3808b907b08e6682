"""`cxlkv trace dump-hf`, `train-tiny` and `fit-mixed`: real attention traces from a Llama-architecture model.

``cxlkv.sw.cli_trace`` calls :func:`add_subcommands` with its subparsers
object; each subcommand sets ``_run`` (the top-level CLI calls ``args._run(args)``)
and ``_trace_run`` to the same function. torch and transformers (the optional
extra ``traces``) are imported only when a subcommand runs. The module also runs
on its own: ``python -m cxlkv.sw.cli_trace_hf dump-hf ...``.
"""
import sys


def _subcommand(subparsers, name, run, **kw):
    """Subcommand ``name`` of ``subparsers`` (``help``, ``description``: ``kw``) that runs ``run``."""
    p = subparsers.add_parser(name, **kw)
    p.set_defaults(_run=run, _trace_run=run)
    return p


def add_subcommands(subparsers):
    d = _subcommand(
        subparsers, "dump-hf", run_dump, help="dump a contract trace from a causal LM's attention (Hugging Face, eager)",
        description="Run a causal LM (a local checkpoint directory, or 'tiny' for a random tiny "
                    "Llama) one token at a time with output_attentions, teacher-forced over --text "
                    "(or --generate), and write per (layer, KV head) the reads of the positions whose "
                    "attention, averaged over the KV group's query heads, is in the top-k or at least "
                    "a threshold. Needs the 'traces' extra; never downloads anything.")
    d.add_argument("--model", required=True, metavar="PATH_OR_TINY",
                   help="local checkpoint directory (config.json + weights), or 'tiny'")
    d.add_argument("--text", required=True, metavar="FILE", help="source text (held-out text for a trained model)")
    d.add_argument("--text-offset", type=int, default=0, metavar="BYTES",
                   help="start this many bytes into --text (default 0)")
    d.add_argument("--prefill", type=int, required=True, metavar="N", help="prompt tokens written at step 0")
    d.add_argument("--steps", type=int, required=True, metavar="S", help="decode steps")
    sel = d.add_mutually_exclusive_group()
    sel.add_argument("--topk", type=int, metavar="K", help="read the K highest-weight positions per step (default 32)")
    sel.add_argument("--threshold", type=float, metavar="T", help="read every position with weight >= T")
    d.add_argument("--generate", action="store_true",
                   help="feed back the greedy next token instead of the text's (teacher forcing is the default)")
    d.add_argument("--seed", type=int, default=0, help="torch seed (and the tiny model's init seed)")
    d.add_argument("--out", required=True, metavar="FILE.npz", help="trace to write")
    d.add_argument("--save-kv", metavar="LAYERS", help="also save K and V of these layers ('0,3', '0-2', 'all')")
    d.add_argument("--kv-out", metavar="FILE.npz", help="where --save-kv writes (required with it)")

    t = _subcommand(
        subparsers, "train-tiny", run_train, help="train a small byte-level Llama (RoPE, GQA) on the Python stdlib source, on CPU",
        description="Train a small Llama-architecture model with a byte vocabulary on the Python "
                    "standard library's source for a bounded time, and save it (safetensors), its "
                    "training record and the held-out text to --out-model. Needs the 'traces' extra.")
    t.add_argument("--out-model", required=True, metavar="DIR", help="directory for the model (not shipped)")
    t.add_argument("--minutes", type=float, default=13.0, help="wall-clock limit, 0 for none (default 13)")
    t.add_argument("--max-steps", type=int, default=1200, help="step limit; the LR schedule ends here (default 1200)")
    t.add_argument("--stop-at-step", type=int, metavar="N",
                   help="end at step N whatever the clock says: repeats a run the time limit stopped at N")
    t.add_argument("--batch", type=int, default=8, help="sequences per step (default 8)")
    t.add_argument("--seq", type=int, default=512, help="bytes per sequence = max positions (default 512)")
    t.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (default 2e-3)")
    t.add_argument("--layers", type=int, default=4)
    t.add_argument("--hidden", type=int, default=128)
    t.add_argument("--heads", type=int, default=8, help="query heads (default 8)")
    t.add_argument("--kv-heads", type=int, default=2, help="KV heads (default 2)")
    t.add_argument("--intermediate", type=int, default=384, help="MLP width (default 384)")
    t.add_argument("--rope-theta", type=float, default=10000.0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    t.add_argument("--log", metavar="FILE", help="also append progress lines to FILE")

    f = _subcommand(
        subparsers, "fit-mixed", run_fit, help="fit the synthetic 'mixed' family's parameters to a real (top-k) dump",
        description="Coordinate-descent fit of tracegen's 'mixed' parameters so that the synthetic "
                    "trace's statistics (sink share, locality, concentration, persistence, head "
                    "stability, cold reads) match those of a dump-hf trace of the same geometry. "
                    "Writes a JSON that 'trace synth --params' and tracegen.load_params read. numpy only.")
    f.add_argument("trace", metavar="TRACE.npz", help="a dump-hf trace made with --topk")
    f.add_argument("--out", required=True, metavar="FILE.json", help="parameters to write")
    f.add_argument("--evals", type=int, default=120, help="synth+stats evaluations at most (default 120)")
    f.add_argument("--seed", type=int, default=0, help="synth seed used during the fit (default 0)")


def run_dump(args):
    from pathlib import Path

    from cxlkv.errors import CxlkvError
    from cxlkv.models import hftrace

    if args.save_kv and not args.kv_out:
        raise CxlkvError("--save-kv needs --kv-out FILE.npz")
    if args.kv_out and not args.save_kv:
        raise CxlkvError("--kv-out needs --save-kv LAYERS")
    try:
        text = Path(args.text).read_bytes()
    except OSError as exc:
        raise CxlkvError(f"--text: cannot read {args.text}: {exc.strerror}") from None
    # --topk and --threshold are mutually exclusive (argparse); neither means top-32.
    topk = args.topk if args.topk is not None else (None if args.threshold is not None else 32)
    trace, kv = hftrace.dump_trace(
        args.model, text, prefill=args.prefill, steps=args.steps, topk=topk, threshold=args.threshold,
        generate=args.generate, seed=args.seed, text_name=Path(args.text).name,
        text_offset=args.text_offset, save_kv=args.save_kv,
        progress=lambda m: print(f"dump-hf: {m}", file=sys.stderr))
    hftrace.write_dump(args.out, trace, kv, args.kv_out)
    reads = int((trace.op == 0).sum())
    print(f"wrote {args.out}: {len(trace)} events ({reads} reads, {len(trace) - reads} writes), "
          f"{trace.n_layers} layers x {trace.n_kv_heads} KV heads"
          + (f"; K/V of layers {args.save_kv} to {args.kv_out}" if kv is not None else ""))
    return 0


def run_train(args):
    from cxlkv.models import hftrace

    log_file = open(args.log, "a", buffering=1) if args.log else None

    def log(line):
        print(line, flush=True)
        if log_file:
            print(line, file=log_file)

    try:
        rec = hftrace.train_tiny(
            args.out_model, minutes=args.minutes, max_steps=args.max_steps, stop_at_step=args.stop_at_step, batch=args.batch, seq=args.seq,
            lr=args.lr, seed=args.seed, threads=args.threads, layers=args.layers, hidden=args.hidden,
            heads=args.heads, kv_heads=args.kv_heads, intermediate=args.intermediate,
            rope_theta=args.rope_theta, log=log)
    finally:
        if log_file:
            log_file.close()
    print(f"saved {args.out_model} ({rec['steps']} steps, held-out {rec['heldout_bits_per_byte']} bits/byte)")
    return 0


def run_fit(args):
    import json
    from pathlib import Path

    from cxlkv.errors import CxlkvError
    from cxlkv.models import hftrace
    from cxlkv.models.trace import load_trace

    if args.evals < 1:
        raise CxlkvError(f"--evals must be >= 1, got {args.evals}")
    real = load_trace(args.trace)
    if real.meta.get("generator") != "cxlkv.models.hftrace.dump_trace":
        raise CxlkvError(f"{args.trace}: not a dump-hf trace (meta generator is "
                         f"{real.meta.get('generator')!r}); fit-mixed needs its prefill/steps/top-k in meta")
    out_path = Path(args.out)
    try:                            # before the fit, which takes minutes: a bad --out fails at once
        out_path.parent.mkdir(parents=True, exist_ok=True)
        if out_path.is_dir():
            raise IsADirectoryError(21, "is a directory", str(out_path))
    except OSError as exc:
        raise CxlkvError(f"--out {out_path}: {exc.strerror or exc}") from None
    params, report = hftrace.fit_mixed(real, evals=args.evals, seed=args.seed,
                                       log=lambda m: print(m, file=sys.stderr))
    out = hftrace.calibrated_params_json(params, report, args.trace, real.meta)
    out_path.write_text(json.dumps(out, indent=2) + "\n")
    width = max(len(k) for k in report["target"])
    print(f"{'statistic':<{width}}  {'real':>7}  {'fitted':>7}  {'seed+1':>7}")
    for k, v in report["target"].items():
        print(f"{k:<{width}}  {v:7.4f}  {report['fitted'][k]:7.4f}  {report['fitted_other_seed'][k]:7.4f}")
    print(f"loss {report['start_loss']:.5f} (mixed preset) -> {report['loss']:.5f} after "
          f"{report['evaluations']} evaluations ({report['loss_other_seed']:.5f} with synth seed "
          f"{args.seed + 1}); wrote {args.out}")
    return 0


def main(argv=None):
    import argparse

    from cxlkv.errors import CxlkvError
    p = argparse.ArgumentParser(prog="cxlkv trace")
    add_subcommands(p.add_subparsers(dest="trace_cmd", metavar="ACTION", required=True))
    args = p.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except CxlkvError as exc:
        print(f"cxlkv: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
