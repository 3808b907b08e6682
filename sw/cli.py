"""The `cxlkv` command: one entry point, one module per subcommand.

Each subcommand lives in its own module, ``cxlkv.sw.cli_<name>``, exposing
``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
Modules are imported only to build the parser; heavy imports (numpy, numba,
amaranth, cocotb) belong inside ``run`` so that start-up stays lean.
"""
import argparse
import importlib
import sys

from cxlkv import __version__
from cxlkv.errors import CxlkvError

#: Subcommands in the order ``--help`` lists them; each has its module (a missing one is an error).
SUBCOMMANDS = ("trace", "policy", "score", "quant", "bisnoop", "ctl")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="cxlkv",
        description="KV-cache-aware CXL memory controller: traces, policy simulator, "
                    "golden models, RTL scenario runners and the device driver.")
    parser.add_argument("--version", action="version", version=f"cxlkv {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        mod = importlib.import_module(f"cxlkv.sw.cli_{name}")
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except CxlkvError as exc:
        print(f"cxlkv: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        # a --build or an input too large for this machine: say so in one line, not a traceback
        print("cxlkv: error: out of memory (a --build geometry, tier size or trace too large for this "
              "machine?)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130                              # 128 + SIGINT, as a shell reports it; nothing printed
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
