"""``make verilog``: write the Verilog of every block's configurations into a directory."""
import argparse
import sys
import time
from pathlib import Path

from cxlkv import discover


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cxlkv.hdl.generate", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("build/verilog"))
    ap.add_argument("--only", nargs="*", help="generate only these tops")
    args = ap.parse_args(argv)
    from cxlkv.tb.runner import generate_verilog
    args.out.mkdir(parents=True, exist_ok=True)
    for name, factory in discover.verilog_tops().items():
        if args.only and name not in args.only:
            continue
        t0 = time.monotonic()
        text = generate_verilog(factory(), name)
        path = args.out / f"{name}.v"
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        print(f"{path}  ({len(text.splitlines())} lines, {time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
