"""`cxlkv ctl`: talk to a controller through the host driver, over any transport."""
from cxlkv.sw.argtypes import address, name_values, positive_int

HELP = "talk to a cxlkv controller through the driver (model, sim, mmio, serial)"

TRANSPORTS = ("model", "mmio", "sim", "serial")

#: The options that configure one kind of transport (args attribute: option, the transports it applies
#: to): given with another transport, one is refused, not ignored. Their defaults are None (or []) so
#: that a given one can be told from one left out.
TRANSPORT_OPTIONS = {"device": ("--device", ("mmio", "serial")), "offset": ("--offset", ("mmio",)),
                     "baud": ("--baud", ("serial",)), "build": ("--build", ("model", "sim"))}
DEFAULT_BAUD = 115200

#: ControllerModel's constructor parameters (the Controller's too, less its test-only hold_domain),
#: repeated here so that --help imports neither (tests/test_cli.py keeps them equal).
BUILD_NAMES = ("n_layers", "n_kv_heads", "entries_log2", "bitags", "tracker", "n_buckets", "max_budget", "tiers",
               "tier_lines", "tier_line_bits", "tier_depth", "prefetch", "host_data", "bisnoop", "tracker_select")
#: Build parameters whose value is a name, and those that are 0 or 1 (the rest are integers).
BUILD_TEXT = ("tracker", "tracker_select", "tiers")
BUILD_FLAGS = ("prefetch", "host_data", "bisnoop")


def add_arguments(p):
    p.add_argument("--transport", "-t", choices=TRANSPORTS, default="model",
                   help="model: the golden model; sim: the Verilated controller (built on first use); "
                        "mmio: a PCIe BAR resource file or /dev/uioN; serial: the FPGA board's UART bridge (--device /dev/ttyUSB0)")
    p.add_argument("--device", help="mmio: /sys/bus/pci/devices/<bdf>/resourceN, /dev/uioN or a file; "
                                    "serial: the port, e.g. /dev/ttyUSB0")
    p.add_argument("--baud", type=positive_int, default=None,
                   help=f"serial: baud rate of the board's UART bridge (default {DEFAULT_BAUD})")
    p.add_argument("--offset", type=address, default=None,
                   help="mmio: byte offset of the register block in the device file (a multiple of 4; default 0)")
    p.add_argument("--build", action="append", default=[], metavar="NAME=VALUE",
                   help="sim, model: a parameter of the controller build (docs/controller.md): "
                        f"{', '.join(n for n in BUILD_NAMES if n not in BUILD_TEXT + BUILD_FLAGS)} (integers); "
                        f"{', '.join(BUILD_TEXT)} (names; tracker_select: ring or matrix); "
                        f"{', '.join(BUILD_FLAGS)} (0 or 1); repeatable, each name once")
    sub = p.add_subparsers(dest="ctl_cmd", metavar="ACTION", required=True)
    i = sub.add_parser("info", help="identity, version and geometry read from the device")
    i.add_argument("--json", action="store_true")
    s = sub.add_parser("stats", help="the device's counters, status and cold-list state")
    s.add_argument("--json", action="store_true")
    d = sub.add_parser("coldlist", help="drain the cold list: the evicted units pending, oldest first "
                                        "(CHMU hot-list entries), handed back to the device")
    d.add_argument("--json", action="store_true")
    c = sub.add_parser("config", help="show the configuration, or set NAME=VALUE pairs")
    c.add_argument("settings", nargs="*", metavar="NAME=VALUE")
    c.add_argument("--json", action="store_true")
    r = sub.add_parser("replay", help="drive a trace through the device's tracker; print its counters "
                                      "with the keys of `cxlkv policy replay --json` (sim, model, serial; "
                                      "--via hdm: sim, model)")
    r.add_argument("trace", help="trace file (.npz)")
    r.add_argument("--entries", "-C", required=True,
                   help="fast-tier entries per queue, or a percentage of the trace's context (e.g. 10%%)")
    r.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="hw parameter (a register each): hw_alpha, hw_tau, hw_pinned, hw_rank_tau, hw_rank_tau_long, "
                        "hw_bucket_bits, hw_write_sample, hw_read_credit; window (prefetch, a device with "
                        "CAPS.prefetch) and prefetch_trigger_all (1 every read, the default as in `policy replay`; "
                        "0 demand misses) (repeatable)")
    r.add_argument("--via", choices=("events", "hdm"), default="events",
                   help="events: the tracker's direct event port; hdm: line accesses and hints through the "
                        "HDM address decode, as a host sends them")
    r.add_argument("--json", action="store_true")


def _check_transport_options(args):
    """Refuse every transport option given that does not configure ``args.transport``."""
    from cxlkv.errors import CxlkvError
    wrong = [f"{option} applies to the {' and '.join(kinds)} transport{'s' if len(kinds) > 1 else ''}"
             for dest, (option, kinds) in TRANSPORT_OPTIONS.items()
             if getattr(args, dest) not in (None, []) and args.transport not in kinds]
    if wrong:
        raise CxlkvError(f"{'; '.join(wrong)}, not {args.transport}")


