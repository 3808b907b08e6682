"""`cxlkv bisnoop`: run Back-Invalidate scenarios through the golden model or the RTL; random host runs."""

HELP = "CXL Back-Invalidate snoop engine: run scenarios (model or --rtl), random host-cache runs"


def add_arguments(p):
    sub = p.add_subparsers(dest="bisnoop_cmd", metavar="ACTION", required=True)
    r = sub.add_parser("run", help="run a scenario (JSON lines in, the device's messages out as JSON lines)",
                       description="Each input line is one message to the device (m2s_req, m2s_rwd, m2s_birsp, "
                                   "policy; also tick and config), fully handled before the next. Output: the "
                                   "device's messages in send order (s2m_drs, s2m_ndr, s2m_bisnp, policy_rsp, "
                                   "error). Format: docs/bisnoop.md.")
    r.add_argument("scenario", help="scenario file (.jsonl)")
    r.add_argument("--rtl", action="store_true",
                   help="run it on the RTL (Verilator + cocotb; builds once, cached under build/sim/)")
    h = sub.add_parser("host", help="random runs of the MESI host-cache model against the golden model")
    h.add_argument("--steps", type=int, default=20000, help="steps per run (default 20000)")
    h.add_argument("--runs", type=int, default=1, help="number of runs, seeds SEED, SEED+1, ... (default 1)")
    h.add_argument("--seed", type=int, default=1, help="first seed (default 1)")


def _read(path):
    from cxlkv.errors import CxlkvError
    try:
        with open(path) as f:
            return f.read()
    except OSError as exc:
        raise CxlkvError(f"cannot read scenario {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CxlkvError(f"scenario {path} is not UTF-8 text (JSON lines, docs/bisnoop.md)") from None


def run(args):
    import sys

    from cxlkv.errors import CxlkvError
    from cxlkv.models import bisnoop as M
    if args.bisnoop_cmd == "host":
        import random

        from cxlkv.tb.bisnoop.host import HostCheckError, model_run
        if args.steps < 1 or args.runs < 1:
            raise CxlkvError("--steps and --runs must be >= 1")
        for seed in range(args.seed, args.seed + args.runs):
            try:
                host, _ = model_run(args.steps, random.Random(seed))
            except HostCheckError as exc:
                print(f"seed {seed}: FAILED: {exc}")
                return 1
            print(f"seed {seed}: ok  " + " ".join(f"{k}={v}" for k, v in host.stats.items()))
        return 0
    text = _read(args.scenario)
    dw = M.SCENARIO_CONFIG["data_width"]
    items = M.parse_scenario(text, dw, args.scenario)        # malformed input stops here, line named
    if not args.rtl:
        outputs, _ = M.run_model(items)
        for line in M.scenario_lines(outputs, dw):
            print(line)
        return 0
    from cxlkv.tb.bisnoop.rtl import run_scenarios_rtl
    results, passed, rundir = run_scenarios_rtl([args.scenario])
    for line in next(iter(results.values())):
        print(line)
    if not passed:
        print(f"cxlkv: the RTL's output differs from the golden model's; see {rundir}/sim.log", file=sys.stderr)
        return 1
    return 0
