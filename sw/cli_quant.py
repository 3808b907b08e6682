"""`cxlkv quant`: the KV quantizer's golden model from the shell (error statistics, attention error, one line)."""
from cxlkv.sw.argtypes import nonneg_int

HELP = "KV quantizer golden model: error statistics on synthetic lines, attention-output error, one line"


def add_arguments(p):
    sub = p.add_subparsers(dest="quant_cmd", metavar="ACTION", required=True)
    e = sub.add_parser("error", help="round-trip error per format on synthetic lines")
    e.add_argument("--fmt", action="append", choices=("fp16", "fp8", "int8", "int4"),
                   help="format (repeatable; default: all)")
    e.add_argument("--dist", default="gaussian", choices=("gaussian", "outlier", "uniform"),
                   help="synthetic distribution (default gaussian)")
    e.add_argument("--lines", type=int, default=100_000, help="number of lines (default 100000)")
    e.add_argument("--seed", type=nonneg_int, default=1, help="random seed (default 1)")
    e.add_argument("--json", action="store_true", help="print one JSON object per format")
    a = sub.add_parser("attention", help="error of softmax(q K^T) V with K, V stored quantized")
    a.add_argument("--fmt", action="append", choices=("fp16", "fp8", "int8", "int4"),
                   help="format (repeatable; default: all)")
    a.add_argument("--tokens", type=int, default=2048, help="context length (default 2048)")
    a.add_argument("--head-dim", type=int, default=128, help="head dimension, a multiple of 32 (default 128)")
    a.add_argument("--seed", type=nonneg_int, default=1, help="random seed (default 1)")
    a.add_argument("--json", action="store_true", help="print one JSON object per format")
    ln = sub.add_parser("line", help="quantize one line of 32 values and show the stored blob and the values read back")
    ln.add_argument("--fmt", required=True, choices=("fp16", "fp8", "int8", "int4"))
    ln.add_argument("values", nargs="+", help="1 to 32 values, each within FP16's range (fewer than 32 are "
                                            "repeated cyclically; inf and nan are FP16 values too); put -- "
                                            "before the values when one is negative in exponent form or -inf")


def _positive(name, v):
    from cxlkv.errors import CxlkvError
    if v <= 0:
        raise CxlkvError(f"--{name} must be positive, got {v}")


#: the smallest magnitude that FP16's round-to-nearest-even takes to Inf (65504 + half an ULP of 32)
FP16_OVERFLOW = 65520.0


def json_line(record: dict) -> str:
    """One JSON object, standard JSON only: a non-finite figure (fp16's SNR, with no error at all, is
    +Inf) is written as null, which every JSON reader takes; Python's default would write Infinity."""
    import json
    import math
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
    return json.dumps(clean, allow_nan=False)


def run(args):
    import numpy as np

    from cxlkv.errors import CxlkvError
    from cxlkv.models import quant as M

    if args.quant_cmd == "line":
        try:
            vals = [float(v) for v in args.values]
        except ValueError as exc:
            raise CxlkvError(f"values must be numbers: {exc}") from None
        if len(vals) > M.LANES:
            raise CxlkvError(f"a line holds {M.LANES} values, got {len(vals)}")
        fp16_max = float(np.finfo(np.float16).max)
        # the host writes FP16: a value FP16 rounds to Inf (|v| >= 65520, half an ULP above 65504) is
        # refused rather than converted; below that it rounds to a finite FP16 like any other value
        # (a number written out that Python's float already takes to inf, e.g. 1e400, is beyond it too:
        # only the words inf/infinity/nan name FP16's own non-finite values)
        big = [t if not np.isfinite(v) else f"{v:g}" for t, v in zip(args.values, vals)
               if (np.isfinite(v) and abs(v) >= FP16_OVERFLOW)
               or (not np.isfinite(v) and t.strip().lstrip("+-").lower() not in ("inf", "infinity", "nan"))]
        if big:
            raise CxlkvError(f"{big[0]} is beyond FP16's range (it rounds to Inf; the largest FP16 is "
                             f"±{fp16_max:g}); the host writes FP16 lines")
        x = np.resize(np.array(vals), M.LANES).astype(np.float16)
        blob = M.quantize_line(x, args.fmt)
        y = M.dequantize_line(blob, args.fmt)
        stored = "raw (line holds Inf/NaN)" if len(blob) == M.LINE_BYTES and args.fmt != "fp16" else args.fmt
        print(f"stored as {stored}, {len(blob)} bytes: {blob.hex()}")
        print("in : " + " ".join(f"{v:.6g}" for v in x.astype(np.float64)))
        print("out: " + " ".join(f"{v:.6g}" for v in y.astype(np.float64)))
        return 0

    fmts = args.fmt or list(M.FORMATS)
    rng = np.random.default_rng(args.seed)
    if args.quant_cmd == "error":
        _positive("lines", args.lines)
        bits = M.synthetic_lines(args.dist, args.lines, rng)
        rows = [M.error_stats(bits, f) for f in fmts]
        if args.json:
            for r in rows:
                print(json_line({**r, "dist": args.dist, "seed": args.seed}))
            return 0
        print(f"{args.lines} {args.dist} lines, seed {args.seed}")
        print(f"{'format':6}  {'bits/value':>10}  {'SNR dB':>7}  {'rel RMS':>9}  {'max err/amax':>12}  "
              f"{'SNR dB, free scale':>18}")
        for r in rows:
            free = f"{r['snr_db_free_scale']:.2f}" if "snr_db_free_scale" in r else "-"
            print(f"{r['format']:6}  {r['bits_per_value']:>10.3f}  {r['snr_db']:>7.2f}  {r['rel_rms']:>9.2e}  "
                  f"{r['max_err_over_amax']:>12.2e}  {free:>18}")
        return 0

    _positive("tokens", args.tokens)
    _positive("head-dim", args.head_dim)
    rows = [M.attention_error(f, np.random.default_rng(args.seed), tokens=args.tokens, head_dim=args.head_dim)
            for f in fmts]
    if args.json:
        for r in rows:
            print(json_line({**r, "seed": args.seed}))
        return 0
    print(f"softmax(q K^T / sqrt(d)) V, {args.tokens} tokens, head_dim {args.head_dim}, 16 queries, "
          f"K with 4 outlier channels (x10), seed {args.seed}; error against FP16 K, V")
    print(f"{'format':6}  {'rel L2':>9}  {'max abs':>9}  {'max weight err':>14}")
    for r in rows:
        print(f"{r['format']:6}  {r['rel_l2']:>9.2e}  {r['max_abs']:>9.2e}  {r['max_weight_err']:>14.2e}")
    return 0
