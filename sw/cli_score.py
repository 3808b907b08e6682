"""`cxlkv score`: evaluate the scoring golden model (EMA step, eviction priority) from the shell."""

HELP = "evaluate the EMA scoring golden model (one EMA step, an eviction priority in float and fixed point)"


def add_arguments(p):
    sub = p.add_subparsers(dest="score_cmd", metavar="ACTION", required=True)
    e = sub.add_parser("ema", help="one EMA step: ema + round((sample - ema) * alpha)")
    e.add_argument("--ema", type=float, required=True, help="current EMA, 0..1 (float) ")
    e.add_argument("--sample", type=float, required=True, help="attention sample, 0..1")
    e.add_argument("--alpha", type=float, required=True, help="EMA weight, 0..1")
    pr = sub.add_parser("priority", help="eviction priority of an entry, float rule and hardware fixed point")
    pr.add_argument("--ema", type=float, required=True, help="EMA score, 0..1")
    pr.add_argument("--age", type=int, required=True, help="steps since last access")
    pr.add_argument("--tau", type=int, default=1000, help="recency time constant in steps (default 1000)")


def _uq16(name, x):
    from cxlkv.errors import CxlkvError
    if not 0.0 <= x < 1.0:
        raise CxlkvError(f"--{name} must be in [0, 1), got {x}")
    return min(int(round(x * 65536)), 0xFFFF)


def run(args):
    from cxlkv.errors import CxlkvError
    from cxlkv.models import scoring as M
    if args.score_cmd == "ema":
        e, s, a = _uq16("ema", args.ema), _uq16("sample", args.sample), _uq16("alpha", args.alpha)
        new = M.ema_update(e, s, a)
        print(f"ema {e:#06x} sample {s:#06x} alpha {a:#06x} -> {new:#06x} ({new / 65536:.6f})")
        return 0
    if args.age < 0:
        raise CxlkvError(f"--age must be >= 0, got {args.age}")
    e = _uq16("ema", args.ema)
    a, tau, clamped = M.sanitize_config(1, min(max(args.tau, 0), (1 << M.TAU_BITS) - 1))
    if clamped:
        print(f"note: tau {args.tau} is outside the hardware's range {M.TAU_MIN}..{M.TAU_MAX}; "
              f"the hardware applies tau = {tau} and raises cfg_error")
    pf = M.priority_float(e / 65536, args.age, tau)
    px = M.priority_fixed(e, args.age, tau)
    print(f"priority_float = {pf:.6f}")
    print(f"priority_fixed = {px:#06x} ({px / 65536:.6f}), error {abs(px / 65536 - pf):.2e}")
    return 0