def _transport(args):
    from cxlkv.errors import CxlkvError
    from cxlkv.sw.transport import MmioTransport, ModelTransport, SimTransport
    build = _build_params(args.build)
    if args.transport in ("model", "sim"):
        _note_no_tracker(build)
    try:
        if args.transport == "model":
            return ModelTransport(**build)
        if args.transport == "sim":
            return SimTransport(**build)
    except (TypeError, ValueError) as exc:
        raise CxlkvError(f"bad --build parameters: {exc}") from None
    if args.transport == "mmio":
        if not args.device:
            raise CxlkvError("--transport mmio needs --device PATH")
        return MmioTransport(args.device, offset=args.offset or 0)
    if args.transport == "serial":
        if not args.device:
            raise CxlkvError("--transport serial needs --device PORT (e.g. /dev/ttyUSB0)")
        from cxlkv.sw.serial_transport import SerialTransport
        return SerialTransport(args.device, baud=DEFAULT_BAUD if args.baud is None else args.baud)
    raise CxlkvError(f"unknown transport '{args.transport}'")


def _note_no_tracker(build):
    """tracker='auto' (the default) builds no tracker, and so none of the blocks behind it, beyond
    ONCHIP_MAX_WORDS words: say so on stderr, since `info` would otherwise just show empty caps."""
    import inspect
    import sys

    from cxlkv.models.controller import ONCHIP_MAX_WORDS, ControllerModel, check_geometry, tracker_placement
    p = {k: v.default for k, v in inspect.signature(ControllerModel).parameters.items()} | build
    try:
        # a geometry no build takes gets the build's refusal, not a note first
        check_geometry(p["n_layers"], p["n_kv_heads"], p["entries_log2"], p["bitags"])
        queues, positions = p["n_layers"] * p["n_kv_heads"], 1 << p["entries_log2"]
        if p["tracker"] != "auto" or tracker_placement("auto", queues, positions) != "none":
            return
    except (TypeError, ValueError):
        return                                  # a bad value: the build itself refuses it with its message
    print(f"cxlkv: note: tracker=auto builds no tracker (nor the HDM decode, prefetch engine, phase detector "
          f"and tier mover behind it) for {queues} queues x {positions:,} positions, more than "
          f"{ONCHIP_MAX_WORDS:,} words on chip; --build tracker=external builds one with its metadata "
          f"outside the top (or a smaller entries_log2 one on chip)", file=sys.stderr)


def _build_params(items):
    from cxlkv.errors import CxlkvError
    out = name_values(items, "--build", valid=BUILD_NAMES, noun="build parameter", strings=BUILD_TEXT)
    for name in BUILD_FLAGS:
        if name in out:
            if out[name] not in (0, 1):
                raise CxlkvError(f"bad --build {name}={out[name]}: {name} is 0 or 1")
            out[name] = bool(out[name])
    return out


def _table(d):
    w = max(len(k) for k in d)
    return "\n".join(f"{k.ljust(w)}  {v}" for k, v in d.items())


def run(args):
    import json

    from cxlkv.sw.driver import CONFIG_FIELDS, SyncDevice
    _check_transport_options(args)
    if args.ctl_cmd == "replay":
        return _replay(args)
    with SyncDevice(_transport(args)) as dev:
        if args.ctl_cmd == "info":
            out = dev.info()
        elif args.ctl_cmd == "stats":
            out = {**dev.counters(), **{f"status.{k}": v for k, v in dev.status().items()},
                   **{f"coldlist.{k}": v for k, v in dev.cold_list().items()}}
        elif args.ctl_cmd == "coldlist":
            entries = dev.drain_cold_list()
            if args.json:
                print(json.dumps(entries))
            else:
                print("\n".join(f"{e['entry']:#018x}  queue {e['queue']} (layer {e['layer']}, head {e['head']}) "
                                f"position {e['position']}  count {e['count']}" for e in entries) or "(empty)")
            return 0
        else:
            settings = name_values(args.settings, "setting", valid=CONFIG_FIELDS, noun="setting")
            if settings:
                dev.configure(**settings)
            out = dev.config()
        print(json.dumps(out) if args.json else _table(out))
    return 0


def _replay(args):
    import json

    from cxlkv.models.trace import load_trace
    from cxlkv.sw.cli_policy import _budget
    from cxlkv.sw.driver import SyncDevice, replay_params
    overrides = name_values(args.param, "--param")
    replay_params(overrides)                    # a bad name refused before a sim harness is built
    trace = load_trace(args.trace)           # refused whole if malformed, before the device starts
    entries = _budget(args.entries, trace)      # the same reading of --entries as `policy replay`
    with SyncDevice(_transport(args)) as dev:
        out = dev.replay(trace, entries, via=args.via, **overrides)
    if args.json:
        print(json.dumps(out))
    else:
        keys = ("policy", "entries", "events", "reads", "read_hits", "hit_rate", "writes", "fills", "evictions",
                "prefetches", "prefetch_hits", "attention_recall", "no_victim", "transport")
        print(_table({k: out[k] for k in keys}))
    return 0
